# SPDX-License-Identifier: BSD-3-Clause
"""`wl_velocity` / `wl_velocity_noarm` / `wl_velocity_bandit`: the wheel-legged biped tracks a commanded
forward speed, yaw rate and base height on a grid of terrain (flat, rough, slopes, low steps).

Built on `wl_balance` (same robot, observations, actions and domain randomisation); the arm, when
present, holds its stowed pose; the changes to the balance recipe are `mobile_robot.make_velocity_recipe`,
which the `velocity` task applies to any robot. Two curricula run by default: terrain levels (promotion when
an env covers at least half of its commanded distance, demotion on failure or < 25 %) and command ranges
(forward-speed range widens from ±1 m/s to ±1.5 m/s once its tracking reward passes 70 % of its
maximum). `wl_velocity_bandit` swaps the level curriculum for the self-evolving bandit over terrain
types. An episode succeeds when the robot survives 20 s with a mean speed error below 0.25 m/s.

Tune from the command line, e.g.
    batonlab train task=wl_velocity env.scene.terrain.num_levels=8 env.curriculum.command_range.params.fraction=0.7 \\
        env.commands.base_velocity.params.ang_vel_z_range=[-0.5,0.5]
"""

from __future__ import annotations

from batonlab.curricula.bandit import TerrainBanditCurriculum
from batonlab.env.cfg import CurriculumTermCfg, TaskCfg
from batonlab.rl.cfg import RunnerCfg
from batonlab.tasks import register
from batonlab.tasks.agents import variant_agent_cfg
from batonlab.tasks.mobile_robot import make_velocity_recipe
from batonlab.tasks.wl_balance import make_wl_balance_agent_cfg, make_wl_balance_cfg

HEIGHT_RANGE = (0.36, 0.48)
"""Base height command range of the wheel-legged robot [m] (its legs reach ~0.30 ... 0.52 m)."""


def make_wl_velocity_cfg(play: bool = False, with_arm: bool = True) -> TaskCfg:
    return make_velocity_recipe(make_wl_balance_cfg(play=play, with_arm=with_arm), HEIGHT_RANGE, play=play)


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
    return variant_agent_cfg(make_wl_velocity_agent_cfg, "wl_velocity_noarm")


def make_wl_velocity_bandit_cfg(play: bool = False) -> TaskCfg:
    """wl_velocity with the self-evolving bandit over terrain types in place of the level curriculum."""
    cfg = make_wl_velocity_cfg(play=play)
    cfg.curriculum.pop("terrain_levels", None)
    cfg.curriculum["terrain_bandit"] = CurriculumTermCfg(
        func=TerrainBanditCurriculum, params={"arms": "types", "learning_rate": 0.1, "temperature": 0.1}
    )
    return cfg


def make_wl_velocity_bandit_agent_cfg() -> RunnerCfg:
    return variant_agent_cfg(make_wl_velocity_agent_cfg, "wl_velocity_bandit")


register("wl_velocity", make_wl_velocity_cfg, make_wl_velocity_agent_cfg,
         "wheel-legged biped with stowed arm tracks speed, yaw rate and height on terrain")
register("wl_velocity_noarm", make_wl_velocity_noarm_cfg, make_wl_velocity_noarm_agent_cfg,
         "wheel-legged biped (no arm) tracks speed, yaw rate and height on terrain")
register("wl_velocity_bandit", make_wl_velocity_bandit_cfg, make_wl_velocity_bandit_agent_cfg,
         "wl_velocity with a self-evolving bandit curriculum over terrain types")
