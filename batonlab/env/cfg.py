# SPDX-License-Identifier: BSD-3-Clause
"""Task configuration: plain dataclasses holding dicts of named terms.

A task is data you can print. Factories (`tasks/*.py: make_<task>_cfg`) build a `TaskCfg`;
variants edit the returned instance. `__post_init__` is for validation only, never for
overriding values, so command-line overrides always win.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import mujoco

from batonlab.terrain import TerrainCfg

# Terms.


@dataclass
class TermCfg:
    """A term: a function `(env, **params) -> Tensor` or a class built as `cls(env, **params)`."""

    func: Callable[..., Any]
    """Function, or class deriving from its kind's base in `batonlab.env.terms` (`ManagerTerm`: `__call__`, `reset`)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments passed on every call; checked against the signature when the env is built."""


@dataclass
class ObsTermCfg(TermCfg):
    """One observation term: its function's output is noised, clipped, scaled, then stacked in history."""

    noise_std: float = 0.0
    """Std of additive Gaussian noise, applied only when the group enables corruption [term units]."""
    clip: tuple[float, float] | None = None
    """Clip range applied after noise, before scaling [term units]."""
    scale: float = 1.0
    """Multiplier applied last; the policy sees `scale * clip(term + noise)`."""
    history_length: int = 0
    """Number of past frames stacked (0 means only the current frame)."""
    delay_range_steps: tuple[int, int] = (0, 0)
    """Latency of the term [control steps]: each env draws its delay uniformly in this range at every
    reset and sees the value from that many steps ago (a perception pipeline's lag). Applied with the
    noise, only when the group enables corruption; the robot's own latency is real."""


@dataclass
class ObsGroupCfg:
    """A named group of observation terms, concatenated in insertion order."""

    terms: dict[str, ObsTermCfg]
    """Terms by name; the order of the dict is the order of the observation vector."""
    enable_corruption: bool = False
    """Add each term's noise and delay (training); play and export parity turn this off."""
    privileged: bool = False
    """Only the simulator can compute this group (exact object state, masses, contact flags, the
    privilege level): critics and teachers may read it, an exported policy never does."""


@dataclass
class RewardTermCfg(TermCfg):
    """A weighted reward term; the env adds `weight * value * step_dt` each step."""

    weight: float = 1.0
    """Positive weights reward, negative weights penalise."""


@dataclass
class CostTermCfg(TermCfg):
    """A constraint term for constrained RL (`batonlab.rl` P3O, PPO-Lagrangian): a per-step cost
    (num_envs,) >= 0 that the policy must keep, on average, at or below `limit`.

    Costs are best written as indicators (1.0 while the constraint is violated), so that the mean
    cost is the fraction of steps in violation and `limit` reads as an allowed violation rate.
    """

    limit: float = 0.0
    """Allowed mean cost per control step (for an indicator: the allowed fraction of steps in
    violation). The expected discounted cost limit of the constrained-RL literature is
    d_k = limit / (1 - gamma); curricula may move it during training (`env.cost_manager.limits`)."""


@dataclass
class PrivilegeTermCfg(TermCfg):
    """A privilege: help that exists only in simulation (a virtual force on the object, a contact
    switched off) and fades with the task's privilege level λ ∈ [0, 1] (`env.privilege_manager`).

    `func` is a `batonlab.env.terms.PrivilegeTerm` class built as `cls(env, **params)`.
    """


@dataclass
class TerminationTermCfg(TermCfg):
    """A termination condition returning a bool tensor (num_envs,)."""

    time_out: bool = False
    """True for truncations (the critic bootstraps), False for failures."""


@dataclass
class EventTermCfg(TermCfg):
    """Randomisation or perturbation `(env, env_ids, **params) -> None`."""

    mode: Literal["startup", "reset", "interval"] = "reset"
    """When it fires: once after build, on each reset, or on a per-env timer."""
    interval_range_s: tuple[float, float] = (0.0, 0.0)
    """For `interval` events: each env waits a uniform time in this range between firings [s]."""


@dataclass
class CurriculumTermCfg(TermCfg):
    """A curriculum `(env, env_ids, **params) -> float | dict` called with the envs that just reset.

    A class term (`batonlab.env.terms.CurriculumTerm`) keeps its state in `state_dict()`, so a
    resumed run continues where it stopped.
    """


