# SPDX-License-Identifier: BSD-3-Clause
"""A robot description: which joints of a model file are driven, how, and within which limits.

Design and contract notes: docs/modules/batonlab.robots.description.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np
import yaml

from batonlab.robots.model_file import RobotDescriptionError, RobotFile, read_robot_file

CONTROL_KINDS = ("position", "velocity")
"""How an actuated joint is driven: PD to a position target, or P to a velocity target."""

BASE_KINDS = ("fixed", "floating")
"""A fixed base is welded to its parent frame; a floating base gets a free joint."""

_TOP_KEYS = ("name", "model", "package_roots", "base", "actuators", "default_joint_pos", "held_joints", "ee_site",
             "imu_site", "gravity_compensation", "collision_exclusions")
_REQUIRED_KEYS = ("name", "model", "base", "actuators", "default_joint_pos")
_GROUP_KEYS = ("joints", "control", "stiffness", "damping", "effort_limit", "velocity_limit", "armature")
_SITE_KEYS = ("parent", "pos", "quat", "rpy")


@dataclass(frozen=True)
class JointDrive:
    """How one actuated 1-DoF joint is driven (units: rad for hinges, m for slides)."""

    name: str
    """Joint name in the model file (the actuator gets the same name)."""
    control: str
    """"position" or "velocity" (`CONTROL_KINDS`)."""
    stiffness: float
    """Position control: kp [N·m/rad]. Velocity control: gain on the velocity error [N·m·s/rad]."""
    damping: float
    """Position control: kd [N·m·s/rad]; velocity control: 0 (the gain is `stiffness`)."""
    effort_limit: float
    """Actuator torque limit [N·m]."""
    velocity_limit: float
    """Joint speed limit [rad/s]; MuJoCo has no such limit: it bounds velocity targets and is exported."""
    armature: float
    """Reflected rotor inertia added to the joint [kg·m²]."""
    default_pos: float
    """Default (home) position, the offset of position actions [rad]."""

    def __post_init__(self):
        where = f"joint '{self.name}'"
        if self.control not in CONTROL_KINDS:
            raise RobotDescriptionError(f"{where}: control must be one of {list(CONTROL_KINDS)}, got {self.control!r}")
        _check_number(where, "stiffness", self.stiffness, positive=True)
        _check_number(where, "damping", self.damping, positive=False)
        _check_number(where, "effort_limit", self.effort_limit, positive=True)
        _check_number(where, "velocity_limit", self.velocity_limit, positive=True)
        _check_number(where, "armature", self.armature, positive=False)
        _check_number(where, "default_pos", self.default_pos, positive=False, signed=True)
        if self.control == "velocity" and self.damping != 0.0:
            raise RobotDescriptionError(f"{where}: velocity control has one gain, `stiffness` (on the velocity error); "
                                        f"damping must be 0 or left out, got {self.damping}")


@dataclass(frozen=True)
class SiteOffset:
    """Where a site sits in the frame of the site or body it is given relative to."""

    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Position in the parent frame [m]."""
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    """Orientation in the parent frame (unit quaternion w, x, y, z)."""


