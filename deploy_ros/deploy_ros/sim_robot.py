# SPDX-License-Identifier: BSD-3-Clause
"""The simulated robot behind `sim_robot_node`: one world of a task, one physics step at a time.

This is the simulator side of sim-to-sim, so unlike the rest of `deploy_ros` it imports the
training stack (batonlab.env, batonlab.tasks, torch, mujoco). It reuses the task's env with one
world: the same MJCF, the same position actuators (PD at the physics rate inside MuJoCo), the same
randomisation, target commands and success test as training and `batonlab play`. What changes is
the loop: physics advances one step per call, targets arrive from outside whenever they arrive,
and the control-period bookkeeping (episode clock, command resampling, resets) runs every
`decimation` physics steps, in the order of `BatonEnv.step`.
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


def seed_episode(env: BatonEnv, seed: int) -> None:
    """Make the next `env.reset()` the episode of `seed`: re-seed the generator, redraw startup randomisation.

    `sim_robot_node` and the `play` comparison both call this before their reset, so that episode
    `seed` has the same dynamics parameters, initial pose and targets on both sides.
    """
    env.generator.manual_seed(int(seed))
    env.event_manager.apply("startup", env.all_env_ids)


@dataclass
class EpisodeResult:
    index: int
    seed: int
    success: bool
    final_distance: float | None
    """Distance between the last command and its sensor, for position commands [m]."""


class SimRobot:
    """One simulated robot of `task` (play configuration).

    Args:
        task: Registered task name.
        seed: Seed of the first episode; episode i uses `seed + i`.
    """

    def __init__(self, task: str, seed: int = 0):
        cfg = make_task_cfg(task, play=True)
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
        self.episode_index = -1
        self.episode_step = 0
        self.physics_steps = 0
        self.begin_episode(self.base_seed)

    # Episodes.

    def begin_episode(self, seed: int) -> None:
        """Reset to the initial state of episode `seed` (pose, dynamics parameters, targets)."""
        seed_episode(self.env, seed)
        self.env.reset()
        self.episode_seed = int(seed)
        self.episode_step = 0

    def next_episode(self) -> None:
        self.episode_index += 1
        self.begin_episode(self.base_seed + self.episode_index)

    # Commands.

    def set_targets(self, names, values) -> None:
        """Joint targets by name (the joints of the task's action terms)."""
        for name, value in zip(names, values):
            self.targets[self.command_joints.index(name)] = float(value)

    # Stepping.

    def step(self) -> EpisodeResult | None:
        """One physics step with the current targets; returns the result of an episode that just ended."""
        env = self.env
        env.sim.ctrl[0, self._actuators] = torch.maximum(torch.minimum(self.targets, self._ctrl_high), self._ctrl_low)
        env.sim.step(1)
        self.physics_steps += 1
        if self.physics_steps % self.decimation:
            return None
        # Control-period bookkeeping, in the order of BatonEnv.step.
        self.episode_step += 1
        diverged = bool(env.sim.diverged[0])
        if self.episode_index >= 0 and (diverged or self.episode_step >= env.max_episode_length):
            success = bool(env.success_term(env)[0]) if env.success_term is not None and not diverged else False
            result = EpisodeResult(self.episode_index, self.episode_seed, success, self._final_distance())
            # The next episode starts like an `evaluate` episode: from `env.reset()`, with its command
            # timers untouched until the next control period (as in `batonlab play`).
            self.next_episode()
            return result
        if diverged:
            self.begin_episode(self.episode_seed)
            return None
        env.command_manager.update(env.step_dt)
        env.event_manager.update(env.step_dt)
        return None

    # State.

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Positions and velocities of `joint_names`."""
        return self.env.sim.qpos[0, self._qadr].double().numpy(), self.env.sim.qvel[0, self._dadr].double().numpy()

    def sensor(self, name: str) -> np.ndarray:
        return self.env.sim.sensor(name)[0].double().numpy()

    def command(self, name: str) -> np.ndarray:
        return self.env.command_manager.command(name)[0].double().numpy()

    def _final_distance(self) -> float | None:
        for params in (t.params for t in self.env.cfg.rewards.values()):
            if "command" in params and "sensor" in params:
                return float(np.linalg.norm(self.command(params["command"]) - self.sensor(params["sensor"])))
        return None

    def close(self) -> None:
        self.env.close()