@dataclass
class ActionTermCfg:
    """An action term: turns its slice of the policy output into actuator controls."""

    cls: type
    """A `batonlab.env.actions.ActionTerm` class, built as `cls(env, cfg)`."""
    joints: tuple[str, ...]
    """Joint names in policy order; each must be driven by exactly one actuator."""
    scale: float | dict[str, float] = 1.0
    """Action scale, one value or per joint [rad, rad/s or N·m per unit action]."""
    use_default_offset: bool = True
    """Add the default joint pose (position actions) so that zero action holds the default pose."""
    clip: tuple[float, float] | None = None
    """Clip the raw policy output before scaling."""
    max_target_rate: float | None = None
    """Position actions: train under the robot's command filter: each target is kept where the PD torque
    stays inside the actuator's force limit, then moves at most this fast from the previous target [rad/s or
    m/s] (written to the manifest; the robot applies the same rule). None: targets jump as the policy says."""
    params: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments of terms that are not joint actions (e.g. `VirtualForceAction`'s body)."""


@dataclass
class CommandTermCfg:
    """A command generator: resamples a per-env target on a timer."""

    cls: type
    """Class implementing the command (`batonlab.env.commands`)."""
    resampling_time_range_s: tuple[float, float] = (4.0, 4.0)
    """Each env draws the time to its next resample uniformly in this range [s]."""
    params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the class (ranges, frames)."""


# Scene and simulation.


@dataclass
class SceneCfg:
    """The MuJoCo scene: a function composing it with MjSpec, and the robot's default state."""

    build: Callable[[], mujoco.MjSpec]
    """Returns a fresh MjSpec of the whole scene (robot, objects, terrain, cameras)."""
    default_joint_pos: dict[str, float] = field(default_factory=dict)
    """Default joint positions by name [rad or m]; unnamed joints use the model's qpos0."""
    camera: str = "overview"
    """Camera used by `play` videos."""
    progress_camera: str = ""
    """Camera that frame-based learned rewards read (progress encoders, their demos, the reward term);
    empty: `camera`. A camera that keeps the goal in the middle of the picture (`arm_reach`'s
    `tool_view`, carried by the tool and looking at the target) makes one demonstration serve every
    goal: what changes from frame to frame is how far the robot is from the goal, not where the goal is."""
    progress_geom_groups: tuple[int, ...] | None = None
    """Geom groups drawn in those frames (None: MuJoCo's default, 0 to 2). `arm_reach` draws only the
    group of its target's progress marker, so that the arm's pose, which differs from goal to goal, is
    not in the picture."""
    progress_align_episodes: bool = True
    """Whether a progress encoder trains the episodes of one policy as a time-aligned group (their k-th
    frames paired as the same moment of the task, `train_encoder(aligned_groups=)`). True for a view
    that also shows what differs from episode to episode but not with progress (the arm's pose, where
    the object lies): pairing the same moment across episodes teaches the encoder to ignore it. False
    for a view that shows only progress and episodes that start at different progress: `arm_reach`'s
    `tool_view` shows only the marker, and its episodes start 8 to 48 cm from the target, so the k-th
    frames of two episodes are not at the same distance (aligned, the pooled Spearman on held-out
    frames was 0.77-0.86 over 6 encoder seeds; each episode alone, 0.85-0.86 over 8)."""
    terrain: TerrainCfg | None = None
    """Ground added to the scene (plane or level × type grid, `batonlab.terrain`); None: `build` brings its own."""
    fit: str = ""
    """A fitted overlay (`batonlab sysid`'s `fit.yaml`, `batonlab.robots.fitted`) written over the built scene: the
    robot's joint and actuator parameters as identified from its logs; empty: the model as built."""


@dataclass
class SimCfg:
    """Physics backend and timing."""

    backend: str = "mujoco"
    """`mujoco` (CPU, default) or `mujoco_warp` (GPU, also CPU for parity tests)."""
    device: str = "cpu"
    """Device of the backend tensors; `cuda:0` with mujoco_warp."""
    physics_dt: float = 0.005
    """Physics step [s]."""
    decimation: int = 4
    """Physics steps per policy step; the control period is `physics_dt * decimation` [s]."""
    num_threads: int = 0
    """CPU backend threads (0: one per core)."""
    max_joint_velocity: float = 1e3
    """Worlds exceeding this |qvel| are treated as diverged and reset [rad/s or m/s]."""


@dataclass
class DeployCfg:
    """What the robot side needs to know beyond the policy's own joints; written to the manifest.

    Training never reads it, except `held_joints`, which the task's hold event uses too, so the
    joints held in simulation and on the robot are the same list.
    """

    held_joints: tuple[str, ...] = ()
    """Actuated joints the policy does not drive, held at their default pose by their position
    servos (a stowed arm on a base-only policy). The robot side commands them too."""
    stop_behavior: str = "hold_then_damp"
    """The robot's safe stop (`batonlab.deploy.safety.STOP_BEHAVIORS`): "hold_then_damp" for a fixed
    arm, "crouch" for a self-balancing wheel-legged robot (damping its legs would drop it)."""
    stop_pose: dict[str, float] = field(default_factory=dict)
    """"crouch": position targets of the joints that move to a resting pose when stopped [rad or m]."""
    stop_time_s: float = 1.0
    """"crouch": time to move to `stop_pose` before the joints are damped [s]."""


@dataclass
class TaskCfg:
    """Everything that defines a task; the env is built from this alone."""

    scene: SceneCfg
    actions: dict[str, ActionTermCfg]
    observations: dict[str, ObsGroupCfg]
    rewards: dict[str, RewardTermCfg]
    terminations: dict[str, TerminationTermCfg] = field(default_factory=dict)
    commands: dict[str, CommandTermCfg] = field(default_factory=dict)
    events: dict[str, EventTermCfg] = field(default_factory=dict)
    costs: dict[str, CostTermCfg] = field(default_factory=dict)
    curriculum: dict[str, CurriculumTermCfg] = field(default_factory=dict)
    privileges: dict[str, PrivilegeTermCfg] = field(default_factory=dict)
    """Simulation-only help faded by `privilege_level` (virtual forces, relaxed contacts)."""
    privilege_level: float = 1.0
    """Initial privilege level λ ∈ [0, 1] (a schedule in `curriculum` lowers it); play and export run
    at 0. Ignored by tasks without privileges."""
    success: TermCfg | None = None
    """Bool term evaluated on the last step of each episode; its mean is the success rate."""
    progress: TermCfg | None = None
    """The simulator's true task progress in [0, 1] per env (privileged state), a `batonlab.env.terms.ProgressTerm`:
    what a scripted preference labeller judges and, counted from each episode's start, what learned progress
    estimates are checked against. Never a policy input and never a reward unless a reward term uses it."""
    expert: TermCfg | None = None
    """A scripted expert from privileged state, a `batonlab.env.terms.ExpertTerm`: the teacher of
    `agent.algorithm.class_name=Distillation teacher=expert`; None where the task has none."""
    sim: SimCfg = field(default_factory=SimCfg)
    num_envs: int = 1024
    """Number of parallel environments."""
    episode_length_s: float = 5.0
    """Episode duration before a time-out [s]."""
    seed: int = 0
    """Seed of the env's torch generator (commands, events, noise)."""
    deploy: DeployCfg = field(default_factory=DeployCfg)
    """Robot-side facts for the manifest (held joints, safe stop)."""
    only_positive_rewards: bool = False
    """Clip each step's total reward at zero (legged_gym's option): early in training, penalties
    then cannot outweigh the tracking terms and teach the policy to end episodes early. Terms in
    `termination_rewards` are added after the clip, so a fall still costs."""
    termination_rewards: tuple[str, ...] = ("terminated",)
    """Reward terms kept out of the `only_positive_rewards` clip (absent names are ignored)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check values that overrides can break; the env calls this again when it is built."""
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        if self.sim.decimation < 1:
            raise ValueError(f"sim.decimation must be >= 1, got {self.sim.decimation}")
        for name, group in self.observations.items():
            if not group.terms:
                raise ValueError(f"observation group '{name}' has no terms")
        if not 0.0 <= self.privilege_level <= 1.0:
            raise ValueError(f"privilege_level must be in [0, 1], got {self.privilege_level}")
        for name, group in self.observations.items():
            for term_name, term in group.terms.items():
                low, high = term.delay_range_steps
                if not 0 <= low <= high:
                    raise ValueError(f"observations['{name}']['{term_name}'].delay_range_steps must be 0 <= low <= high, "
                                     f"got {term.delay_range_steps}")
        if self.episode_length_s <= 0:
            raise ValueError(f"episode_length_s must be > 0, got {self.episode_length_s}")
