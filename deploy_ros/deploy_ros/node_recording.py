# SPDX-License-Identifier: BSD-3-Clause
"""`policy_node`'s bag: where it goes and the metadata that makes it replayable.

Why a module: `batonlab.logs.replay` rebuilds the run from this metadata (the manifest, the export
it came from, the control period, the clock), so what a bag must carry is kept in one short place.
With `record:=true`, a rosbag2 (MCAP) bag in `record_dir` holds the received inputs, every policy
step (observation, raw and filtered action, safety state) and the commands sent
(`batonlab.deploy.recording`). A separate writer process serialises and writes; if writing fails
(disk full) the node logs it, reports it in diagnostics and keeps controlling. Without `record:=true`
(or when the bag cannot be created) the node's recorder is a `NullRecorder`, which drops every call;
the bag writer is imported only when recording.

Only batonlab.deploy, rclpy and message packages are imported: no torch, no mujoco.
"""

from __future__ import annotations

import time
from pathlib import Path

from batonlab.deploy.null_recorder import NullRecorder


def open_recorder(node, p: dict, manifest, control_dt: float, use_sim_time: bool, command_joint_order):
    """With `record:=true`, a `BagRecorder` in `record_dir`; else, or (logged) if the bag cannot be created, a
    `NullRecorder`: the policy runs anyway."""
    if not p["record"]:
        return NullRecorder()
    from batonlab.deploy.manifest import sha256_file
    from batonlab.deploy.recording import BagRecorder, RecorderError

    manifest_file = Path(p["manifest"])
    manifest_file = manifest_file / "manifest.json" if manifest_file.is_dir() else manifest_file
    raw = {k: v for k, v in manifest.to_json().items() if k != "training_config"}
    metadata = {
        "source": "policy_node", "task": manifest.task, "robot": p["record_robot"] or None,
        "seed": p["record_seed"] if p["record_seed"] >= 0 else None,
        "manifest_sha256": sha256_file(manifest_file), "manifest_source": "export",
        "export_dir": str(manifest_file.parent.resolve()), "manifest": raw,
        "control_dt": control_dt, "use_sim_time": use_sim_time,
    }
    topics = {"joint_states": node.resolve_topic_name(p["joint_states_topic"]), "imu": node.resolve_topic_name(p["imu_topic"]),
              "odom": node.resolve_topic_name(p["odom_topic"]), "cmd_vel": node.resolve_topic_name(p["cmd_vel_topic"]),
              "joint_commands": node.resolve_topic_name(p["command_topic"])}
    path = Path(p["record_dir"]) / f"{manifest.task}_{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        recorder = BagRecorder(path, metadata, manifest.joint_names, command_joint_order, topics)
    except RecorderError as err:
        node.get_logger().error(f"recording disabled: {err}; the policy runs without it")
        return NullRecorder()
    node.get_logger().info(f"recording to {path}")
    return recorder
