# SPDX-License-Identifier: BSD-3-Clause
"""`robot_bundle`: a description and every file it loads, read from the parsed files (a URDF's meshes, an
MJCF's includes and meshes), copied in their layout so the copy loads without the originals."""

from __future__ import annotations

import shutil

from batonlab.robots.bundle import changed_files, robot_bundle
from batonlab.robots.description import load_description
from robot_files import box_mesh, write_binary_stl, write_urdf_arm

MJCF = """<mujoco>
  <compiler meshdir="../meshes"/>
  <include file="parts/assets.xml"/>
  <worldbody>
    <body name="base">
      <geom type="mesh" mesh="box"/>
      <body name="link" pos="0 0 0.1">
        <joint name="hinge" axis="0 1 0" range="-1 1"/>
        <geom type="capsule" size="0.02 0.1" mass="0.5"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

DESCRIPTION = """name: one_joint
model: model/one_joint.xml
base: fixed
actuators: [{joints: hinge, control: position, stiffness: 10.0, damping: 1.0, effort_limit: 5.0,
             velocity_limit: 2.0, armature: 0.01}]
default_joint_pos: {hinge: 0.0}
"""


def test_an_mjcf_bundle_holds_its_includes_and_meshes_and_its_copy_loads(tmp_path):
    source = tmp_path / "robot"
    (source / "model" / "parts").mkdir(parents=True)
    (source / "meshes").mkdir()
    write_binary_stl(source / "meshes" / "box.stl", *box_mesh((0.05, 0.05, 0.05)))
    (source / "model" / "parts" / "assets.xml").write_text('<mujoco><asset><mesh name="box" file="box.stl"/></asset>'
                                                           '</mujoco>')
    (source / "model" / "one_joint.xml").write_text(MJCF)
    (source / "one_joint.yaml").write_text(DESCRIPTION)
    bundle = robot_bundle(source / "one_joint.yaml")
    assert list(bundle.files) == ["one_joint.yaml", "model/one_joint.xml", "model/parts/assets.xml", "meshes/box.stl"]
    hashes, copy = bundle.hashes(), bundle.copy_to(tmp_path / "copy")
    shutil.rmtree(source)
    assert load_description(copy).model == (tmp_path / "copy" / "model" / "one_joint.xml").resolve()
    assert changed_files(hashes, robot_bundle(copy).hashes()) == []


def test_a_urdf_bundle_keeps_its_package_root_and_names_a_changed_mesh(tmp_path):
    bundle = robot_bundle(write_urdf_arm(tmp_path / "arm"))
    assert bundle.folders == ("test_arm_description",)
    copy = bundle.copy_to(tmp_path / "copy")
    mesh = tmp_path / "copy" / "test_arm_description" / "meshes" / "link_box.stl"
    write_binary_stl(mesh, *box_mesh((0.1, 0.1, 0.1)))
    assert changed_files(bundle.hashes(), robot_bundle(copy).hashes()) == ["test_arm_description/meshes/link_box.stl"]
