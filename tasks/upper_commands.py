# SPDX-License-Identifier: BSD-3-Clause
"""Record the commands an upper level issues: a command-layer task's scripted expert over the scripted lower level
(`<task>_scripted`, play settings), each step's base velocity and tool pose, for `wl_loco_manip_upper` to train the
whole-body policy on (`batonlab.events.upper_commands`)."""

from __future__ import annotations

import torch

from batonlab.actions.command_layer import WholeBodyCommandAction
from batonlab.env.env import BatonEnv
from batonlab.env.terms import build_term
from batonlab.events.upper_commands import CommandRecording
from batonlab.rl.evaluate import evaluate
from batonlab.tasks import make_task_cfg


def record_expert_commands(task: str, episodes: int, seed: int, episode_length_s: float | None = None,
                           progress: bool = False) -> CommandRecording:
    """The commands `task`'s expert issues over the scripted lower level in `episodes` episodes (one per env) of
    `seed`, each recorded until it ends (`episode_length_s`: the task's unless given)."""
    cfg = make_task_cfg(f"{task}_scripted", play=True)
    cfg.num_envs, cfg.seed = episodes, seed
    if episode_length_s is not None:
        cfg.episode_length_s = episode_length_s
    cfg.events.pop("action_delay", None)  # the commands as issued are the commands held
    if cfg.expert is None:
        raise ValueError(f"task '{task}_scripted' has no scripted expert to record")
    env = BatonEnv(cfg)
    name, term = next(((name, term) for name, term in env.action_manager.terms.items()
                       if isinstance(term, WholeBodyCommandAction)), (None, None))
    if term is None:
        env.close()
        raise ValueError(f"task '{task}_scripted' has no command layer whose commands could be recorded")
    columns = env.action_manager.term_slice(name)
    expert = build_term(cfg.expert.func, cfg.expert.params, env, "expert")
    velocities, poses = [], []
    lengths = torch.zeros(episodes, dtype=torch.long)
    finished = torch.zeros(episodes, dtype=torch.bool)

    def policy(obs):
        actions = expert(env)
        velocity, pose = term.commands(actions[:, columns])
        velocities.append(velocity.cpu())
        poses.append(pose.cpu())
        return actions

    def count(env, obs, actions, done):
        if done is None:
            return
        lengths[~finished] += 1
        finished.logical_or_(done.cpu())

    evaluate(env, policy, progress=progress, step_callback=count)
    env.close()
    return CommandRecording(torch.stack(velocities, 1).numpy(), torch.stack(poses, 1).numpy(), lengths.numpy(),
                            float(env.step_dt), (task,) * episodes)
