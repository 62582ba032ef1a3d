# SPDX-License-Identifier: BSD-3-Clause
"""`wl_velocity` / `wl_velocity_noarm` / `wl_velocity_bandit`: the wheel-legged biped tracks a commanded
forward speed, yaw rate and base height on a grid of terrain (flat, rough, slopes, low steps).

Built on `wl_balance` (same robot, observations, actions and domain randomisation); the arm, when
present, holds its stowed pose; the changes to the balance recipe are `make_velocity_recipe`, which
the `velocity` task applies to any robot. Two curricula run by default: terrain levels (promotion when
an env covers at least half of its commanded distance, demotion on failure or < 25 %) and command ranges
(forward-speed range widens from ±1 m/s to ±1.5 m/s once its tracking reward passes 70 % of its
maximum). `wl_velocity_bandit` swaps the level curriculum for the self-evolving bandit over terrain
types. An episode succeeds when the robot survives 20 s with a mean speed error below 0.25 m/s.

Tune from the command line, e.g.
    batonlab train task=wl_velocity env.scene.terrain.num_levels=8 env.curriculum.command_range.params.fraction=0.7 \\
        env.commands.base_velocity.params.ang_vel_z_range=[-0.5,0.5]
"""

from __future__ import annotations

import math

from batonlab import terminations
from batonlab.curricula.bandit import TerrainBanditCurriculum
from batonlab.curricula.command_range import CommandRangeCurriculum
from batonlab.curricula.levels import TerrainLevels
from batonlab.env.cfg import CurriculumTermCfg, TaskCfg, TermCfg, TerminationTermCfg
from batonlab.rl.cfg import RunnerCfg
from batonlab.tasks import register
from batonlab.tasks.wl_balance import COMMAND, make_wl_balance_agent_cfg, make_wl_balance_cfg
from batonlab.terrain import TerrainCfg

LIN_VEL_X_START = (-1.0, 1.0)
"""Forward-speed command range at the start of training [m/s]."""
LIN_VEL_X_LIMIT = (-1.5, 1.5)
"""Forward-speed command range the curriculum widens to [m/s]."""
SUCCESS_MAX_SPEED_ERROR = 0.25
"""Mean |v - v_cmd| over an episode that still counts as tracking [m/s]."""
HEIGHT_RANGE = (0.36, 0.48)
"""Base height command range of the wheel-legged robot [m] (its legs reach ~0.30 ... 0.52 m)."""


def make_wl_velocity_cfg(play: bool = False, with_arm: bool = True) -> TaskCfg:
    return make_velocity_recipe(make_wl_balance_cfg(play=play, with_arm=with_arm), HEIGHT_RANGE, play=play)


def make_velocity_recipe(cfg: TaskCfg, height_range: tuple[float, float], play: bool = False) -> TaskCfg:
    """Turn a balancing cfg (`make_balance_cfg`) into velocity tracking on terrain, in place.

    Args:
        cfg: The balance task of the robot.
        height_range: Range of the base height command [m].
    """
    cfg.episode_length_s = 20.0
    cfg.scene.terrain = TerrainCfg(kind="grid", num_levels=6, max_init_level=5 if play else 1)

    command = cfg.commands[COMMAND]
    command.resampling_time_range_s = (8.0, 12.0)
    command.params.update(
        lin_vel_x_range=LIN_VEL_X_START, ang_vel_z_range=(-1.0, 1.0), height_range=tuple(height_range),
        standing_fraction=0.1,
    )
    cfg.rewards["track_ang_vel_z"].params["std"] = 0.4
    cfg.rewards["track_height"].weight = 0.5

    # Spawn on the tile's platform, heading anywhere; gentler initial states and pushes than wl_balance.
    cfg.events["reset_base"].params = {
        "position_range": {"x": (-0.3, 0.3), "y": (-0.3, 0.3), "z": (0.03, 0.05)},
        "orientation_range": {"pitch": (-0.1, 0.1), "yaw": (-math.pi, math.pi)},
        "velocity_range": {"x": (-0.3, 0.3), "yaw": (-0.3, 0.3)},
    }
    cfg.events["reset_legs"].params["position_range"] = (-0.1, 0.1)
    cfg.events["push"].interval_range_s = (6.0, 10.0)
    cfg.terminations["out_of_bounds"] = TerminationTermCfg(
        func=terminations.out_of_terrain_bounds, params={"margin": 1.0}, time_out=True
    )

    cfg.curriculum = {
        "terrain_levels": CurriculumTermCfg(func=TerrainLevels, params={"command": COMMAND}),
        "command_range": CurriculumTermCfg(
            func=CommandRangeCurriculum,
            params={
                "command": COMMAND,
                "reward_term": "track_lin_vel_x",
                "limits": {"lin_vel_x": LIN_VEL_X_LIMIT},
                "step": {"lin_vel_x": 0.1},
                "fraction": 0.7,  # of the maximum; the kernel (std 0.25 m/s) is stricter than legged_gym's
            },
        ),
    }
    cfg.success = TermCfg(func=terminations.command_tracked, params={"command": COMMAND, "max_mean_error": SUCCESS_MAX_SPEED_ERROR})
    if play:
        # Curricula stay: a checkpoint restores their state (terrain levels, command ranges) into the play env.
        cfg.events.pop("push", None)
    return cfg


def make_wl_velocity_agent_cfg() -> RunnerCfg:
    cfg = make_wl_balance_agent_cfg()
    cfg.experiment_name = "wl_velocity"
    cfg.max_iterations = 400
    cfg.save_interval = 50
    cfg.policy.actor_hidden_dims = (256, 128, 64)
    cfg.policy.critic_hidden_dims = (256, 128, 64)
    return cfg


def make_wl_velocity_noarm_cfg(play: bool = False) -> TaskCfg:
    return make_wl_velocity_cfg(play=play, with_arm=False)


def make_wl_velocity_noarm_agent_cfg() -> RunnerCfg:
    cfg = make_wl_velocity_agent_cfg()
    cfg.experiment_name = "wl_velocity_noarm"
    return cfg


def make_wl_velocity_bandit_cfg(play: bool = False) -> TaskCfg:
    """wl_velocity with the self-evolving bandit over terrain types in place of the level curriculum."""
    cfg = make_wl_velocity_cfg(play=play)
    cfg.curriculum.pop("terrain_levels", None)
    cfg.curriculum["terrain_bandit"] = CurriculumTermCfg(
        func=TerrainBanditCurriculum, params={"arms": "types", "learning_rate": 0.1, "temperature": 0.1}
    )
    return cfg


def make_wl_velocity_bandit_agent_cfg() -> RunnerCfg:
    cfg = make_wl_velocity_agent_cfg()
    cfg.experiment_name = "wl_velocity_bandit"
    return cfg


register("wl_velocity", make_wl_velocity_cfg, make_wl_velocity_agent_cfg,
         "wheel-legged biped with stowed arm tracks speed, yaw rate and height on terrain")
register("wl_velocity_noarm", make_wl_velocity_noarm_cfg, make_wl_velocity_noarm_agent_cfg,
         "wheel-legged biped (no arm) tracks speed, yaw rate and height on terrain")
register("wl_velocity_bandit", make_wl_velocity_bandit_cfg, make_wl_velocity_bandit_agent_cfg,
         "wl_velocity with a self-evolving bandit curriculum over terrain types")
