# SPDX-License-Identifier: BSD-3-Clause
"""Distillation onto the actions a robot would execute, not the teacher's raw outputs, with DAgger's β-mixing.

A PPO teacher's mean action often leaves the range where it changes anything: a gripper command of
-5 closes the gripper exactly as -1 does (the servo target is clamped to its control range), and an
arm action past its joint's control range is clamped the same way. rsl-rl's Distillation regresses
the student onto the raw outputs, so such saturated, arbitrary magnitudes dominate the loss and the
student spends its capacity on numbers that do not move the robot (an example:
docs/modules/batonlab.rl.executed_distillation.md). Here each label is first clamped to its dim's
saturation bounds (`ActionManager.saturation_bounds`), which leaves every executed command unchanged.

β-mixing (DAgger, Ross et al. 2011): early on, an untrained student's own states are far from any
the teacher would reach, and it rarely gets to the later phases of a task (the grasp, the lift) to be
labelled there. With probability β an env executes the teacher's action at a step instead; β falls
to 0, after which the student visits only its own states, as on the robot.
"""

from __future__ import annotations

import torch
from rsl_rl.algorithms import Distillation
from tensordict import TensorDict


class ExecutedActionDistillation(Distillation):
    """rsl-rl's Distillation with the teacher's labels clamped to the actions' saturation bounds and β-mixed rollouts.

    Args:
        label_bounds: (low, high), per action dim, the raw action beyond which the executed command
            no longer changes (±inf where it never saturates).
        teacher_action_prob: β at the first update: the chance an env executes the teacher's action at a step.
        teacher_action_iterations: Updates over which β falls linearly to 0 (0: β stays constant).
        All other arguments are rsl-rl's `Distillation`'s.
    """

    def __init__(self, *args, label_bounds: tuple[list[float], list[float]] | None = None,
                 teacher_action_prob: float = 0.0, teacher_action_iterations: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        low, high = label_bounds if label_bounds is not None else ([], [])
        self.label_low = torch.as_tensor(low, dtype=torch.float32, device=self.device) if low else None
        self.label_high = torch.as_tensor(high, dtype=torch.float32, device=self.device) if high else None
        self.teacher_action_prob = float(teacher_action_prob)
        self.teacher_action_iterations = int(teacher_action_iterations)

    @property
    def beta(self) -> float:
        """The probability, at this update, that an env executes the teacher's action at a step."""
        if self.teacher_action_iterations <= 0:
            return self.teacher_action_prob
        return self.teacher_action_prob * max(0.0, 1.0 - self.num_updates / self.teacher_action_iterations)

    def act(self, obs: TensorDict) -> torch.Tensor:
        """The executed actions: the student's, or with probability β per env the teacher's label; the
        stored transition keeps the student's actions and the (clipped) labels."""
        actions = super().act(obs)
        labels = self.transition.privileged_actions
        if self.label_low is not None:
            labels = torch.maximum(torch.minimum(labels, self.label_high), self.label_low)
            self.transition.privileged_actions = labels
        beta = self.beta
        if beta > 0.0:
            teacher_acts = torch.rand(actions.shape[0], 1, device=actions.device) < beta
            actions = torch.where(teacher_acts, labels, actions)
        return actions