@dataclass(frozen=True)
class RobotDescription:
    """A robot model file plus how its joints are driven; what `batonlab.robots.load` builds a robot from."""

    name: str
    """Robot name (the spec's model name)."""
    model: Path
    """Absolute path of the URDF or MJCF file."""
    package_roots: dict[str, Path] = field(default_factory=dict)
    """Absolute folder of each ROS package named by `package://` URIs in a URDF."""
    base: str = "fixed"
    """"fixed" or "floating" (`BASE_KINDS`)."""
    joints: tuple[JointDrive, ...] = ()
    """The actuated joints, in model order (the order of their actuators)."""
    ee_site: str = ""
    """Site or body of the end effector ("" for none), or the parent of `ee_offset`; the loaded robot
    calls it site `ee`."""
    ee_offset: SiteOffset = SiteOffset()
    """The end effector (a tool centre point) in the frame of `ee_site`."""
    imu_site: str = ""
    """Site or body of the IMU ("" for none), or the parent of `imu_offset`; the loaded robot calls it site `imu`."""
    imu_offset: SiteOffset = SiteOffset()
    """The IMU in the frame of `imu_site`."""
    held_joints: tuple[str, ...] = ()
    """Actuated joints no policy drives: their servos hold them at their default position (fingers, a stowed arm)."""
    gravity_compensation: bool = False
    """Gravity on the robot's bodies is cancelled by its joint servos (a feed-forward torque within their
    effort limits), as on arms whose controllers compensate gravity."""
    collision_exclusions: tuple[tuple[str, str], ...] = ()
    """Body pairs whose contacts are ignored."""

    def __post_init__(self):
        if self.base not in BASE_KINDS:
            raise RobotDescriptionError(f"robot '{self.name}': base must be one of {list(BASE_KINDS)}, got {self.base!r}")
        if not self.joints:
            raise RobotDescriptionError(f"robot '{self.name}' has no actuated joints")
        names = [j.name for j in self.joints]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise RobotDescriptionError(f"robot '{self.name}': joints {repeated} are described more than once")
        if self.gravity_compensation and self.base != "fixed":
            raise RobotDescriptionError(f"robot '{self.name}': gravity_compensation needs a fixed base (on a floating "
                                        f"base it would make the whole robot weightless)")
        spinning = [j.name for j in self.joints if j.name in self.held_joints and j.control != "position"]
        if spinning:
            raise RobotDescriptionError(f"robot '{self.name}': held_joints {spinning} are velocity-controlled; a held "
                                        f"joint keeps its default position, so its servo must be position-controlled")
        if set(self.held_joints) >= set(names):
            raise RobotDescriptionError(f"robot '{self.name}': held_joints hold every actuated joint; "
                                        f"a policy needs at least one joint to drive")

    @property
    def policy_joint_names(self) -> tuple[str, ...]:
        """Actuated joints a policy may drive (the actuated ones that are not held), in model order."""
        return tuple(j.name for j in self.joints if j.name not in self.held_joints)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Actuated joints, in model order."""
        return tuple(j.name for j in self.joints)

    def joint(self, name: str) -> JointDrive:
        """The drive of joint `name`."""
        for drive in self.joints:
            if drive.name == name:
                return drive
        raise RobotDescriptionError(f"joint '{name}' is not actuated in robot '{self.name}'; "
                                    f"the actuated joints are {list(self.joint_names)}")


def load_description(source: str | Path | dict, model: str | Path | None = None) -> RobotDescription:
    """Read a robot description (YAML file or dict) and resolve it against its model file.

    Args:
        source: A YAML file (its relative paths are relative to its folder) or a dict of the same
            keys (relative paths relative to the working directory).
        model: Model file to use instead of the description's `model` key.

    Raises:
        RobotDescriptionError: an unknown or missing key, a bad value, a regex that matches no joint,
            a joint in two actuator groups, or a value neither the description nor the file gives.
        FileNotFoundError: the YAML, the model file or one of its meshes is missing.
    """
    if isinstance(source, dict):
        raw, folder = dict(source), Path.cwd()
    else:
        path = Path(source).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"robot description not found: {path}")
        raw, folder = _read_yaml(path), path.parent
        if not isinstance(raw, dict):
            raise RobotDescriptionError(f"robot description {path} must be a YAML mapping")
    if model is not None:
        raw["model"] = str(model)
    _check_keys("robot description", raw, _TOP_KEYS, _REQUIRED_KEYS)
    roots = raw.get("package_roots") or {}
    if not isinstance(roots, dict):
        raise RobotDescriptionError(f"package_roots must be a mapping of package name -> folder, got {roots!r}")
    package_roots = {}
    for package, root in roots.items():
        package_roots[str(package)] = (folder / str(root)).resolve()
        if not package_roots[str(package)].is_dir():
            raise FileNotFoundError(f"package_roots['{package}']: folder not found: {package_roots[str(package)]}")
    robot = read_robot_file(folder / str(raw["model"]), package_roots)
    drives = _resolve_drives(raw["actuators"], raw["default_joint_pos"], robot)
    exclusions = raw.get("collision_exclusions") or []
    if not isinstance(exclusions, list) or any(not isinstance(p, (list, tuple)) or len(p) != 2 for p in exclusions):
        raise RobotDescriptionError(f"collision_exclusions must be a list of body pairs, got {exclusions!r}")
    held = raw.get("held_joints") or []
    if not isinstance(held, list) or not all(isinstance(p, str) for p in held):
        raise RobotDescriptionError(f"held_joints must be a list of joint regexes, got {held!r}")
    actuated = [d.name for d in drives]
    held_names = {n for p in held for n in _matching(p, actuated, "held_joints", "actuated joint")}
    compensated = raw.get("gravity_compensation", False)
    if not isinstance(compensated, bool):
        raise RobotDescriptionError(f"gravity_compensation must be true or false, got {compensated!r}")
    ee_site, ee_offset = _site("ee_site", raw.get("ee_site"))
    imu_site, imu_offset = _site("imu_site", raw.get("imu_site"))
    description = RobotDescription(
        name=str(raw["name"]),
        model=robot.path,
        package_roots=package_roots,
        base=str(raw["base"]),
        joints=drives,
        ee_site=ee_site,
        ee_offset=ee_offset,
        imu_site=imu_site,
        imu_offset=imu_offset,
        held_joints=tuple(n for n in actuated if n in held_names),
        gravity_compensation=compensated,
        collision_exclusions=tuple((str(a), str(b)) for a, b in exclusions),
    )
    check_against_model(description, robot)
    return description


def check_against_model(description: RobotDescription, robot: RobotFile) -> None:
    """Check that every name in `description` exists in the model file and every default pose is in range."""
    known = [j.name for j in robot.joints]
    for drive in description.joints:
        joint = robot.joint(drive.name)
        if joint is None:
            raise RobotDescriptionError(f"joint '{drive.name}' is not a hinge or slide joint of {robot.path}; "
                                        f"those are {known}")
        if drive.name in robot.followers:
            raise RobotDescriptionError(f"joint '{drive.name}' follows joint '{robot.followers[drive.name][0]}' in "
                                        f"{robot.path} (a URDF <mimic> or an MJCF joint equality): describe only "
                                        f"its leader; it moves with it")
        if joint.range is not None and not joint.range[0] <= drive.default_pos <= joint.range[1]:
            raise RobotDescriptionError(f"joint '{drive.name}': default position {drive.default_pos} is outside "
                                        f"its range {list(joint.range)}")
    for key in ("ee_site", "imu_site"):
        name = getattr(description, key)
        if name and name not in robot.sites and name not in robot.bodies:
            raise RobotDescriptionError(f"{key} '{name}' is neither a site nor a body of {robot.path}; "
                                        f"sites: {list(robot.sites)}, bodies: {list(robot.bodies)}")
    for pair in description.collision_exclusions:
        for body in pair:
            if body not in robot.bodies:
                raise RobotDescriptionError(f"collision_exclusions {list(pair)}: '{body}' is not a body of "
                                            f"{robot.path}; bodies: {list(robot.bodies)}")


Frame = tuple[str, tuple[float, ...], tuple[float, ...]]
"""A frame fixed to a body: (body, pos [m], quat w x y z in the body's frame)."""


def site_frame(robot: RobotFile, target: str, offset: SiteOffset = SiteOffset()) -> Frame:
    """The frame of a description's site: `offset` in the frame of site or body `target`, on the body it names."""
    body, pos, quat = robot.site_frames[target] if target in robot.sites else (target, (0.0, 0.0, 0.0),
                                                                               (1.0, 0.0, 0.0, 0.0))
    return (body, *_compose(pos, quat, offset.pos, offset.quat))


def rigid_frame(robot: RobotFile, frame: Frame) -> Frame:
    """`frame` on the nearest body that moves with joints of its own (or is the root): up through jointless bodies."""
    body, pos, quat = frame
    while body in robot.welds:
        parent, body_pos, body_quat = robot.welds[body]
        pos, quat = _compose(body_pos, body_quat, pos, quat)
        body = parent
    return body, pos, quat


# Private helpers.


def _read_yaml(path: Path):
    """The YAML document of a description file; one line naming the file for text that is no YAML."""
    try:
        return yaml.safe_load(path.read_text())
    except UnicodeDecodeError:
        raise RobotDescriptionError(f"robot description {path} is not a text file (expected a YAML mapping)") from None
    except yaml.YAMLError as err:
        raise RobotDescriptionError(f"robot description {path} is not valid YAML: {' '.join(str(err).split())}"
                                    ) from None


def _site(key: str, value) -> tuple[str, SiteOffset]:
    """`ee_site`/`imu_site` as a name, or as {parent, pos, quat | rpy} (a site placed in a parent's frame)."""
    if value is None or value == "":
        return "", SiteOffset()
    if isinstance(value, str):
        return value, SiteOffset()
    if not isinstance(value, dict):
        raise RobotDescriptionError(f"{key} must be a site or body name, or a mapping with keys {list(_SITE_KEYS)} "
                                    f"(parent: a site or body; pos [m]; quat w x y z or rpy [rad]), got {value!r}")
    _check_keys(key, value, _SITE_KEYS, ("parent",))
    if "quat" in value and "rpy" in value:
        raise RobotDescriptionError(f"{key}: give its orientation as quat or as rpy, not both")
    pos = _vector(f"{key}.pos", value.get("pos", [0.0, 0.0, 0.0]), 3)
    if "rpy" in value:
        quat = np.zeros(4)
        mujoco.mju_euler2Quat(quat, np.asarray(_vector(f"{key}.rpy", value["rpy"], 3)), "XYZ")
    else:
        quat = np.asarray(_vector(f"{key}.quat", value.get("quat", [1.0, 0.0, 0.0, 0.0]), 4))
        norm = float(np.linalg.norm(quat))
        if abs(norm - 1.0) > 1e-3:
            raise RobotDescriptionError(f"{key}.quat must be a unit quaternion (w, x, y, z), got {list(quat)} "
                                        f"(norm {norm:.4f})")
        quat = quat / norm
    return str(value["parent"]), SiteOffset(pos, tuple(float(q) for q in quat))


def _compose(parent_pos, parent_quat, pos, quat) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(pos, quat) given in a frame that sits at (parent_pos, parent_quat), expressed in that frame's parent."""
    site_pos, site_quat = np.zeros(3), np.zeros(4)
    mujoco.mju_rotVecQuat(site_pos, np.asarray(pos, dtype=float), np.asarray(parent_quat, dtype=float))
    mujoco.mju_mulQuat(site_quat, np.asarray(parent_quat, dtype=float), np.asarray(quat, dtype=float))
    return tuple(map(float, site_pos + np.asarray(parent_pos))), tuple(map(float, site_quat))


def _vector(where: str, value, size: int) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)) or len(value) != size:
        raise RobotDescriptionError(f"{where} must be a list of {size} numbers, got {value!r}")
    numbers = tuple(_number(where, v) for v in value)
    if not all(math.isfinite(v) for v in numbers):
        raise RobotDescriptionError(f"{where} must be finite, got {list(numbers)}")
    return numbers


