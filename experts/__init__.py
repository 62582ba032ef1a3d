# SPDX-License-Identifier: BSD-3-Clause
"""Scripted experts: controllers that solve a task from privileged state, as Distillation teachers (`teacher=expert`)."""

from batonlab.experts.arm_servo import ArmPoseServo
from batonlab.experts.baton_taker import BatonTakerExpert
from batonlab.experts.door_opener import DoorOpenerExpert
from batonlab.experts.push_grasp import PushGraspExpert

__all__ = ["ArmPoseServo", "BatonTakerExpert", "DoorOpenerExpert", "PushGraspExpert"]
