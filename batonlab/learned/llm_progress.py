# SPDX-License-Identifier: BSD-3-Clause
"""Python functions written by an LLM from a task description: prompts, code extraction, validation.

The LLM sees the task description and the observation fields its function will receive (names,
shapes, the functions that compute them); it answers with Python. The code is checked and run in the
sandbox on a sample batch; an error goes back to the LLM as a follow-up message, a few times at most.
Used for progress functions (count bonuses, `ProgressCountBonus`) and for the reward search's reward
functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from batonlab.learned.features import FieldSpec, describe_fields
from batonlab.learned.sandbox import SandboxedFunction, SandboxError, namespace_summary

SANDBOX_RULES = f"""Rules for the code:
- Write exactly one top-level function and nothing else: no imports, no classes, no helper modules.
- Use only arithmetic, indexing and these names (the sandbox allows nothing else):
{namespace_summary()}
- Every tensor is batched: the first dimension is the environment; never loop over environments.
Answer with a single ```python code block."""
"""What the LLM is told about the sandbox, built from the sandbox's own allowlists so the two agree."""

PROGRESS_SYSTEM = "You write short, correct PyTorch functions that measure a robot's progress on a task."
REWARD_SYSTEM = ("You are a reward engineer. You write dense reward functions in PyTorch that make reinforcement "
                 "learning succeed at a robot task.")


def progress_prompt(task_description: str, fields: list[FieldSpec]) -> str:
    """The LLM prompt asking for `progress(obs)` (num_envs,) in [0, 1] over the given observation fields."""
    return (f"Task: {task_description}\n\nWrite `def progress(obs):` returning a tensor of shape (num_envs,) in [0, 1]: "
            "0 at the start of a typical episode, 1 when the task is complete, increasing as the robot gets closer "
            f"to completing it.\n`obs` is a dict of float tensors:\n{describe_fields(fields)}\n\n{SANDBOX_RULES}")


def reward_prompt(task_description: str, fields: list[FieldSpec], task_source: str) -> str:
    """The LLM prompt asking for `reward(obs)`, a dict of (num_envs,) components, given the task's source."""
    return (f"Task: {task_description}\n\nThe environment's source code (for reference):\n```python\n{task_source}\n```\n\n"
            "Write `def reward(obs):` returning a dict of named reward components, each a tensor of shape (num_envs,); "
            "the reward is their sum (scale components to roughly [-1, 1] per step). The task's success is judged by its "
            f"success term, which you cannot change.\n`obs` is a dict of float tensors:\n{describe_fields(fields)}\n\n"
            f"{SANDBOX_RULES}")


def extract_code(answer: str) -> str | None:
    """The first ```python block of an answer (or a bare answer that defines a function); None if there is none."""
    blocks = re.findall(r"```(?:python|py)?\s*\n(.*?)```", answer, flags=re.DOTALL)
    if blocks:
        return blocks[0].strip() + "\n"
    return answer.strip() + "\n" if answer.lstrip().startswith("def ") else None


@dataclass
class WrittenFunction:
    """An LLM-written function: the accepted source (or None) and why each rejected attempt failed."""
    source: str | None
    """The accepted code, or None when no attempt passed."""
    errors: list[str] = field(default_factory=list)
    """Why each rejected attempt was rejected (sent back to the LLM)."""


def write_function(client, system: str, prompt: str, entry: str, returns: str, sample_obs: dict[str, torch.Tensor],
                   attempts: int = 3, seed: int = 0) -> WrittenFunction:
    """Ask for a function, check it in the sandbox on `sample_obs`, send errors back; at most `attempts` answers.

    Never raises for bad answers: a function that never passes comes back with `source=None` and the errors.
    """
    messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    result = WrittenFunction(None)
    for attempt in range(attempts):
        answer = client.complete(messages, seed=seed * 1000 + attempt)
        if answer is None:
            result.errors.append("no answer from the LLM (request failed; see the client's stats)")
            continue
        source = extract_code(answer)
        error = "the answer has no ```python code block" if source is None else check_function(source, entry, returns, sample_obs)
        if error is None:
            result.source = source
            return result
        result.errors.append(error)
        messages += [{"role": "assistant", "content": answer},
                     {"role": "user", "content": f"That code was rejected: {error}\nFix it and answer with the full function."}]
    return result


def check_function(source: str, entry: str, returns: str, sample_obs: dict[str, torch.Tensor]) -> str | None:
    """None if the code passes the sandbox's checks and runs on `sample_obs`, else the reason."""
    try:
        with SandboxedFunction(source, entry, returns=returns) as function:
            function(sample_obs)
    except SandboxError as err:
        return str(err)
    return None