def _resolve_drives(groups, default_joint_pos, robot: RobotFile) -> tuple[JointDrive, ...]:
    """One `JointDrive` per joint matched by an actuator group, in model order."""
    if not isinstance(groups, list) or not groups:
        raise RobotDescriptionError(f"actuators must be a non-empty list of actuator groups, got {groups!r}")
    names = [j.name for j in robot.joints]
    owner: dict[str, tuple[str, dict]] = {}
    for index, group in enumerate(groups):
        if not isinstance(group, dict):
            raise RobotDescriptionError(f"actuators[{index}] must be a mapping, got {group!r}")
        _check_keys(f"actuators[{index}]", group, _GROUP_KEYS, ("joints", "control"))
        if group["control"] not in CONTROL_KINDS:
            raise RobotDescriptionError(f"actuators[{index}]: control must be one of {list(CONTROL_KINDS)}, "
                                        f"got {group['control']!r}")
        patterns = [group["joints"]] if isinstance(group["joints"], str) else group["joints"]
        if not isinstance(patterns, list) or not patterns:
            raise RobotDescriptionError(f"actuators[{index}].joints must be a regex or a list of regexes, "
                                        f"got {group['joints']!r}")
        for pattern in patterns:
            for name in _matching(str(pattern), names, f"actuators[{index}].joints", "1-DoF joint"):
                if name in owner:
                    raise RobotDescriptionError(f"joint '{name}' is matched by two actuator groups: pattern "
                                                f"'{owner[name][0]}' and pattern '{pattern}'")
                owner[name] = (str(pattern), group)
    actuated = [n for n in names if n in owner]
    defaults = _default_positions(default_joint_pos, actuated)
    drives = []
    for name in actuated:
        group, joint = owner[name][1], robot.joint(name)
        where = f"joint '{name}' (actuator group of pattern '{owner[name][0]}')"
        control = group["control"]
        stiffness = _value(group, "stiffness", None, where, "no stiffness")
        damping = (_value(group, "damping", None, where, "no damping") if control == "position"
                   else _value(group, "damping", 0.0, where, ""))
        effort = _value(group, "effort_limit", joint.effort_limit, where,
                        "no effort_limit in the description nor in the model file")
        velocity = _value(group, "velocity_limit", joint.velocity_limit, where,
                          "no velocity_limit in the description nor in the model file")
        armature = _value(group, "armature", joint.armature or None, where,
                          "no armature in the description nor in the model file (write `armature: 0` for none)")
        drives.append(JointDrive(name, control, stiffness, damping, effort, velocity, armature, defaults[name]))
    return tuple(drives)


