# SPDX-License-Identifier: BSD-3-Clause
"""`arm_lift` learns on the CPU with its privileges on: a short training at λ = 1 grasps and lifts the
cube in most play episodes at λ = 1. The training is the session fixture `arm_lift_teacher`."""

from __future__ import annotations

import pytest
from privileged_training import evaluate_at_level


@pytest.mark.slow
def test_arm_lift_learns_at_full_privilege(arm_lift_teacher):
    helped = evaluate_at_level("arm_lift", arm_lift_teacher.policy, privilege_level=1.0)
    unhelped = evaluate_at_level("arm_lift", arm_lift_teacher.policy, privilege_level=0.0)
    print(f"\n[arm_lift] after {arm_lift_teacher.env_steps / 1e6:.2f}M env steps at λ = 1: success "
          f"{helped.success_rate:.2f} at λ = 1, {unhelped.success_rate:.2f} at λ = 0")
    assert helped.success_rate >= 0.7
