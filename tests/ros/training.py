# SPDX-License-Identifier: BSD-3-Clause
"""Trained and exported policies for the sim-to-sim and learning tests, and seeded episodes of `play`
and of the sim robot (driven in-process) to compare them on."""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from batonlab.actions.command_layer import with_lower_level
from batonlab.cli.ros_packages import find_package
from batonlab.env.commands import episode_mean_errors
from batonlab.env.env import BatonEnv
from batonlab.events import randomize_action_delay
from batonlab.rl.evaluate import evaluate
from batonlab.tasks import make_task_cfg

DEPLOY_ROS_PATH = str(find_package("deploy_ros").python_path)
if DEPLOY_ROS_PATH not in sys.path:
    sys.path.insert(0, DEPLOY_ROS_PATH)
from batonlab.sim2sim.robot import SimRobot, mean_speed_error, seed_episode, velocity_command  # noqa: E402


@dataclass
class TrainedPolicy:
    task: str
    run_dir: Path
    """The training's run folder (config.yaml, checkpoints, TensorBoard events)."""
    export_dir: Path
    policy: object
    """The torch inference policy (TensorDict → actions), what `batonlab play` runs."""
    train_success_rate: float
    env_steps: int
    """Env steps the training used (the learning tests' budget)."""
    wall_s: float
    """Wall time of the training [s]."""


def hold_still(task: str, robot: str | None = None):
    """A fixed deterministic policy for `task` (over `robot`): zero actions (default pose, wheels at rest)."""
    num_actions = sum(len(term.joints) for term in make_task_cfg(task, robot=robot).actions.values())
    return lambda obs: torch.zeros(obs.batch_size[0], num_actions)


@dataclass
class Episodes:
    """One episode per seed, in seed order."""

    successes: np.ndarray
    """(num_seeds,) bool."""
    lengths: np.ndarray
    """(num_seeds,) int, control steps."""
    terminated: np.ndarray
    """(num_seeds,) bool, ended by a failure rather than by the time limit."""
    speed_errors: np.ndarray | None = None
    """(num_seeds,) mean |v - v_cmd| of each episode [m/s]; None for tasks without a velocity command."""
    mean_errors: dict[str, np.ndarray] | None = None
    """(num_seeds,) per command metric (`episode_mean_errors`, e.g. `ee_target/ee_error` [m])."""


FixedFields = dict[str, dict[str, float]]
"""{command: {field: value}}: command components held fixed in every draw (`CommandTerm.fix_field`),
e.g. {"base_velocity": {"height": 0.463}} for a robot that receives its command as a Twist."""


_PLAYED: dict[tuple, tuple[object, Episodes]] = {}
"""`play_on_seeds` results by (task, policy, seeds, fixed fields, robot): tests that compare a session
fixture's policy with play on the same seeds share one evaluation."""


LOCKSTEP_ACTION_DELAY = 0
"""Control steps by which the sim robot in lockstep applies a command late: none (each period waits for its command)."""


def play_on_seeds(task: str, policy, seeds: range, fixed_fields: FixedFields | None = None,
                  robot: str | None = None, lower: str | None = None, action_delay: int | None = None) -> Episodes:
    """`batonlab play`'s evaluation, one episode per seed, each from the initial state the sim robot uses
    (computed once per policy and seeds in a session: see `_PLAYED`).

    The env is built with the first seed, like the sim robot's (the terrain tiles it draws at
    construction then match). The speed error is read from `extras["command_metrics"]` of the step
    that ends the episode, as `SimRobot` reads it. `robot`: the robot description of a task over any robot; `lower`:
    the whole-body export a hierarchy's upper `policy` runs over; `action_delay`: every action this many control steps
    late (`LOCKSTEP_ACTION_DELAY` to compare with sim-to-sim in lockstep), None: the task's own randomised delay.
    """
    key = (task, id(policy), seeds.start, seeds.stop, seeds.step, repr(sorted((fixed_fields or {}).items())), robot,
           lower, action_delay)
    if key not in _PLAYED:  # the policy keeps its id
        _PLAYED[key] = (policy, _play_on_seeds(task, policy, seeds, fixed_fields, robot, lower, action_delay))
    return copy.deepcopy(_PLAYED[key][1])


