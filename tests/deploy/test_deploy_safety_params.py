# SPDX-License-Identifier: BSD-3-Clause
"""policy_node's safety parameters come from `SafetyCfg`, keep their names, and config/policy_node.yaml agrees."""

from __future__ import annotations

import dataclasses
import sys

import pytest
import yaml

from batonlab.cli.ros_packages import find_package
from batonlab.deploy import PlausibilityCfg, SafetyCfg
from batonlab.deploy.safety_params import SAFETY_PARAMETERS, safety_cfg_from_params

DEPLOY_ROS = find_package("deploy_ros")
NODE_YAML = DEPLOY_ROS.config("policy_node.yaml")

SAFETY_PARAMETER_NAMES = (
    "ramp_time_s", "stale_timeout_s", "max_joint_velocity", "max_velocity_command", "max_acceleration",
    "stop_deceleration", "position_margin", "torque_limit_scale", "stop_behavior", "stop_time_s", "stop_hold_time_s",
    "stop_hold_torque_scale", "auto_start", "estop_heartbeat_timeout_s", "velocity_from_positions",
    "input_rate_samples", "sensor_range_tolerance", "sensor_max_joint_speed", "sensor_jump_tolerance",
)
"""The safety parameters policy_node accepts (besides estop_mode and stop_pose.<joint>): robots' YAML files use them."""

ON_A_ROBOT = {"auto_start": False, "position_margin": 0.02}
"""Where config/policy_node.yaml departs from the defaults on purpose: start by service, keep off the joint limits."""


def defaults() -> dict:
    return {param.name: param.default for param in SAFETY_PARAMETERS}


def test_the_node_keeps_its_safety_parameter_names():
    assert sorted(defaults()) == sorted(SAFETY_PARAMETER_NAMES)


def test_every_parameter_has_its_fields_default_and_docstring():
    cfg, plausibility = SafetyCfg(), PlausibilityCfg()
    for param in SAFETY_PARAMETERS:
        owner = plausibility if param.name.startswith("sensor_") else cfg
        value = getattr(owner, param.field)
        if param.unset is not None:
            assert value is None and param.default == param.unset, param.name
        elif param.name != "estop_heartbeat_timeout_s":
            assert param.default == value and type(param.default) is type(value), param.name
        assert param.description, f"{param.field} has no attribute docstring"


def test_default_parameters_make_the_default_cfg_and_unset_values_mean_none():
    assert safety_cfg_from_params(defaults(), heartbeat=False) == SafetyCfg()
    assert safety_cfg_from_params(defaults(), heartbeat=True).estop_heartbeat_timeout_s == pytest.approx(0.2)
    p = {**defaults(), "stale_timeout_s": 0.05, "stop_behavior": "crouch", "sensor_max_joint_speed": 20.0}
    cfg = safety_cfg_from_params(p, heartbeat=False, stop_pose={"knee": 2.2})
    assert dataclasses.replace(cfg, plausibility=PlausibilityCfg()) == SafetyCfg(
        stale_timeout_s=0.05, stop_behavior="crouch", stop_pose={"knee": 2.2})
    assert cfg.plausibility == PlausibilityCfg(max_speed=20.0)
    with pytest.raises(ValueError):  # no silent latch: a zero heartbeat timeout is refused
        safety_cfg_from_params({**defaults(), "estop_heartbeat_timeout_s": 0.0}, heartbeat=True)


def test_policy_node_yaml_agrees_with_the_safety_cfg():
    params = yaml.safe_load(NODE_YAML.read_text())["policy_node"]["ros__parameters"]
    for name, default in defaults().items():
        assert name in params, f"{NODE_YAML.name} lacks {name}"
        expected = ON_A_ROBOT.get(name, default)
        assert params[name] == expected and type(params[name]) is type(expected), (name, params[name], expected)
    for name, value in ON_A_ROBOT.items():
        assert value != defaults()[name], f"{name} is the default now: drop it from ON_A_ROBOT"


def test_the_node_declares_the_generated_parameters():
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    if str(DEPLOY_ROS.python_path) not in sys.path:
        sys.path.insert(0, str(DEPLOY_ROS.python_path))
    from deploy_ros import node_params

    for param in SAFETY_PARAMETERS:
        assert node_params.PARAMETERS[param.name] == param.default
        assert type(node_params.PARAMETERS[param.name]) is type(param.default)
        assert node_params.DESCRIPTIONS[param.name] == param.description
