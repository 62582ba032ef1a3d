# SPDX-License-Identifier: BSD-3-Clause
"""Reading a robot's model file (URDF or MJCF) into an editable MjSpec, and what the file says about its joints.

MuJoCo compiles URDF itself, but its defaults suit viewing rather than a robot description: it drops
visual meshes, fuses jointless links (the root link, a tool frame) into their parents, strips mesh
paths down to file names and knows nothing of ROS `package://` URIs. So a URDF is rewritten first:
every mesh filename becomes an absolute path (`package://<pkg>/<rest>` under the package's root,
anything relative under the URDF's folder, or its `<mujoco><compiler meshdir>` when it has one), and
a `<mujoco><compiler discardvisual="false" fusestatic="false" strippath="false"/>` extension keeps
visual geoms (MuJoCo gives them contype = conaffinity = 0, group 1) and every link as a body.

MuJoCo reads a URDF `<limit effort>` into the joint's `actuatorfrcrange` but drops `<limit velocity>`;
both are read here from the XML. An MJCF has no joint speed limit; its effort limits are the joints'
`actuatorfrcrange`.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import mujoco

from batonlab.robots.assets import compile_spec
from batonlab.sim.joints import ONE_DOF_JOINT_KINDS

URDF_SUFFIXES = (".urdf",)
MJCF_SUFFIXES = (".xml", ".mjcf")

_URDF_COMPILER = {"discardvisual": "false", "fusestatic": "false", "strippath": "false"}
"""MuJoCo compiler options a URDF is loaded with (see the module docstring)."""


class RobotDescriptionError(ValueError):
    """A robot description that is incomplete, inconsistent or does not fit its model file, or a model file
    that cannot be read (not XML, not a URDF or MJCF, or one MuJoCo cannot compile)."""


@dataclass(frozen=True)
class FileJoint:
    """A 1-DoF (hinge or slide) joint as the model file declares it."""

    name: str
    kind: str
    """"hinge" [rad] or "slide" [m]."""
    range: tuple[float, float] | None
    """Position limits [rad or m]; None for an unlimited (URDF continuous) joint."""
    effort_limit: float | None
    """Torque or force limit given by the file [N·m or N]; None when it gives none (or 0)."""
    velocity_limit: float | None
    """Speed limit given by the file (URDF only) [rad/s or m/s]; None when it gives none (or 0)."""
    armature: float
    """Reflected rotor inertia in the file (MJCF only; 0 when absent) [kg·m² or kg]."""


@dataclass
class RobotFile:
    """A model file read into a fresh MjSpec, plus the names a description may refer to."""

    path: Path
    spec: mujoco.MjSpec
    """The robot as written in the file (URDF rewritten as described in the module docstring)."""
    joints: tuple[FileJoint, ...]
    """1-DoF joints in model order (MuJoCo's joint ids)."""
    bodies: tuple[str, ...]
    """Body names, world excluded."""
    sites: tuple[str, ...]
    """Site names."""
    site_frames: dict[str, tuple[str, tuple[float, ...], tuple[float, ...]]]
    """Each site's (body, pos [m], quat wxyz) in its body's frame, as compiled."""
    welds: dict[str, tuple[str, tuple[float, ...], tuple[float, ...]]]
    """Each body without joints below the root (a URDF fixed joint's child): its (parent body, pos [m], quat wxyz)
    in the parent's frame, as compiled."""
    followers: dict[str, tuple[str, float, float]]
    """Joints that follow another joint (URDF `<mimic>`, MJCF joint equality): follower -> (leader, offset,
    multiplier), follower = offset + multiplier · leader [rad or m]."""

    def joint(self, name: str) -> FileJoint | None:
        """The file's joint named `name`, or None."""
        return next((j for j in self.joints if j.name == name), None)


def read_robot_file(path: str | Path, package_roots: dict[str, Path] | None = None) -> RobotFile:
    """Read a URDF or MJCF file into a fresh spec and collect its joints, bodies and sites.

    Args:
        path: The model file (`.urdf`, or `.xml`/`.mjcf` for MJCF).
        package_roots: Folder of each ROS package named by a `package://<pkg>/...` mesh URI.

    Raises:
        FileNotFoundError: the model file, a mesh file, or a `package://` package's root is missing.
        RobotDescriptionError: the file is not XML, neither URDF nor MJCF, or MuJoCo cannot compile it.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"robot model file not found: {path}")
    velocity_limits: dict[str, float] = {}
    effort_limits: dict[str, float] = {}
    if path.suffix.lower() not in URDF_SUFFIXES + MJCF_SUFFIXES:
        raise RobotDescriptionError(f"robot model file {path} must be a URDF ({', '.join(URDF_SUFFIXES)}) "
                                    f"or an MJCF ({', '.join(MJCF_SUFFIXES)}) file")
    try:
        if path.suffix.lower() in URDF_SUFFIXES:
            xml, effort_limits, velocity_limits = _rewrite_urdf(path, dict(package_roots or {}))
            spec = mujoco.MjSpec.from_string(xml)
        else:
            spec = mujoco.MjSpec.from_file(str(path))
        model = compile_spec(spec.copy())
    except ET.ParseError as err:
        raise RobotDescriptionError(f"robot model file {path} is not valid XML: {err}") from None
    except ValueError as err:  # MuJoCo's parse and compile errors
        if isinstance(err, RobotDescriptionError):
            raise
        raise RobotDescriptionError(f"MuJoCo cannot load the robot model file {path}: {' '.join(str(err).split())}"
                                    ) from None
    joints = []
    for j in range(model.njnt):
        kind = ONE_DOF_JOINT_KINDS.get(int(model.jnt_type[j]))
        if kind is None:
            continue
        name = model.joint(j).name
        effort = effort_limits.get(name)
        if effort is None and bool(model.jnt_actfrclimited[j]):
            effort = float(abs(model.jnt_actfrcrange[j]).max()) or None
        armature = float(model.dof_armature[model.jnt_dofadr[j]])
        limits = (float(model.jnt_range[j, 0]), float(model.jnt_range[j, 1])) if model.jnt_limited[j] else None
        joints.append(FileJoint(name, kind, limits, effort, velocity_limits.get(name), armature))
    sites = tuple(model.site(i).name for i in range(model.nsite))
    site_frames = {
        model.site(i).name: (model.body(int(model.site_bodyid[i])).name, tuple(map(float, model.site_pos[i])),
                             tuple(map(float, model.site_quat[i])))
        for i in range(model.nsite)
    }
    bodies = tuple(model.body(b).name for b in range(1, model.nbody))
    welds = {model.body(b).name: (model.body(int(model.body_parentid[b])).name, tuple(map(float, model.body_pos[b])),
                                  tuple(map(float, model.body_quat[b])))
             for b in range(1, model.nbody) if model.body_jntnum[b] == 0 and model.body_parentid[b] != 0}
    followers = {model.joint(int(model.eq_obj1id[e])).name: (model.joint(int(model.eq_obj2id[e])).name,
                                                             float(model.eq_data[e, 0]), float(model.eq_data[e, 1]))
                 for e in range(model.neq)
                 if int(model.eq_type[e]) == int(mujoco.mjtEq.mjEQ_JOINT) and int(model.eq_obj2id[e]) >= 0}
    return RobotFile(path, spec, tuple(joints), bodies, sites, site_frames, welds, followers)


def model_files(path: str | Path, package_roots: dict[str, Path] | None = None) -> tuple[Path, ...]:
    """Every file a model file loads, itself first, as absolute paths: a URDF's meshes (as `read_robot_file`
    resolves them); an MJCF's included files, meshes, height fields, skins and textures.

    Raises:
        FileNotFoundError: the model file or a URDF mesh is missing.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"robot model file not found: {path}")
    if path.suffix.lower() in URDF_SUFFIXES:
        meshes = [mesh for _, mesh in _urdf_meshes(ET.parse(path).getroot(), path, dict(package_roots or {}))]
    else:
        meshes = _mjcf_files(path)
    return tuple(dict.fromkeys([path, *meshes]))


