# SPDX-License-Identifier: BSD-3-Clause
"""Reward terms built from learned or generated functions: potential shaping
from a fitted Φ, count bonuses over an LLM-written progress function, and an LLM-written reward.

The progress reward against a reference demonstration is `batonlab.rewards.progress.ProgressReward`.
Every term here reads the post-step state through the observation group's term functions
(`batonlab.learned.features`), not `env.obs` (which the reward manager sees one step old).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from batonlab.learned.errors import LearnedRewardError, one_line
from batonlab.learned.features import read_features, read_fields
from batonlab.learned.preference import check_fields, load_potential
from batonlab.learned.sandbox import SandboxedFunction, SandboxError
from batonlab.env.terms import ManagerTerm


class PotentialShaping(ManagerTerm):
    """Potential-based shaping γΦ(s′) − Φ(s) from a potential file (`batonlab reward fit-potential`).

    Φ is frozen. Φ(s′) = 0 where the episode terminated (not where it was only truncated by the time
    limit: that state is not terminal for the task). After a reset Φ(s) is the new episode's first
    state. The term returns the shaping divided by the step's dt, so that weight w adds exactly
    w · (γΦ(s′) − Φ(s)) per step.

    Args:
        potential: Path of the potential file; "" turns the term off (it returns zeros), so a task can
            carry the term and a user switch it on with `env.rewards.<name>.params.potential=PATH`.
        gamma: The agent's discount (shaping preserves the optimal policy only with the same γ).
    """

    def __init__(self, env, potential: str = "", gamma: float = 0.99):
        self.env, self.off = env, not potential
        if self.off:
            return
        self.model, self.header = load_potential(potential)
        self.model.to(env.device)
        self.where, self.group, self.gamma = f"PotentialShaping('{potential}')", self.header["group"], gamma
        self.fields = [name for name, _ in self.header["fields"]]
        self.prev: torch.Tensor | None = None
        """Φ(s) of each env's current state; set at the first use (the env builds its observation
        terms, which Φ reads, after its reward terms)."""

    def __call__(self, env) -> torch.Tensor:
        if self.off:
            return torch.zeros(env.num_envs, device=env.device)
        if self.prev is None:
            self.prev = self._phi()
        phi = self._phi().masked_fill(env.termination_manager.terminated, 0.0)
        shaping = self.gamma * phi - self.prev
        self.prev = phi
        return shaping / env.step_dt

    def reset(self, env_ids: torch.Tensor) -> None:
        """Take Φ(s) of the resetting envs from their new episode's first state (nothing when the term is off)."""
        if self.off:
            return
        # Called after the reset envs got their new state: their next step starts from it.
        if self.prev is None:
            self.prev = self._phi()
        self.prev[env_ids] = self._phi()[env_ids]

    @torch.no_grad()
    def _phi(self) -> torch.Tensor:
        if self.prev is None:
            check_fields(self.header, self.env, self.where)
        return self.model(read_features(self.env, self.group, self.fields))


class ProgressCountBonus(ManagerTerm):
    """β / √n(bin): an exploration bonus over the bins of an LLM-written progress function.

    The function (a `progress(obs)` in a Python file, see `batonlab.learned.llm_progress`) runs in the
    sandbox on the observation group's fields and is clipped to [0, 1]; its range is cut into `bins`
    equal bins whose visit counts n are shared by all envs. Rarely reached progress pays the most.
    If the function fails during training (time limit, error, wrong shape, non-finite output), training
    stops with a `LearnedRewardError` naming the file: a bonus the user asked for never silently
    disappears. With `turn_off_on_failure=True` the bonus instead turns off for the rest of the run
    with one message on stderr, and the other rewards train on.

    Args:
        function: Path of the Python file with the progress function (`batonlab reward write-progress`);
            "" turns the term off.
        group: Observation group whose fields the function reads.
        bins: Number of progress bins.
        beta: Bonus scale.
        turn_off_on_failure: On a failure of the function, train on without the bonus instead of stopping
            (`env.rewards.<name>.params.turn_off_on_failure=true`).
    """

    def __init__(self, env, function: str = "", group: str = "policy", bins: int = 20, beta: float = 0.5,
                 entry: str = "progress", time_limit_s: float = 2.0, turn_off_on_failure: bool = False):
        self.failed: str | None = "off" if not function else None
        self.turn_off_on_failure = turn_off_on_failure
        self.last_progress = torch.zeros(env.num_envs, device=env.device)
        self.function = None
        if not function:
            return
        self.where = f"ProgressCountBonus('{function}')"
        self.group, self.bins, self.beta = group, bins, beta
        self.function = sandboxed_file(function, entry, "tensor", time_limit_s, self.where, "progress")
        self.counts = torch.zeros(bins, device=env.device)

    def __call__(self, env) -> torch.Tensor:
        if self.failed is not None:
            return torch.zeros(env.num_envs, device=env.device)
        try:
            progress = self.function(read_fields(env, self.group)).to(env.device)
        except SandboxError as err:
            if not self.turn_off_on_failure:
                raise LearnedRewardError(f"{self.where}: the progress function failed: {one_line(err)} (pass "
                                         "params.turn_off_on_failure=true to train on without the bonus)") from None
            self.failed = str(err)
            print(f"[batonlab] ProgressCountBonus turned off: {one_line(err)}", file=sys.stderr)
            return torch.zeros(env.num_envs, device=env.device)
        self.last_progress = progress.clamp(0.0, 1.0)
        bin_ids = (self.last_progress * self.bins).long().clamp_(max=self.bins - 1)
        self.counts += torch.bincount(bin_ids, minlength=self.bins)
        return self.beta / self.counts[bin_ids].sqrt()

    def close(self) -> None:
        """Stop the sandboxed progress function's child process, if the term has one."""
        if self.function is not None:
            self.function.close()


