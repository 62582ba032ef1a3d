# SPDX-License-Identifier: BSD-3-Clause
"""Arm actions as a residual on differential IK: `target = q + dls_step(q, ee_target) + scale * action`.

The damped least-squares step is computed per env, batched, from the arm's kinematic chain
(`TorchChain`, the torch twin of `batonlab.deploy.kinematics.KinematicChain`, which the robot runs from
the manifest): simulator-neutral, it needs only the arm's joint positions and the command.
"""

from __future__ import annotations

import torch

from batonlab.actions.joint import JointPositionAction
from batonlab.deploy.kinematics import KinematicChain, quat_to_matrix
from batonlab.env.cfg import ActionTermCfg
from batonlab.robots.kinematics import chain_from_model
from batonlab.utils.quaternions import quat_to_matrix as quat_matrices


class TorchChain:
    """`KinematicChain` batched in torch: every method takes joint positions q (N, n) [rad]; base frame.
    Computed in float64 (the robot's numpy twin agrees to 1e-5 also for steps of several radians), returned as q's dtype.

    The chain is folded once into one fixed 4 × 4 transform before each hinge and one after the last
    (`KinematicChain`'s bodies without a hinge merged into them); a hinge turns about its axis through its
    anchor, both fixed in its body, so each evaluation is one batched Rodrigues for every hinge and one
    4 × 4 product per hinge, whatever the chain's fixed bodies."""

    def __init__(self, chain: KinematicChain, device: torch.device | str = "cpu"):
        def tensor(values):
            return torch.as_tensor(values, dtype=torch.float64, device=device)

        def transform(pos, rot):
            matrix = torch.eye(4, dtype=torch.float64, device=device)
            matrix[:3, :3], matrix[:3, 3] = rot, pos
            return matrix

        self.chain = chain
        before, fixed = [], torch.eye(4, dtype=torch.float64, device=device)
        axes, anchors = [], []
        for link in chain.links:
            fixed = fixed @ transform(tensor(link.pos), tensor(quat_to_matrix(link.quat)))
            if link.joint is not None:
                before.append(fixed)
                axes.append(tensor(link.axis))
                anchors.append(tensor(link.anchor))
                fixed = torch.eye(4, dtype=torch.float64, device=device)
        self.before = torch.stack(before)  # (n, 4, 4): each hinge's body in the previous hinge's turned body
        self.after = fixed @ transform(tensor(chain.tip_pos), tensor(quat_to_matrix(chain.tip_quat)))  # tool frame
        self.axes, self.anchors = torch.stack(axes), torch.stack(anchors)  # (n, 3) in each hinge's body
        x, y, z = self.axes.unbind(-1)
        zero = torch.zeros_like(x)
        self.skew = torch.stack([zero, -z, y, z, zero, -x, -y, x, zero], -1).view(-1, 3, 3)
        self.skew_squared = self.skew @ self.skew

    def jacobian(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(tool position (N, 3) [m], tool rotation (N, 3, 3), Jacobian (N, 6, n): linear rows then angular)."""
        dtype, q = q.dtype, q.double()
        num, count = q.shape
        angle = q.view(num, count, 1, 1)
        turn = torch.eye(3, dtype=q.dtype, device=q.device) + angle.sin() * self.skew + (1.0 - angle.cos()) * self.skew_squared
        hinge = torch.zeros(num, count, 4, 4, dtype=q.dtype, device=q.device)
        hinge[..., :3, :3] = turn
        hinge[..., :3, 3] = self.anchors - (turn @ self.anchors.unsqueeze(-1)).squeeze(-1)  # turn about the anchor
        hinge[..., 3, 3] = 1.0
        steps = self.before @ hinge  # (N, n, 4, 4)
        frames = [steps[:, 0]]
        for k in range(1, count):
            frames.append(frames[-1] @ steps[:, k])
        frames = torch.stack(frames, 1)  # each hinge's turned body in the base frame
        axes = (frames[..., :3, :3] @ self.axes.unsqueeze(-1)).squeeze(-1)  # (N, n, 3): a hinge's own turn
        anchors = (frames[..., :3, :3] @ self.anchors.unsqueeze(-1)).squeeze(-1) + frames[..., :3, 3]  # keeps both
        tool = frames[:, -1] @ self.after
        tip = tool[:, :3, 3]
        linear = torch.linalg.cross(axes, tip.unsqueeze(1) - anchors, dim=2)
        jac = torch.cat([linear, axes], 2).transpose(1, 2)
        return tip.to(dtype), tool[:, :3, :3].to(dtype), jac.to(dtype)

    def dls_step(self, q: torch.Tensor, target_pos: torch.Tensor, damping: float, target_rot: torch.Tensor | None = None,
                 rot_weight: float = 1.0) -> torch.Tensor:
        """The damped least-squares joint step (N, n) [rad] toward `target_pos` (N, 3) [m], and toward `target_rot`
        (N, 3, 3) weighted by `rot_weight` [m/rad] when given: `Jᵀ (J Jᵀ + damping² I)⁻¹ e`."""
        tip, rot, jac = self.jacobian(q.double())
        error = target_pos.double() - tip
        if target_rot is None:
            jac = jac[:, :3]
        else:
            rot_error = 0.5 * torch.linalg.cross(rot, target_rot.double(), dim=1).sum(-1)  # columns' cross products
            error = torch.cat([error, rot_weight * rot_error], 1)
            jac = torch.cat([jac[:, :3], rot_weight * jac[:, 3:]], 1)
        size = error.shape[1]
        gram = jac @ jac.transpose(1, 2) + damping ** 2 * torch.eye(size, dtype=jac.dtype, device=q.device)
        return (jac.transpose(1, 2) @ torch.linalg.solve(gram, error.unsqueeze(-1))).squeeze(-1).to(q.dtype)


    def dls_solve(self, q: torch.Tensor, target_pos: torch.Tensor, damping: float, target_rot: torch.Tensor | None,
                  rot_weight: float, iterations: int, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
        """Joint positions (N, n) [rad] after `iterations` half `dls_step`s from q, each kept inside [low, high]."""
        for _ in range(iterations):
            q = q + 0.5 * self.dls_step(q, target_pos, damping, target_rot, rot_weight)
            q = torch.maximum(torch.minimum(q, high), low)
        return q


def axis_angle_matrices(axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (N, 3, 3) by `angle` (N,) [rad] about unit axes (N, 3) (Rodrigues)."""
    x, y, z = axis.unbind(-1)
    zero = torch.zeros_like(x)
    skew = torch.stack([zero, -z, y, z, zero, -x, -y, x, zero], -1).view(-1, 3, 3)
    sin, cos = angle.sin().view(-1, 1, 1), angle.cos().view(-1, 1, 1)
    return torch.eye(3, dtype=axis.dtype, device=axis.device) + sin * skew + (1.0 - cos) * skew @ skew


def rotation_vectors(rot: torch.Tensor) -> torch.Tensor:
    """Rotation vectors (N, 3) [rad] (axis times angle, angle < π) of rotation matrices (N, 3, 3)."""
    vee = torch.stack([rot[:, 2, 1] - rot[:, 1, 2], rot[:, 0, 2] - rot[:, 2, 0], rot[:, 1, 0] - rot[:, 0, 1]], 1)
    cos = ((rot.diagonal(dim1=1, dim2=2).sum(-1) - 1.0) / 2.0).clamp(-1.0, 1.0)
    angle = torch.acos(cos)
    factor = torch.where(angle > 1e-4, angle / (2.0 * angle.sin()).clamp_min(1e-12), torch.full_like(angle, 0.5))
    return vee * factor.unsqueeze(1)


def rotation_matrices(vectors: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (N, 3, 3) of rotation vectors (N, 3) [rad] (the inverse of `rotation_vectors`)."""
    angle = vectors.norm(dim=1)
    axis = vectors / angle.clamp_min(1e-9).unsqueeze(1)
    return axis_angle_matrices(axis.double(), angle.double()).to(vectors.dtype)


class IKResidualAction(JointPositionAction):
    """Arm position targets around a damped least-squares IK step: `target = q + dls_step(q, command) + scale * action`.

    `cfg.params`: `command` (the end-effector target command in the chain's base frame: a point (N, 3) [m] or a
    pose (N, 7), position then quaternion w x y z), `base` (the base body), `site` (the tool point), `damping`
    (DLS damping [m]; 0.05 as in the seed method), `orientation_weight` (metres per radian of orientation
    error in the step; 0, the default, steps toward the position alone; > 0 needs a pose command). The
    policy's action is a residual [unit action → `scale` rad] on the IK target; the command filter
    (`max_target_rate`) applies to the sum, as on the robot.
    """

    action_type = "ik_residual"

    def __init__(self, env, cfg: ActionTermCfg):
        super().__init__(env, cfg)
        params = dict(cfg.params)
        self.env = env
        self.command = params["command"]
        self.damping = float(params.get("damping", 0.05))
        self.orientation_weight = float(params.get("orientation_weight", 0.0))
        if self.orientation_weight < 0:
            raise ValueError(f"orientation_weight must be >= 0, got {self.orientation_weight}")
        self.chain = chain_from_model(env.scene.model, params["base"], params["site"], tuple(cfg.joints))
        self.torch_chain = TorchChain(self.chain, env.device)
        self.offset = torch.zeros_like(self.offset)

    def process(self, actions: torch.Tensor) -> None:
        """Store the raw actions; targets = joint positions + IK step + scaled residual, then the command filter."""
        q = self.env.sim.qpos.index_select(1, self.qpos_adr)
        target = self.env.command_manager.command(self.command)
        if self.orientation_weight > 0 and target.shape[1] != 7:
            raise ValueError(f"orientation_weight needs a pose command; '{self.command}' has {target.shape[1]} values")
        rot = quat_matrices(target[:, 3:]) if self.orientation_weight > 0 else None
        self.offset = q + self.torch_chain.dls_step(q, target[:, :3], self.damping, rot, self.orientation_weight)
        super().process(actions)

    def saturation_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """±(control range width / scale) per dim, within the clip: beyond it a residual saturates from any state."""
        span = (self.ctrl_high - self.ctrl_low) / self.scale.abs()
        low, high = -span, span
        if self.cfg.clip is not None:
            low, high = low.clamp_min(self.cfg.clip[0]), high.clamp_max(self.cfg.clip[1])
        return low, high
