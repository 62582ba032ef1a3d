# SPDX-License-Identifier: BSD-3-Clause
"""A scripted arm6 controller for the feasibility tests: joint targets from a damped least-squares IK of
the tool point, sent through a task's own actions (position targets around the default pose)."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from batonlab.env.env import BatonEnv
from batonlab.robots.arm6 import ARM_JOINTS, EE_SITE

class Arm6Script:
    """Drive env 0's arm6 to a tool pose (position [m], rotation: columns tool x, y (finger axis), z (approach),
    world frame) and its gripper (+1 open, -1 closed); other envs hold their default pose."""

    def __init__(self, env: BatonEnv):
        self.env = env
        self.model = env.scene.model
        self.data = mujoco.MjData(self.model)
        self.qadr = env.scene.qpos_adr(ARM_JOINTS).numpy()
        self.dadr = env.scene.dof_adr(ARM_JOINTS).numpy()
        self.limits = self.model.jnt_range[env.scene.joint_ids(ARM_JOINTS)]
        self.default = env.default_qpos[self.qadr].numpy()
        self.site = self.model.site(EE_SITE).id
        self.q = env.sim.qpos[0, self.qadr].numpy().astype(float)
        self.scale = env.cfg.actions["arm"].scale

    def ik(self, pos: np.ndarray, rotation: np.ndarray) -> None:
        """Twenty damped least-squares steps from the last solution toward the tool pose."""
        model, data, q = self.model, self.data, self.q
        for _ in range(20):
            data.qpos[self.qadr] = q
            mujoco.mj_kinematics(model, data)
            mujoco.mj_comPos(model, data)
            xmat = data.site_xmat[self.site].reshape(3, 3)
            rot_error = 0.5 * sum(np.cross(xmat[:, i], rotation[:, i]) for i in range(3))
            jac_pos, jac_rot = np.zeros((3, model.nv)), np.zeros((3, model.nv))
            mujoco.mj_jacSite(model, data, jac_pos, jac_rot, self.site)
            jac = np.vstack([jac_pos[:, self.dadr], 0.3 * jac_rot[:, self.dadr]])
            error = np.concatenate([pos - data.site_xpos[self.site], 0.3 * rot_error])
            q = np.clip(q + 0.5 * jac.T @ np.linalg.solve(jac @ jac.T + 1e-3 * np.eye(6), error), *self.limits.T)
        self.q = q

    def step(self, pos: np.ndarray, rotation: np.ndarray, grip: float) -> None:
        """One env step toward the tool pose with the gripper command `grip`."""
        self.ik(pos, rotation)
        action = torch.zeros(self.env.num_envs, self.env.num_actions)
        action[0, :6] = torch.as_tensor((self.q - self.default) / self.scale)
        action[0, 6] = grip
        self.env.step(action)