def _rewrite_urdf(path: Path, package_roots: dict[str, Path]) -> tuple[str, dict[str, float], dict[str, float]]:
    """The URDF with absolute mesh paths and batonlab's compiler options, and its joints' effort and velocity limits."""
    root = ET.parse(path).getroot()
    if root.tag != "robot":
        raise RobotDescriptionError(f"{path} is not a URDF: its root element is <{root.tag}>, not <robot>")
    extension = root.find("mujoco")
    if extension is None:
        extension = ET.SubElement(root, "mujoco")
    compiler = extension.find("compiler")
    if compiler is None:
        compiler = ET.SubElement(extension, "compiler")
    for mesh, resolved in _urdf_meshes(root, path, package_roots):
        mesh.set("filename", str(resolved))
    compiler.attrib.pop("meshdir", None)
    compiler.attrib.update(_URDF_COMPILER)
    efforts, velocities = {}, {}
    for joint in root.iter("joint"):
        limit = joint.find("limit")
        if limit is None:
            continue
        for values, key in ((efforts, "effort"), (velocities, "velocity")):
            text = limit.get(key, "0")
            try:
                value = float(text)
            except ValueError:
                raise RobotDescriptionError(f"{path}: joint '{joint.get('name')}' <limit {key}=\"{text}\">: expected "
                                            "a number") from None
            if math.isfinite(value) and value > 0:
                values[joint.get("name")] = value
    return ET.tostring(root, encoding="unicode"), efforts, velocities


