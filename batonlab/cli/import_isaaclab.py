# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab import-isaaclab IO_DESCRIPTORS.yaml POLICY.onnx --robot ROBOT.yaml OUT_DIR`: an Isaac Lab policy as a
batonlab export.

Isaac Lab's IO descriptors (what the policy reads and writes, its default pose and timing) and the
robot description (gains and effort limits, which Isaac Lab does not export) become a manifest
(`batonlab.deploy.isaaclab_import`); the export writer puts it next to the policy, whose graph is
kept as Isaac Lab exported it. `policy_node` runs the folder unchanged; check it first with
`batonlab deploy OUT_DIR`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from batonlab.cli.common import CliError


def run(args: list[str]) -> int:
    """`batonlab import-isaaclab`: turn an Isaac Lab policy into an export folder; returns the exit code."""
    parser = argparse.ArgumentParser(prog="batonlab import-isaaclab", description="An Isaac Lab policy (its IO "
                                     "descriptors and policy.onnx) as a batonlab export folder that policy_node runs.")
    parser.add_argument("io_descriptors", type=Path, help="the IO-descriptor YAML Isaac Lab exported")
    parser.add_argument("policy", type=Path, help="Isaac Lab's exported policy.onnx")
    parser.add_argument("out_dir", type=Path, help="export folder to write (policy.onnx + manifest.json): one that "
                        "does not exist yet, or an earlier export")
    parser.add_argument("--robot", type=Path, required=True, help="robot description YAML (batonlab.robots.description)")
    parser.add_argument("--obs-group", default="policy", help="observation group the policy reads (default: policy)")
    parser.add_argument("--task", default=None, help="task name in the manifest (default: isaaclab:<descriptor file name>)")
    ns = parser.parse_args(args)

    from batonlab.cli.common import ROBOT_ERRORS
    from batonlab.deploy.isaaclab_import import ImuMount, IsaacLabImportError, import_isaaclab
    from batonlab.export.writer import check_export_folder
    from batonlab.robots.description import load_description, rigid_frame, site_frame
    from batonlab.robots.loader import IMU_SITE
    from batonlab.robots.model_file import read_robot_file

    try:
        check_export_folder(ns.out_dir)  # before anything is read: a run that cannot write stops first
    except OSError as err:
        raise CliError(f"OUT {ns.out_dir}: {err.strerror}") from None
    try:
        robot = load_description(ns.robot)
        robot_file = read_robot_file(robot.model, robot.package_roots)
    except ROBOT_ERRORS as err:
        raise CliError(f"--robot {ns.robot}: {err}") from None
    imu = None
    if robot.imu_site:
        imu = ImuMount(IMU_SITE, *rigid_frame(robot_file, site_frame(robot_file, robot.imu_site, robot.imu_offset)))
    try:
        manifest = import_isaaclab(ns.io_descriptors, ns.policy, robot, ns.obs_group, ns.task,
                                   root_body=robot_file.bodies[0], imu=imu)
    except IsaacLabImportError as err:
        raise CliError(f"cannot import {ns.io_descriptors}: {err}") from None

    import onnx

    from batonlab.export.writer import write_export

    onnx_path, manifest_path = write_export(ns.out_dir, onnx.load(str(ns.policy)), manifest)
    print(f"[batonlab] imported {ns.policy} for robot '{robot.name}': {manifest.obs_dim} observations "
          f"({', '.join(t.name for t in manifest.obs_terms)}) -> {manifest.action_dim} actions at "
          f"{manifest.control_rate_hz:g} Hz")
    unchecked = manifest.training_config["unchecked_gains"]
    if unchecked:
        print(f"[batonlab] Isaac Lab reports zero drive gains (explicit actuators) for {len(unchecked)} joints, so "
              f"nothing checks the gains used, the robot description's: {_gains_of(manifest, unchecked)}")
    print(f"[batonlab] wrote {onnx_path} and {manifest_path}; check it with: batonlab deploy {ns.out_dir}")
    return 0


def _gains_of(manifest, joints: list[str]) -> str:
    """The joints' kp and kd in `manifest`, joints of equal gains grouped: "kp 20, kd 0.5 for [a, b]; ..."."""
    index = {name: k for k, name in enumerate(manifest.joint_names)}
    groups: dict[tuple[float, float], list[str]] = {}
    for joint in joints:
        groups.setdefault((float(manifest.kp[index[joint]]), float(manifest.kd[index[joint]])), []).append(joint)
    return "; ".join(f"kp {kp:g}, kd {kd:g} for {names}" for (kp, kd), names in groups.items())
