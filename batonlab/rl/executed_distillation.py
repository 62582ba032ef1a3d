# SPDX-License-Identifier: BSD-3-Clause
"""Distillation onto the actions a robot would execute, not the teacher's raw outputs.

A PPO teacher's mean action often leaves the range where it changes anything: a gripper command of
-5 closes the gripper exactly as -1 does (the servo target is clamped to its control range), and an
arm action past its joint's control range is clamped the same way. rsl-rl's Distillation regresses
the student onto the raw outputs, so such saturated, arbitrary magnitudes dominate the loss and the
student spends its capacity on numbers that do not move the robot (an example:
docs/modules/batonlab.rl.executed_distillation.md). Here each label is first clamped to its dim's
saturation bounds (`ActionManager.saturation_bounds`), which leaves every executed command unchanged.
"""

from __future__ import annotations

import torch
from rsl_rl.algorithms import Distillation
from tensordict import TensorDict


class ExecutedActionDistillation(Distillation):
    """rsl-rl's Distillation with the teacher's labels clamped to the actions' saturation bounds.

    Args:
        label_bounds: (low, high), per action dim, the raw action beyond which the executed command
            no longer changes (±inf where it never saturates).
        All other arguments are rsl-rl's `Distillation`'s.
    """

    def __init__(self, *args, label_bounds: tuple[list[float], list[float]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        low, high = label_bounds if label_bounds is not None else ([], [])
        self.label_low = torch.as_tensor(low, dtype=torch.float32, device=self.device) if low else None
        self.label_high = torch.as_tensor(high, dtype=torch.float32, device=self.device) if high else None

    def act(self, obs: TensorDict) -> torch.Tensor:
        """The student's actions, with the teacher's labels clipped to the executed bounds when they are set."""
        actions = super().act(obs)
        if self.label_low is not None:
            labels = self.transition.privileged_actions
            self.transition.privileged_actions = torch.maximum(torch.minimum(labels, self.label_high), self.label_low)
        return actions