class GeneratedReward(ManagerTerm):
    """An LLM-written `reward(obs) -> {component: (num_envs,)}`, run in the sandbox; the reward is the sum.

    Keeps running means of each component (for the search's reward reflection). A failure during
    training raises: a reward search records the trial as failed with the message.

    Args:
        function: Path of the Python file with the reward function.
        group: Observation group whose fields the function reads.
    """

    def __init__(self, env, function: str, group: str = "policy", entry: str = "reward", time_limit_s: float = 2.0):
        self.group = group
        self.function = sandboxed_file(function, entry, "components", time_limit_s, f"GeneratedReward('{function}')",
                                       "reward")
        self.component_sums: dict[str, torch.Tensor] = {}
        """Sum over env steps and envs of each component (a tensor: read once per `component_stats`, no sync per step)."""
        self.component_sq_sums: dict[str, torch.Tensor] = {}
        self.samples = 0

    def __call__(self, env) -> torch.Tensor:
        components = self.function(read_fields(env, self.group))
        total = torch.zeros(env.num_envs, device=env.device)
        for name, value in components.items():
            value = value.to(env.device)
            total += value
            self.component_sums[name] = self.component_sums.get(name, 0.0) + value.sum()
            self.component_sq_sums[name] = self.component_sq_sums.get(name, 0.0) + value.square().sum()
        self.samples += env.num_envs
        return total

    def component_stats(self) -> dict[str, dict[str, float]]:
        """{component: {"mean", "std"}} per env step since the last call; the window then restarts."""
        stats = {}
        for name, total in self.component_sums.items():
            mean = float(total) / max(self.samples, 1)
            var = float(self.component_sq_sums[name]) / max(self.samples, 1) - mean**2
            stats[name] = {"mean": mean, "std": max(var, 0.0) ** 0.5}
        self.component_sums, self.component_sq_sums, self.samples = {}, {}, 0
        return stats

    def close(self) -> None:
        """Stop the sandboxed reward function's child process."""
        self.function.close()


def sandboxed_file(function: str, entry: str, returns: str, time_limit_s: float, where: str, kind: str
                   ) -> SandboxedFunction:
    """The function `entry` of the Python file `function`, checked and started in the sandbox.

    Raises:
        LearnedRewardError: the file is missing or not text, or the sandbox refuses its code (the message
            names the term, the file and the rule it breaks).
    """
    path = Path(function)
    if not path.is_file():
        raise LearnedRewardError(f"{where}: {kind} function file '{function}' does not exist (expected a Python file "
                                 f"defining {entry}(obs))")
    try:
        source = path.read_text()
    except UnicodeDecodeError:
        raise LearnedRewardError(f"{where}: '{function}' is not a text file (expected a Python file defining "
                                 f"{entry}(obs))") from None
    try:
        return SandboxedFunction(source, entry, returns=returns, time_limit_s=time_limit_s)
    except SandboxError as err:
        raise LearnedRewardError(f"{where}: {one_line(err)}") from None
