# SPDX-License-Identifier: BSD-3-Clause
"""deploy_ros package tests (run by `colcon test`): policy_node in-process on a two-joint toy policy."""

import json
import time

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import Twist
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from batonlab.deploy.manifest import sha256_file
from deploy_ros.messages import msg_to_vector, twist_to_vector, vector_to_msg
from deploy_ros.policy_node import PolicyNode, RefusedToStart

onnx = pytest.importorskip("onnx")

JOINTS = ["hip", "knee"]


def write_toy_export(out_dir, bias=(0.1, -0.1)):
    """Two joints; observation = joint_pos_rel (2) + joint_vel (2) + last_action (2); `actions = bias`."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["actions"])],
        "toy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, ["batch", 2])],
        [numpy_helper.from_array(np.zeros((6, 2), np.float32), "W"), numpy_helper.from_array(np.array(bias, np.float32), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(out_dir / "policy.onnx"))
    joint_param = {"joints": JOINTS}
    manifest = {
        "schema_version": 1, "task": "toy",
        "policy": {"file": "policy.onnx", "sha256": sha256_file(out_dir / "policy.onnx"), "input_name": "obs",
                   "output_name": "actions", "obs_dim": 6, "action_dim": 2},
        "control": {"dt": 0.02},
        "joints": {"names": JOINTS, "default_pos": [0.5, -1.0], "pos_limits": [[-2, 2], [-2.5, 0]],
                   "torque_limits": [50, 50], "kp": [40, 40], "kd": [1, 1]},
        "actions": [{"name": "legs", "type": "joint_position", "joints": JOINTS, "scale": [0.5, 0.5],
                     "offset": [0.5, -1.0], "clip": None}],
        "observations": {"group": "policy", "terms": [
            {"name": "joint_pos", "func": "batonlab.env.mdp:joint_pos_rel", "params": joint_param, "size": 2, "scale": 1.0,
             "clip": None, "history_length": 0},
            {"name": "joint_vel", "func": "batonlab.env.mdp:joint_vel", "params": joint_param, "size": 2, "scale": 0.1,
             "clip": None, "history_length": 0},
            {"name": "last_action", "func": "batonlab.env.mdp:last_action", "params": {}, "size": 2, "scale": 1.0,
             "clip": None, "history_length": 0},
        ]},
        "commands": {},
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest))
    return out_dir


@pytest.fixture
def context():
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=int(time.time_ns() % 50) + 170)
    yield ctx
    ctx.try_shutdown()


def make_node(context, export, **params):
    overrides = [Parameter("manifest", value=str(export)), Parameter("ramp_time_s", value=0.0),
                 Parameter("command_topic", value="joint_commands")]
    overrides += [Parameter(k, value=v) for k, v in params.items()]
    return PolicyNode(context=context, parameter_overrides=overrides)


def test_refuses_a_missing_manifest(context, tmp_path):
    with pytest.raises(RefusedToStart, match="manifest not found"):
        make_node(context, tmp_path / "nowhere")


def test_joint_states_in_commands_out(context, tmp_path):
    node = make_node(context, write_toy_export(tmp_path), command_joint_order=["knee", "hip"])
    robot = rclpy.create_node("robot", context=context)
    received = []
    robot.create_subscription(Float64MultiArray, "joint_commands", lambda m: received.append(list(m.data)), 10)
    pub = robot.create_publisher(JointState, "joint_states", 10)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(robot)
    deadline = time.monotonic() + 20.0
    while len(received) < 3 and time.monotonic() < deadline:
        pub.publish(JointState(name=["knee", "hip"], position=[-1.0, 0.5], velocity=[0.0, 0.0]))
        executor.spin_once(timeout_sec=0.01)
    executor.shutdown()
    node.destroy_node()
    robot.destroy_node()
    assert len(received) >= 3
    # target = offset + 0.5 * bias, sent in the controller's order (knee, hip)
    np.testing.assert_allclose(received[-1], [-1.0 - 0.05, 0.5 + 0.05], atol=1e-6)


def test_message_conventions():
    point = vector_to_msg([1.0, 2.0, 3.0], frame_id="arm_base")
    assert point.header.frame_id == "arm_base" and msg_to_vector(point) == [1.0, 2.0, 3.0]
    assert msg_to_vector(vector_to_msg([1.0, 2.0])) == [1.0, 2.0]
    twist = Twist()
    twist.linear.x, twist.linear.y, twist.angular.z = 0.5, -0.1, 0.3
    assert twist_to_vector(twist, 3) == [0.5, -0.1, 0.3]
    assert twist_to_vector(twist, 2) == [0.5, 0.3]