def _play_on_seeds(task: str, policy, seeds: range, fixed_fields: FixedFields | None, robot: str | None,
                   lower: str | None, action_delay: int | None) -> Episodes:
    cfg = make_task_cfg(task, play=True, robot=robot)
    if lower is not None:
        with_lower_level(cfg, lower)
    if action_delay is not None:
        fix_action_delay(cfg, action_delay)
    cfg.num_envs, cfg.seed = 1, seeds[0]
    env = BatonEnv(cfg)
    for command, fields in (fixed_fields or {}).items():
        for field, value in fields.items():
            env.command_manager.terms[command].fix_field(field, value)
    speed_command = velocity_command(env)
    results, errors, mean_errors = [], [], []

    def read_speed_error(env, obs, actions, done) -> None:
        if done is not None and bool(done[0]):  # the one episode `evaluate` runs ended on this step
            errors.append(mean_speed_error(env.extras, speed_command))
            mean_errors.append({k: float(v[0]) for k, v in episode_mean_errors(env.extras["command_metrics"]).items()})

    for seed in seeds:
        seed_episode(env, seed)
        results.append(evaluate(env, policy, progress=False, step_callback=read_speed_error))
    env.close()
    return Episodes(*(np.array([getattr(r, field)[0] for r in results]) for field in ("successes", "lengths", "terminated")),
                    speed_errors=np.array(errors) if speed_command is not None else None,
                    mean_errors=_by_key(mean_errors))


def fix_action_delay(cfg, steps: int):
    """`cfg` with every episode's action delay `steps` control steps. The delay is still drawn at each reset, so the
    random draws after it (targets, pushes) stay those of the sim robot, which draws it too."""
    for term in cfg.events.values():
        if term.func is randomize_action_delay:
            term.params["delay_range"] = (steps, steps)
    return cfg


@torch.inference_mode()
def sim_robot_on_seeds(task: str, policy, seeds: range, fixed_fields: FixedFields | None = None,
                       robot: str | None = None) -> Episodes:
    """Sim-to-sim without ROS: `SimRobot` stepped one physics step at a time, as `sim_robot_node` does.

    Each control period the policy acts on the env's observation, and its action goes through the
    task's action terms (delay, clip, scale, default offset) into the joint targets the robot side
    sends (held joints keep their default targets); `SimRobot` alone decides when an episode ends and
    how it went.
    """
    assert seeds.step == 1, "the sim robot runs consecutive seeds"
    threads = torch.get_num_threads()  # SimRobot runs its world on one thread
    robot = SimRobot(task, seed=seeds[0], robot=robot)
    try:
        for command, fields in (fixed_fields or {}).items():
            for field, value in fields.items():
                robot.fix_command_field(command, field, value)
        env = robot.env
        terms = list(env.action_manager.terms.values())
        action_joints = [j for t in terms for j in t.joint_names]
        results = []
        robot.next_episode()
        for _ in range(len(seeds) * env.max_episode_length):
            if len(results) == len(seeds):
                break
            # The action manager also keeps `last_action` and the action history of the observation.
            env.action_manager.process(policy(env.obs))
            robot.set_targets(action_joints, torch.cat([t.processed_actions[0] for t in terms]).tolist())
            for _ in range(robot.decimation):
                result = robot.step()
            if result is not None:
                results.append(result)
    finally:
        robot.close()
        torch.set_num_threads(threads)
    assert [r.seed for r in results] == list(seeds), \
        f"the sim robot ended only {len(results)} episodes in the time limits of {len(seeds)}"
    errors = [r.mean_speed_error for r in results]
    return Episodes(np.array([r.success for r in results]), np.array([r.length for r in results]),
                    np.array([r.terminated for r in results]),
                    speed_errors=None if errors[0] is None else np.array(errors),
                    mean_errors=_by_key([r.mean_errors for r in results]))


def _by_key(per_episode: list[dict[str, float]]) -> dict[str, np.ndarray]:
    """[{metric: value}] per episode → {metric: (num_episodes,)}."""
    return {key: np.array([e[key] for e in per_episode]) for key in (per_episode[0] if per_episode else {})}
