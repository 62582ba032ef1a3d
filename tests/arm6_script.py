# SPDX-License-Identifier: BSD-3-Clause
"""A scripted arm6 controller for the feasibility tests: joint targets from a damped least-squares IK of
the tool point, sent through a task's own actions (position targets around the default pose)."""

from __future__ import annotations

import numpy as np
import torch

from batonlab.env.env import BatonEnv
from batonlab.robots.arm6 import ARM_JOINTS, EE_SITE
from batonlab.robots.kinematics import chain_from_model

class Arm6Script:
    """Drive env 0's arm6 to a tool pose (position [m], rotation: columns tool x, y (finger axis), z (approach),
    world frame) and its gripper (+1 open, -1 closed); other envs hold their default pose."""

    def __init__(self, env: BatonEnv):
        self.env = env
        self.chain = chain_from_model(env.scene.model, "arm_base", EE_SITE, ARM_JOINTS)  # base frame = world here
        self.qadr = env.scene.qpos_adr(ARM_JOINTS).numpy()
        self.limits = env.scene.model.jnt_range[env.scene.joint_ids(ARM_JOINTS)]
        self.default = env.default_qpos[self.qadr].numpy()
        self.q = env.sim.qpos[0, self.qadr].numpy().astype(float)
        self.scale = env.cfg.actions["arm"].scale

    def ik(self, pos: np.ndarray, rotation: np.ndarray) -> None:
        """Twenty half damped least-squares steps (the robot side's `KinematicChain.dls_step`) toward the tool pose."""
        q = self.q
        for _ in range(20):
            step = self.chain.dls_step(q, pos, damping=0.03, target_rot=rotation, rot_weight=0.3)
            q = np.clip(q + 0.5 * step, *self.limits.T)
        self.q = q

    def step(self, pos: np.ndarray, rotation: np.ndarray, grip: float) -> None:
        """One env step toward the tool pose with the gripper command `grip`."""
        self.ik(pos, rotation)
        action = torch.zeros(self.env.num_envs, self.env.num_actions)
        action[0, :6] = torch.as_tensor((self.q - self.default) / self.scale)
        action[0, 6] = grip
        self.env.step(action)