def _default_positions(mapping, actuated: list[str]) -> dict[str, float]:
    """Default position of every actuated joint.

    A joint's exact name beats any regex; two regexes giving one joint different values are an error.
    The written order never matters (YAML tools reorder mappings).
    """
    if not isinstance(mapping, dict) or not mapping:
        raise RobotDescriptionError(f"default_joint_pos must be a mapping of joint regex -> position, got {mapping!r}")
    exact: dict[str, float] = {}
    by_regex: dict[str, tuple[str, float]] = {}
    for pattern, value in mapping.items():
        pattern = str(pattern)
        value = _number(f"default_joint_pos['{pattern}']", value)
        for name in _matching(pattern, actuated, "default_joint_pos", "actuated joint"):
            if pattern == name:
                exact[name] = value
            elif name in by_regex and by_regex[name][1] != value:
                raise RobotDescriptionError(
                    f"default_joint_pos: joint '{name}' is matched by patterns '{by_regex[name][0]}' ({by_regex[name][1]}) "
                    f"and '{pattern}' ({value}); name the joint exactly or make the patterns disjoint")
            else:
                by_regex[name] = (pattern, value)
    values = {**{n: v for n, (_, v) in by_regex.items()}, **exact}
    missing = [n for n in actuated if n not in values]
    if missing:
        raise RobotDescriptionError(f"default_joint_pos gives no position for actuated joints {missing}")
    return values


