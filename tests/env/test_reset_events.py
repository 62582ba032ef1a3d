# SPDX-License-Identifier: BSD-3-Clause
"""Reset events on joints without limits: a continuous joint is offset, not clipped to MuJoCo's (0, 0) range."""

from __future__ import annotations

from types import SimpleNamespace

import mujoco
import torch

from batonlab.events.joints import reset_joints_uniform
from batonlab.env.cfg import SceneCfg, SimCfg
from batonlab.env.scene import Scene

XML = """
<mujoco>
  <compiler angle="radian"/>
  <worldbody>
    <body name="a"><joint name="limited" type="hinge" range="-0.2 0.2"/><geom size="0.05" mass="1"/>
      <body name="b" pos="0 0 0.1"><joint name="continuous" type="hinge"/><geom size="0.05" mass="1"/></body>
    </body>
  </worldbody>
</mujoco>"""


def test_reset_joints_uniform_clips_limited_joints_only():
    scene = Scene(SceneCfg(build=lambda: mujoco.MjSpec.from_string(XML), default_joint_pos={"continuous": 1.0}),
                  SimCfg(physics_dt=0.005))
    generator = torch.Generator().manual_seed(0)
    num_envs = 64
    env = SimpleNamespace(scene=scene, device="cpu", reset_qpos=scene.default_qpos.repeat(num_envs, 1),
                          uniform=lambda shape, low, high: low + (high - low) * torch.rand(shape, generator=generator))
    reset_joints_uniform(env, torch.arange(num_envs), ("limited", "continuous"), (-0.5, 0.5))
    limited, continuous = env.reset_qpos[:, 0], env.reset_qpos[:, 1]
    assert limited.abs().max() <= 0.2 + 1e-6 and (limited.abs() == 0.2).any(), "the limited joint is clipped"
    assert (continuous - 1.0).abs().max() <= 0.5 and continuous.std() > 0.2, "the continuous joint is offset, not clipped"
    assert not (continuous == 0.0).any()
