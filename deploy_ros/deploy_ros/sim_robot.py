# SPDX-License-Identifier: BSD-3-Clause
"""The simulated robot behind `sim_robot_node`: one world of a task, one physics step at a time.

This is the simulator side of sim-to-sim, so unlike the rest of `deploy_ros` it imports the
training stack (batonlab.env, batonlab.tasks, torch, mujoco). It reuses the task's env with one
world: the same MJCF, the same position actuators (PD at the physics rate inside MuJoCo), the same
randomisation, target commands, terminations and success test as training and `batonlab play`.
What changes is the loop: physics advances one step per call and targets arrive from outside
whenever they arrive. Every `decimation` physics steps the env's own `end_control_period` runs (the
episode clock, terminations, success, command timers, resets, interval events), so episodes end
on the task's time limit and on its failures exactly as in `play`.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import torch

from batonlab.env import mdp
from batonlab.env.env import BatonEnv
from batonlab.tasks import make_task_cfg

_SCALAR_JOINTS = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


class ConfigError(ValueError):
    """The sim robot cannot be built as configured (unknown task, unknown joints)."""


def seed_episode(env: BatonEnv, seed: int) -> None:
    """Make the next `env.reset()` the episode of `seed`: re-seed the generator, redraw startup
    randomisation and the interval-event timers (the push schedule).

    `SimRobot` and the `play` comparison both call this before their reset, so that episode `seed`
    has the same dynamics parameters, initial pose, targets and pushes on both sides, whatever ran
    before it.
    """
    env.generator.manual_seed(int(seed))
    env.event_manager.apply("startup", env.all_env_ids)
    env.event_manager.rearm_intervals(env.all_env_ids)


@dataclass
class EpisodeResult:
    """How one episode ended, as the env's `end_control_period` reported it."""

    index: int
    seed: int
    success: bool
    length: int
    """Control steps the episode lasted (the task's time limit unless it failed)."""
    terminated: bool
    """Ended by a failure term (a fall, physics divergence) rather than by the time limit."""
    final_distance: float | None
    """Distance between the last command and its sensor, for position commands [m]."""


class SimRobot:
    """One simulated robot of `task` (play configuration).

    Until `next_episode` is first called the robot is in its warm-up (the initial state of `seed`,
    episodes that end there are reset by the task's rules and not counted); episode i then starts
    from the initial state of seed `seed + i`.

    Args:
        task: Registered task name.
        seed: Seed of the first episode.

    Raises:
        ConfigError: `task` is not a registered task.
    """

    def __init__(self, task: str, seed: int = 0):
        try:  # a registered name, an entry-point plugin or a `<module>:<factory>` import path
            cfg = make_task_cfg(task, play=True)
        except KeyError as err:
            raise ConfigError(err.args[0]) from None
        cfg.num_envs = 1
        cfg.seed = int(seed)
        cfg.sim.num_threads = 1
        torch.set_num_threads(1)
        self.env = env = BatonEnv(cfg)
        self.task = task
        self.base_seed = int(seed)
        model = env.scene.model
        self.physics_dt = float(cfg.sim.physics_dt)
        self.decimation = int(cfg.sim.decimation)
        self.control_dt = env.step_dt
        # Every 1-DoF joint of the scene is part of the robot's joint states (fingers included).
        joints = [j for j in range(model.njnt) if int(model.jnt_type[j]) in _SCALAR_JOINTS]
        self.joint_names = [model.joint(j).name for j in joints]
        self._qadr = np.array([model.jnt_qposadr[j] for j in joints])
        self._dadr = np.array([model.jnt_dofadr[j] for j in joints])
        # Commanded joints: those of the task's action terms, through their actuators and ctrl ranges.
        terms = list(env.action_manager.terms.values())
        self.command_joints = [j for t in terms for j in t.joint_names]
        self._actuators = torch.cat([t.actuator_ids for t in terms])
        self._ctrl_low = torch.cat([t.ctrl_low for t in terms])
        self._ctrl_high = torch.cat([t.ctrl_high for t in terms])
        self.targets = torch.cat([t.offset for t in terms]).clone()
        """Actuator targets applied at every physics step (default pose until commands arrive)."""
        # Sensors the policy reads, and the task's commands: published by the node.
        self.sensor_names = [
            t.params["name"] for t in cfg.observations["policy"].terms.values() if t.func is mdp.sensor
        ]
        self.command_names = list(env.command_manager.terms)
        self._distance_pair = next(((p["command"], p["sensor"]) for p in (t.params for t in cfg.rewards.values())
                                    if "command" in p and "sensor" in p), None)
        """(command, sensor) of a position command, whose distance is reported with each episode."""
        self.episode_index = -1
        self.episode_seed = self.base_seed
        self.physics_steps = 0
        self._diverged_in_period = False

    # Episodes.

    def next_episode(self) -> None:
        """Start the next episode from the initial state of its seed, as `play` starts one."""
        self.episode_index += 1
        self.episode_seed = self.base_seed + self.episode_index
        seed_episode(self.env, self.episode_seed)
        self.env.reset()

    # Commands.

    def set_targets(self, names, values) -> None:
        """Joint targets by name (the joints of the task's action terms)."""
        for name, value in zip(names, values):
            self.targets[self.command_joints.index(name)] = float(value)

    # Stepping.

    def step(self) -> EpisodeResult | None:
        """One physics step with the current targets; returns the result of an episode that just ended.

        The episode that ends is followed at once by the next one (`next_episode`).
        """
        env = self.env
        env.sim.ctrl[0, self._actuators] = torch.maximum(torch.minimum(self.targets, self._ctrl_high), self._ctrl_low)
        env.sim.step(1)
        self.physics_steps += 1
        self._diverged_in_period |= bool(env.sim.diverged[0])
        if self.physics_steps % self.decimation:
            return None
        # A decimated step reports a divergence anywhere in its substeps; so must this period.
        env.sim.diverged[0] = self._diverged_in_period
        self._diverged_in_period = False
        if self.episode_index < 0:
            # Before episode 0 (the policy's soft start) the task's clock does not run: no time-outs,
            # no resets that would move the robot under a policy that is still starting.
            return None
        # The last state of the period, before the command timers move on (as the success test sees it).
        distance = self._command_distance()
        _, _, terminated, truncated, extras = env.end_control_period()
        if not bool(terminated[0] | truncated[0]):
            return None
        result = EpisodeResult(self.episode_index, self.episode_seed, bool(extras["success"][0]),
                               int(extras["episode_length"][0]), bool(terminated[0]), distance)
        self.next_episode()
        return result

    # State.

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Positions and velocities of `joint_names`."""
        return self.env.sim.qpos[0, self._qadr].double().numpy(), self.env.sim.qvel[0, self._dadr].double().numpy()

    def sensor(self, name: str) -> np.ndarray:
        return self.env.sim.sensor(name)[0].double().numpy()

    def command(self, name: str) -> np.ndarray:
        return self.env.command_manager.command(name)[0].double().numpy()

    def _command_distance(self) -> float | None:
        if self._distance_pair is None:
            return None
        command, sensor = self._distance_pair
        return float(np.linalg.norm(self.command(command) - self.sensor(sensor)))

    def close(self) -> None:
        self.env.close()
