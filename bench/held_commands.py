# SPDX-License-Identifier: BSD-3-Clause
"""How a trained whole-body policy follows commands held as an upper level holds them: base speed and yaw rate
measured per held command, the tool held at one point of the arm base frame.

    python bench/held_commands.py --export RUN/exported [--commands 0,0 0,0.4 0.2,0 -0.2,0] [--tool 0.3 0 -0.05]
                                  [--envs 16] [--seed 0] [--settle-s 1] [--measure-s 2]

Each command starts from a reset of the wheel-legged tasks' shared robot and ground (`make_command_layer_cfg`: no
door, no cup in the way; its lower level: the export), is held for `--settle-s` and then
measured over `--measure-s`: the mean speed along the starting heading [m/s] and yaw rate [rad/s] over the envs that
did not fall, with their spread, and how many fell. A command with a negative speed is written `--commands=-0.2,0`.
"""

from __future__ import annotations

import argparse

import torch

from batonlab.env.env import BatonEnv
from batonlab.observations import root_pos_w, root_quat_w
from batonlab.tasks.wl_door import make_command_layer_cfg
from batonlab.utils.quaternions import yaw_from_quat


def held_command_rates(env: BatonEnv, speed: float, yaw_rate: float, tool: tuple[float, float, float] | None,
                       settle_steps: int, measure_steps: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per env: (forward speed along the starting heading [m/s], yaw rate [rad/s], whether it fell) under the held
    command, from a reset (the rates of an env that fell are meaningless: it was reset)."""
    env.reset()
    term = env.action_manager.terms["commands"]
    pose = term.stowed_pose().expand(env.num_envs, 7).clone()
    if tool is not None:
        pose[:, :3] = torch.tensor(tool)
    actions = torch.zeros(env.num_envs, env.num_actions)
    velocity = torch.tensor([[speed, yaw_rate]]).expand(env.num_envs, 2)
    actions[:, env.action_manager.term_slice("commands")] = term.actions_for(velocity, pose)
    fell = torch.zeros(env.num_envs, dtype=torch.bool)
    for _ in range(settle_steps):
        fell |= env.step(actions)[2]
    start_xy, start_yaw = root_pos_w(env)[:, :2].clone(), yaw_from_quat(root_quat_w(env))
    turned = torch.zeros(env.num_envs)
    last_yaw = start_yaw
    for _ in range(measure_steps):
        fell |= env.step(actions)[2]
        yaw = yaw_from_quat(root_quat_w(env))
        turned += torch.remainder(yaw - last_yaw + torch.pi, 2 * torch.pi) - torch.pi  # unwrapped
        last_yaw = yaw
    seconds = measure_steps * env.step_dt
    heading = torch.stack([torch.cos(start_yaw), torch.sin(start_yaw)], dim=1)
    return ((root_pos_w(env)[:, :2] - start_xy) * heading).sum(1) / seconds, turned / seconds, fell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", required=True, help="a wl_loco_manip_pose export folder")
    parser.add_argument("--commands", nargs="+", default=["0,0", "0,0.4", "0.2,0", "-0.2,0"],
                        help="held commands, speed [m/s],yaw rate [rad/s]")
    parser.add_argument("--tool", nargs=3, type=float, default=[0.3, 0.0, -0.05],
                        help="the tool point held [m, arm base frame]")
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--settle-s", type=float, default=1.0)
    parser.add_argument("--measure-s", type=float, default=2.0)
    args = parser.parse_args()
    cfg = make_command_layer_cfg(play=True, export=args.export)  # flat ground: nothing in the robot's way
    cfg.num_envs, cfg.seed = args.envs, args.seed
    env = BatonEnv(cfg)
    steps = lambda s: round(s / env.step_dt)  # noqa: E731
    print("| held command (speed, yaw rate) | speed [m/s] | yaw rate [rad/s] | fell |\n|---|---|---|---|")
    for text in args.commands:
        speed, yaw_rate = (float(v) for v in text.split(","))
        v, w, fell = held_command_rates(env, speed, yaw_rate, tuple(args.tool), steps(args.settle_s),
                                        steps(args.measure_s))
        v, w = v[~fell], w[~fell]
        print(f"| {speed:+.2f} m/s, {yaw_rate:+.2f} rad/s | {v.mean():.3f} ± {v.std():.3f} | {w.mean():+.3f} ± "
              f"{w.std():.3f} | {int(fell.sum())} / {env.num_envs} |", flush=True)
    env.close()


if __name__ == "__main__":
    main()
