# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab reward write-progress task=NAME ...`: an LLM writes a progress function for count bonuses.

    batonlab reward write-progress task=arm_reach_sparse llm_base_url=http://127.0.0.1:8000/v1 llm_model=Qwen2.5-7B-Instruct
    batonlab train task=arm_reach_sparse env.rewards.count_bonus.params.function=logs/progress_fn/arm_reach_sparse.py

The LLM is told the task description and the observation group's fields; its function is checked in
the sandbox on a sample batch (errors go back to it, `attempts` answers at most) and written to `out`.
If the function fails while training (time limit, error, wrong shape), training stops with one line;
`env.rewards.count_bonus.params.turn_off_on_failure=true` trains on without the bonus instead.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from batonlab.cli.common import CliError
from batonlab.cli.learned_common import fields_and_sample, llm_client, option, parse_subcommand, task_brief


@dataclass
class WriteProgressOptions:
    """The `key=value` options of `batonlab reward write-progress`."""
    task: str | None = option(None, "registered task")
    group: str = option("policy", "observation group whose fields the function reads")
    attempts: int = option(3, "answers at most (a rejected function's error goes back to the LLM)")
    seed: int = option(0, "sample seed sent with the request")
    out: str | None = option(None, "output file (default logs/progress_fn/<task>.py)")
    llm: str = option("api", "api (OpenAI-compatible server) or stand-in (local template writer)")
    llm_base_url: str | None = option(None, "e.g. http://127.0.0.1:8000/v1 (default BATONLAB_LLM_BASE_URL)")
    llm_model: str | None = option(None, "model name (default BATONLAB_LLM_MODEL)")
    llm_cache: str | None = option(None, "on-disk answer cache folder")


def run(args: list[str]) -> int:
    """`batonlab reward write-progress`: have the LLM write a progress function; returns the exit code."""
    options = parse_subcommand(args, WriteProgressOptions(), "write-progress", __doc__, needs_task=True)
    if options is None:
        return 0
    from batonlab.learned.llm_progress import PROGRESS_SYSTEM, progress_prompt, write_function

    description, _ = task_brief(options.task)
    fields, sample = fields_and_sample(options.task, options.group)
    with llm_client(options.llm, options.llm_base_url, options.llm_model, options.llm_cache) as client:
        written = write_function(client, PROGRESS_SYSTEM, progress_prompt(description, fields), "progress", "tensor",
                                 sample, attempts=options.attempts, seed=options.seed)
    for k, error in enumerate(written.errors):
        print(f"[batonlab] answer {k + 1} rejected: {error}", file=sys.stderr)
    if written.source is None:
        raise CliError(f"reward write-progress: no answer passed the sandbox in {options.attempts} attempts")
    out = Path(options.out or Path("logs") / "progress_fn" / f"{options.task}.py")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(written.source)
    print(f"[batonlab] wrote {out}")
    return 0