def _urdf_meshes(root: ET.Element, path: Path, package_roots: dict[str, Path]):
    """Each `<mesh>` element of the URDF's links with its file's absolute path (checked to exist)."""
    compiler = root.find("mujoco/compiler")
    # A meshdir in the URDF's own MuJoCo extension is where its relative mesh names live.
    mesh_folder = path.parent / (compiler.get("meshdir", "") if compiler is not None else "")
    for link in root.iter("link"):
        for mesh in link.iter("mesh"):
            yield mesh, _mesh_path(mesh.get("filename", ""), mesh_folder, package_roots, path, link.get("name"))


def _mjcf_files(path: Path) -> list[Path]:
    """The files an MJCF includes (recursively), and its meshes, height fields, skins and textures."""
    included, pending = [], [path]
    while pending:
        for element in ET.parse(pending.pop()).getroot().iter("include"):
            # MuJoCo resolves every <include file> against the main model file's folder.
            pending.append((path.parent / element.get("file", "")).resolve())
            included.append(pending[-1])
    spec = mujoco.MjSpec.from_file(str(path))
    mesh_folder, texture_folder = path.parent / spec.meshdir, path.parent / spec.texturedir
    names = [(mesh_folder, asset.file) for group in (spec.meshes, spec.hfields, spec.skins) for asset in group]
    names += [(texture_folder, name) for texture in spec.textures for name in (texture.file, *texture.cubefiles)]
    return included + [(folder / name).resolve() for folder, name in names if name]


def _mesh_path(filename: str, mesh_folder: Path, package_roots: dict[str, Path], urdf: Path, link: str | None) -> Path:
    """Absolute path of a URDF mesh filename, checked to exist."""
    where = f"mesh '{filename}' of link '{link}' in {urdf}"
    if filename.startswith("package://"):
        package, _, rest = filename.removeprefix("package://").partition("/")
        if package not in package_roots:
            raise FileNotFoundError(f"{where}: package '{package}' has no folder in package_roots "
                                    f"(known packages: {sorted(package_roots)})")
        resolved = Path(package_roots[package]) / rest
    elif filename.startswith("file://"):
        resolved = Path(filename.removeprefix("file://"))
    else:
        resolved = mesh_folder / filename
    resolved = resolved.resolve()
    if not resolved.is_file():
        raise FileNotFoundError(f"{where}: file not found: {resolved}")
    return resolved
