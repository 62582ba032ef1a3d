# SPDX-License-Identifier: BSD-3-Clause
"""Command terms: per-env targets (poses, velocities) resampled on a timer."""

from __future__ import annotations

import abc

import torch

from batonlab.env.cfg import CommandTermCfg

_TIMER_EPS = 1e-4
"""Timers count down in float32 steps of step_dt; this absorbs the rounding of the sum."""


class CommandTerm(abc.ABC):
    """Base class: owns `command` (num_envs, dim) and the per-env resampling timer."""

    dim: int = 0
    fields: tuple[str, ...] = ()
    """Names of the command's components, in order (the manifest lists them, so a robot can fill
    them from its own messages, e.g. `cmd_vel`)."""

    def __init__(self, env, cfg: CommandTermCfg):
        self.env = env
        self.cfg = cfg
        self.command = torch.zeros(env.num_envs, self.dim, device=env.device)
        self.time_left = torch.zeros(env.num_envs, device=env.device)
        self.time_since_draw = torch.zeros(env.num_envs, device=env.device)
        """(num_envs,) time since each env's command was drawn [s] (settled-tracking metrics skip the first second)."""
        self._fixed: dict[int, float] = {}
        """Components held at a value (`fix_field`), by index."""
        self.metrics: dict[str, torch.Tensor] = {}
        """Per-env sums over the current episode (num_envs,) that `extras["command_metrics"]` reports
        before a reset zeroes them (`*_error` with `time`: `episode_mean_errors`); none by default."""

    def update(self, dt: float) -> None:
        """Advance timers and resample the envs whose timer ran out."""
        self.time_left -= dt
        self.time_since_draw += dt
        expired = (self.time_left <= _TIMER_EPS).nonzero().flatten()
        if expired.numel():
            self._resample(expired)

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        """Draw fresh commands and timers for the envs that start a new episode."""
        self._resample(env_ids)
        return {}

    def _resample(self, env_ids: torch.Tensor) -> None:
        low, high = self.cfg.resampling_time_range_s
        self.time_left[env_ids] = self.env.uniform(len(env_ids), low, high)
        self.time_since_draw[env_ids] = 0.0
        self.command[env_ids] = self.sample(len(env_ids))
        for index, value in self._fixed.items():
            self.command[env_ids, index] = value

    @abc.abstractmethod
    def sample(self, n: int) -> torch.Tensor:
        """New commands for n envs, shape (n, dim)."""

    def marker_id(self, mocap_body: str | None) -> int | None:
        """Mocap index of a marker body that shows the command in videos (None: no marker).

        Raises:
            KeyError: no such body. ValueError: the body is not a mocap body.
        """
        if mocap_body is None:
            return None
        mocap_id = int(self.env.scene.model.body_mocapid[self.env.scene.body_id(mocap_body)])
        if mocap_id < 0:
            raise ValueError(f"body '{mocap_body}' is not a mocap body")
        return mocap_id

    def default_value(self) -> tuple[float, ...] | None:
        """The command a robot uses before (or without) an operator, e.g. standing still; None:
        there is no safe default and the robot must receive one before it starts."""
        return None

    def hold(self, value: torch.Tensor, env_ids: torch.Tensor | None = None) -> None:
        """Set the command of `env_ids` (default: every env) to `value` (len(env_ids), dim) and keep it until the next
        call (an upper level's output, `batonlab.actions.command_layer`): no timer draws over it; a reset draws afresh
        until the next call."""
        ids = slice(None) if env_ids is None else env_ids
        self.command[ids] = value
        self.time_left[ids] = float("inf")
        for index, fixed in self._fixed.items():
            self.command[ids, index] = fixed

    def fix_field(self, field: str, value: float) -> None:
        """Hold one component at `value` from now on and in every later draw. `sample` still draws it
        (the value is written over the draw), so the random numbers drawn, and with them seeded
        episodes, stay those of the unfixed command (e.g. a height that `cmd_vel` cannot carry)."""
        if field not in self.fields:
            raise KeyError(f"unknown field '{field}' of {type(self).__name__}; fields: {list(self.fields)}")
        index = self.fields.index(field)
        self._fixed[index] = float(value)
        self.command[:, index] = float(value)


def episode_mean_errors(command_metrics: dict[str, dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Mean tracking errors of the episodes so far, per env: `<command>/<metric>` → (num_envs,).

    Reads `extras["command_metrics"]`: every metric named `*_error` of a command that also keeps
    `time` is an integral over the episode, so dividing by `time` gives its mean (e.g.
    `base_velocity/lin_vel_error` [m/s], `ee_target/ee_error` [m]). Read on the step an episode ends.
    """
    means = {}
    for command, metrics in command_metrics.items():
        if "time" not in metrics:
            continue
        time = metrics["time"].clamp(min=1e-6)
        means.update({f"{command}/{key}": value / time for key, value in metrics.items() if key.endswith("_error")})
    return means


class CommandManager:
    """Holds the command terms; `command(name)` is what observation and reward terms read."""

    def __init__(self, env, cfgs: dict[str, CommandTermCfg]):
        self.terms = {name: cfg.cls(env, cfg, **cfg.params) for name, cfg in cfgs.items()}

    def command(self, name: str) -> torch.Tensor:
        """The current value (num_envs, dim) of the command named `name`."""
        try:
            return self.terms[name].command
        except KeyError:
            raise KeyError(f"unknown command '{name}'; the task has {list(self.terms)}") from None

    def update(self, dt: float) -> None:
        """Advance every command's timers by `dt` [s] and resample those that ran out."""
        for term in self.terms.values():
            term.update(dt)

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        """Resample the commands of the envs that reset."""
        for term in self.terms.values():
            term.reset(env_ids)
        return {}
