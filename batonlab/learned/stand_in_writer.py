# SPDX-License-Identifier: BSD-3-Clause
"""A template "LLM" for the stand-in server: writes progress and reward functions from the field list.

It is no language model. It reads the observation fields named in the prompt, finds a position and
its target (`<name>_pos` with `<name>_target`, or `<name>` with `<name>_target`), and fills a template
whose kernel width depends on the request's sample seed (so K samples differ and a search has something to
choose between). Its first answer for a sample seed that is a multiple of 5 imports a module, which the sandbox
rejects: the search's correction loop (the error goes back as a follow-up message) then runs in tests.
It lets `batonlab reward search` and the count bonus run end to end on machines without a model server.
"""

from __future__ import annotations

import re

WIDTHS = (0.05, 0.1, 0.2, 0.4)
"""Kernel widths [m] the samples choose from."""


def _target_pair(prompt: str) -> tuple[str, str] | None:
    fields = re.findall(r'obs\["([A-Za-z0-9_]+)"\]', prompt)
    for name in fields:
        if name.endswith("_target"):
            stem = name[: -len("_target")]
            for candidate in (f"{stem}_pos", stem):
                if candidate in fields:
                    return candidate, name
    return None


def write(messages: list[dict], body: dict) -> str:
    """The answer to a chat request: a ```python block (or a refusal when no target pair is found)."""
    prompt = "\n".join(m["content"] for m in messages if isinstance(m.get("content"), str))
    pair = _target_pair(prompt)
    if pair is None:
        return "I cannot find a position and a target among the observation fields."
    pos, target = pair
    sample_seed = int(body.get("seed") or 0) // 1000  # write_function sends sample_seed * 1000 + attempt
    width = WIDTHS[sample_seed % len(WIDTHS)]
    is_correction = sum(m.get("role") == "user" for m in messages) > 1
    if "def progress(obs)" in prompt:
        code = (f"def progress(obs):\n    d = T.norm(obs[\"{pos}\"] - obs[\"{target}\"], dim=-1)\n"
                "    return T.clamp(1.0 - d / 0.5, 0.0, 1.0)\n")
    else:
        code = (f"def reward(obs):\n    d = T.norm(obs[\"{pos}\"] - obs[\"{target}\"], dim=-1)\n"
                f"    return {{\"distance\": -d, \"near\": 1.0 - T.tanh(d / {width}), "
                f"\"precise\": T.exp(-T.square(d / {width / 2}))}}\n")
    if sample_seed % 5 == 0 and not is_correction:
        code = "import numpy as np\n" + code
    return f"```python\n{code}```"