def _matching(pattern: str, names: list[str], where: str, kind: str) -> list[str]:
    """Names that `pattern` matches in full; an invalid or unmatched pattern is an error naming it."""
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise RobotDescriptionError(f"{where}: '{pattern}' is not a valid regex ({error})") from None
    matched = [n for n in names if regex.fullmatch(n)]
    if not matched:
        raise RobotDescriptionError(f"{where}: pattern '{pattern}' matches no {kind}; the {kind}s are {names}")
    return matched


def _value(group: dict, key: str, fallback: float | None, where: str, missing: str) -> float:
    if key in group and group[key] is not None:
        return _number(f"{where}: {key}", group[key])
    if fallback is None:
        raise RobotDescriptionError(f"{where}: {missing}")
    return float(fallback)


def _number(where: str, value) -> float:
    """A float from YAML; strings such as "1e3" count (PyYAML reads exponents without a dot as strings)."""
    if isinstance(value, bool):
        raise RobotDescriptionError(f"{where} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise RobotDescriptionError(f"{where} must be a number, got {value!r}") from None


def _check_number(where: str, key: str, value: float, positive: bool, signed: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and not signed:
        ok = value > 0 if positive else value >= 0
    if not ok:
        bound = "finite" if signed else ("finite and > 0" if positive else "finite and >= 0")
        raise RobotDescriptionError(f"{where}: {key} must be {bound}, got {value!r}")


def _check_keys(where: str, mapping: dict, valid: tuple[str, ...], required: tuple[str, ...]) -> None:
    unknown = sorted(str(k) for k in mapping if k not in valid)
    if unknown:
        raise RobotDescriptionError(f"{where}: unknown keys {unknown}; valid keys are {list(valid)}")
    missing = [k for k in required if mapping.get(k) is None]
    if missing:
        raise RobotDescriptionError(f"{where}: missing keys {missing}")
