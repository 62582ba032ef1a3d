# SPDX-License-Identifier: BSD-3-Clause
"""Isaac Lab policies on the batonlab robot side: IO descriptors + policy.onnx + robot description → a manifest.

The IMU rule: base_ang_vel and projected_gravity are the root body's angular velocity and gravity direction, in
its frame, and the robot side feeds the IMU's readings as they are. An IMU frame on the (rigid) root body that
is only translated measures exactly these (neither quantity depends on the point of a rigid body), so it is
accepted and its position recorded in the manifest's sensors; a rotated IMU frame, or one on another body,
measures something else and is refused, as is a policy that reads either term from a robot without an IMU.

Design and contract notes: docs/modules/batonlab.deploy.isaaclab_import.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from batonlab.deploy.isaaclab_descriptors import (
    ActionDescriptor,
    ArticulationDescriptor,
    IoDescriptors,
    IsaacLabImportError,
    ObsDescriptor,
    load_io_descriptors,
)
from batonlab.deploy.manifest import (
    ActionTerm,
    ActuatedJoints,
    CommandSpec,
    ControlTiming,
    Manifest,
    ManifestError,
    ObsTermLayout,
    PolicyFile,
    SensorSpec,
)
from batonlab.deploy.manifest_robot import IMU_ANGULAR_VELOCITY, IMU_ORIENTATION, TOPIC

if TYPE_CHECKING:
    from batonlab.robots.description import RobotDescription

__all__ = ["ACTIONS", "ImuMount", "IsaacLabImportError", "OBSERVATIONS", "check_policy_file", "import_isaaclab",
           "manifest_from_io_descriptors"]

ISAACLAB_OBS = "isaaclab.envs.mdp.observations."
ISAACLAB_ACTIONS = "isaaclab.envs.mdp.actions.joint_actions."

VELOCITY_FIELDS = ("lin_vel_x", "lin_vel_y", "ang_vel_z")
"""Components of Isaac Lab's UniformVelocityCommand [m/s, m/s, rad/s]."""

GAIN_TOLERANCE = 1e-4
"""Relative difference above which an Isaac Lab gain and the robot description's disagree."""
OFFSET_TOLERANCE = 1e-6
"""Offsets closer than this to the default pose (or to zero) are equal to it [rad]; also the default-pose and
IMU-rotation tolerance."""
IMU_TERMS = (ISAACLAB_OBS + "base_ang_vel", ISAACLAB_OBS + "projected_gravity")
"""Isaac Lab terms the robot's IMU gives: root-body quantities in the root body's frame."""


@dataclass(frozen=True)
class ImuMount:
    """Where the robot's IMU sits: its frame, fixed to a body at a pose (`batonlab.robots.description.rigid_frame`)."""

    site: str
    """The IMU frame's name on the robot."""
    body: str
    """The moving body the IMU frame is fixed to."""
    pos: tuple[float, ...] = (0.0, 0.0, 0.0)
    """Position of the IMU frame in `body` [m]."""
    quat: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0)
    """Orientation of the IMU frame in `body` (w, x, y, z)."""


# Observation terms.


@dataclass
class _Context:
    """What observation terms read while they are mapped, and the inputs they declare."""

    default_pos: dict[str, float]
    """The articulation's default pose [rad]."""
    action_dim: int
    frame: str
    """The root body: base_ang_vel, projected_gravity and base_lin_vel are expressed in its frame."""
    imu: ImuMount | None
    """The robot's IMU, checked to be an unrotated frame on the root body when a term reads it."""
    sensors: dict[str, SensorSpec]
    commands: dict[str, CommandSpec]


def _joint_pos_rel(term: ObsDescriptor, name: str, ctx: _Context) -> tuple[str, dict]:
    joints = _joints_of(term)
    if term.joint_pos_offsets is not None:
        wrong = [j for j, o in zip(joints, term.joint_pos_offsets) if abs(o - ctx.default_pos[j]) > OFFSET_TOLERANCE]
        if wrong:
            raise IsaacLabImportError(f"{term.label} subtracts joint_pos_offsets that are not the articulation's default "
                                      f"pose for joints {wrong}; batonlab reads positions relative to one default pose")
    return "batonlab.observations.proprioception:joint_pos_rel", {"joints": joints}


def _joint_vel_rel(term: ObsDescriptor, name: str, ctx: _Context) -> tuple[str, dict]:
    moving = [j for j, o in zip(term.joint_names or (), term.joint_vel_offsets or ()) if abs(o) > OFFSET_TOLERANCE]
    if moving:
        raise IsaacLabImportError(f"{term.label} subtracts non-zero default velocities for joints {moving}; "
                                  "batonlab reads joint velocities as they are")
    return _joint_vel(term, name, ctx)


def _joint_vel(term: ObsDescriptor, name: str, ctx: _Context) -> tuple[str, dict]:
    return "batonlab.observations.proprioception:joint_vel", {"joints": _joints_of(term)}


def _last_action(term: ObsDescriptor, name: str, ctx: _Context) -> tuple[str, dict]:
    if term.size != ctx.action_dim:
        raise IsaacLabImportError(f"{term.label} has shape [{term.size}], the policy has {ctx.action_dim} actions; "
                                  "batonlab's last_action is the whole action vector")
    return "batonlab.observations.proprioception:last_action", {}


def _projected_gravity(term: ObsDescriptor, name: str, ctx: _Context) -> tuple[str, dict]:
    _check_size(term, 3)
    imu = ctx.imu
    ctx.sensors["imu_quat"] = SensorSpec("framequat", 4, IMU_ORIENTATION, imu.site, imu.body, imu.pos, imu.quat)
    return "batonlab.observations.sensors:projected_gravity", {"sensor": "imu_quat"}


def _base_ang_vel(term: ObsDescriptor, name: str, ctx: _Context) -> tuple[str, dict]:
    _check_size(term, 3)
    imu = ctx.imu
    ctx.sensors["imu_gyro"] = SensorSpec("gyro", 3, IMU_ANGULAR_VELOCITY, imu.site, imu.body, imu.pos, imu.quat)
    return "batonlab.observations.sensors:sensor", {"name": "imu_gyro"}


def _base_lin_vel(term: ObsDescriptor, name: str, ctx: _Context) -> tuple[str, dict]:
    _check_size(term, 3)
    ctx.sensors["base_lin_vel"] = SensorSpec("velocimeter", 3, TOPIC, ctx.frame, ctx.frame)
    return "batonlab.observations.sensors:sensor", {"name": "base_lin_vel"}


def _generated_commands(term: ObsDescriptor, name: str, ctx: _Context) -> tuple[str, dict]:
    if term.size == len(VELOCITY_FIELDS):
        ctx.commands[name] = CommandSpec("UniformVelocityCommand", term.size, VELOCITY_FIELDS, (0.0,) * term.size)
    else:
        ctx.commands[name] = CommandSpec("isaaclab:generated_commands", term.size)
    return "batonlab.observations.commands:generated_command", {"command": name}


OBSERVATIONS: dict[str, Callable[[ObsDescriptor, str, _Context], tuple[str, dict]]] = {
    ISAACLAB_OBS + "joint_pos_rel": _joint_pos_rel,
    ISAACLAB_OBS + "joint_vel_rel": _joint_vel_rel,
    ISAACLAB_OBS + "joint_vel": _joint_vel,
    ISAACLAB_OBS + "last_action": _last_action,
    ISAACLAB_OBS + "projected_gravity": _projected_gravity,
    ISAACLAB_OBS + "base_ang_vel": _base_ang_vel,
    ISAACLAB_OBS + "base_lin_vel": _base_lin_vel,
    ISAACLAB_OBS + "generated_commands": _generated_commands,
}
"""Isaac Lab observation function → its batonlab term (training function, params), given the term's manifest name."""

_WHY_NOT = {
    "joint_pos": "absolute joint positions; batonlab's joint-position term is relative to the default pose",
    "joint_pos_limit_normalized": "positions normalised by the joint limits have no robot-side twin",
    "joint_effort": "the robot side reads no joint efforts",
    "base_pos_z": "the base height needs a height estimate the robot side has no input for",
    "height_scan": "a height map from a ray caster has no robot-side input",
    "root_pos_w": "world-frame root positions need localisation the robot side has no input for",
    "root_quat_w": "the robot side reads the base orientation only as projected_gravity",
}
"""Why some common Isaac Lab terms are refused, beyond "no robot-side twin"."""


ACTIONS: dict[str, tuple[str, str]] = {
    ISAACLAB_ACTIONS + "JointPositionAction": ("joint_position", "position"),
    ISAACLAB_ACTIONS + "JointVelocityAction": ("joint_velocity", "velocity"),
}
"""Isaac Lab action term class → (manifest action type, robot-description control it needs)."""


# The manifest.


def manifest_from_io_descriptors(io: IoDescriptors, robot: RobotDescription, obs_group: str = "policy",
                                 task: str = "isaaclab", *, root_body: str, imu: ImuMount | None) -> Manifest:
    """The manifest of an Isaac Lab policy (its ONNX file's names and hash not filled in: `import_isaaclab`).

    Args:
        io: The IO descriptors (`load_io_descriptors`).
        robot: The robot description: gains, effort limits and the joints the robot has.
        obs_group: The observation group the policy reads.
        task: The manifest's task name.
        root_body: The articulation's root body in the robot's model file: the body the IMU must sit on
            and the frame of base_lin_vel (written into the manifest's sensors for whoever wires the robot).
        imu: Where the robot's IMU sits (None: the description names no `imu_site`).

    Raises:
        IsaacLabImportError: naming the term or joints that cannot be mapped.
    """
    if obs_group not in io.observations:
        raise IsaacLabImportError(f"observation group '{obs_group}' is not in the descriptors; groups: "
                                  f"{sorted(io.observations)}")
    obs_terms = io.observations[obs_group]
    _check_joints_known(robot, io.actions, obs_terms)
    articulation = io.articulation_of([j for a in io.actions for j in a.joint_names])
    default_pos = articulation.by_joint(articulation.default_joint_pos)
    _check_default_pose(robot, default_pos)
    _check_imu(obs_terms, robot, imu, root_body)
    for term in obs_terms:
        outside = [j for j in term.joint_names or () if j not in default_pos]
        if outside:
            raise IsaacLabImportError(f"{term.label} reads joints {outside} that articulation '{articulation.name}' "
                                      "does not have")
    # Isaac Lab names a term by its function or class, so two may share a name: later ones get their index.
    actions = [_action_term(a, name, default_pos, robot) for a, name in zip(io.actions, _unique([a.name for a in io.actions]))]
    joint_names = tuple(j for a in actions for j in a.joints)
    unchecked = _check_gains(robot, articulation, joint_names)
    drives = [robot.joint(j) for j in joint_names]
    limits = articulation.by_joint(articulation.pos_limits)
    joints = ActuatedJoints(
        names=joint_names,
        pos_limits=tuple(limits[j] for j in joint_names),
        ctrl_range=tuple(c for a in io.actions for c in a.clip),
        torque_limits=tuple(float(d.effort_limit) for d in drives),
        kp=tuple(float(d.stiffness) for d in drives),
        kd=tuple(float(d.damping) for d in drives),
    )
    ctx = _Context(default_pos, len(joint_names), root_body, imu, {}, {})
    layouts = [_obs_layout(term, name, ctx) for term, name in zip(obs_terms, _unique([t.name for t in obs_terms]))]
    try:
        return Manifest(
            task=task, policy=PolicyFile(), control=ControlTiming(io.physics_dt, io.decimation), joints=joints,
            default_joint_pos=default_pos, actions=tuple(actions), obs_terms=tuple(layouts), obs_group=obs_group,
            commands=ctx.commands, sensors=ctx.sensors,
            training_config={"source": "isaaclab", "robot": robot.name, "unchecked_gains": unchecked,
                             "io_descriptors": io.raw},
        )
    except ManifestError as err:
        raise IsaacLabImportError(str(err)) from None


def check_policy_file(path: str | Path, obs_dim: int, action_dim: int, obs_widths: dict[str, int] | None = None
                      ) -> tuple[str, str]:
    """Open the ONNX policy and check it maps (batch, obs_dim) → (batch, action_dim); returns its (input, output) names.

    Args:
        obs_widths: Observation term → width, named in the message when the input width is wrong.

    Raises:
        IsaacLabImportError: not ONNX, not one input and one output (a recurrent policy), or other widths.
    """
    import onnxruntime as ort

    path = Path(path)
    if not path.is_file():
        raise IsaacLabImportError(f"policy file not found: {path}")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own types for files it cannot parse
        raise IsaacLabImportError(f"{path}: not an ONNX model onnxruntime can load ({' '.join(str(err).split())})") from None
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if len(inputs) != 1 or len(outputs) != 1:
        raise IsaacLabImportError(f"{path.name} has inputs {[i.name for i in inputs]} and outputs {[o.name for o in outputs]}; "
                                  "batonlab runs feed-forward policies with one input and one output (no recurrent state)")
    layout = ", ".join(f"{name} {width}" for name, width in (obs_widths or {}).items())
    expected = f"the descriptors' observation terms sum to {obs_dim}" + (f" ({layout})" if layout else "")
    shape = inputs[0].shape
    if len(shape) != 2 or (isinstance(shape[1], int) and shape[1] != obs_dim):
        raise IsaacLabImportError(f"{path.name}: input '{inputs[0].name}' has shape {shape}, {expected}")
    try:
        result = session.run(None, {inputs[0].name: np.zeros((1, obs_dim), dtype=np.float32)})[0]
    except Exception as err:  # a symbolic input width the graph's weights do not fit
        raise IsaacLabImportError(f"{path.name} does not run on {obs_dim} observations ({expected}): "
                                  f"{' '.join(str(err).split())}") from None
    if result.shape != (1, action_dim):
        raise IsaacLabImportError(f"{path.name}: output '{outputs[0].name}' has shape {list(result.shape)} for one "
                                  f"observation, the descriptors' action terms drive {action_dim} joints")
    return inputs[0].name, outputs[0].name


def import_isaaclab(io_descriptors: str | Path, policy: str | Path, robot: RobotDescription, obs_group: str = "policy",
                    task: str | None = None, *, root_body: str, imu: ImuMount | None) -> Manifest:
    """The manifest of an Isaac Lab policy, checked against its ONNX file (names filled in, hash not).

    Args:
        io_descriptors: The YAML Isaac Lab wrote.
        policy: Isaac Lab's exported policy.onnx.
        robot: The robot description (`batonlab.robots.description.load_description`).
        obs_group: The observation group the policy reads.
        task: The manifest's task name (default: "isaaclab:" and the descriptor file's name without "_IO_descriptors").
        root_body: The root body of the robot's model file (see `manifest_from_io_descriptors`).
        imu: Where the robot's IMU sits (see `manifest_from_io_descriptors`).

    Raises:
        IsaacLabImportError: naming what cannot be imported.
    """
    io_descriptors = Path(io_descriptors)
    task = task or "isaaclab:" + io_descriptors.stem.removesuffix("_IO_descriptors").removesuffix("_io_descriptors")
    manifest = manifest_from_io_descriptors(load_io_descriptors(io_descriptors), robot, obs_group, task,
                                            root_body=root_body, imu=imu)
    widths = {t.name: t.width for t in manifest.obs_terms}
    input_name, output_name = check_policy_file(policy, manifest.obs_dim, manifest.action_dim, widths)
    return dataclasses.replace(manifest, policy=PolicyFile(input_name=input_name, output_name=output_name))


# Private helpers.


def _obs_layout(term: ObsDescriptor, name: str, ctx: _Context) -> ObsTermLayout:
    """The manifest term of an Isaac Lab observation term, processing included."""
    mapper = OBSERVATIONS.get(term.full_path)
    if mapper is None:
        short = term.full_path.removeprefix(ISAACLAB_OBS)
        why = _WHY_NOT.get(short, "it has no robot-side twin in batonlab.deploy")
        raise IsaacLabImportError(f"{term.label}: {term.full_path} cannot be computed on the robot ({why}); batonlab "
                                  f"imports the Isaac Lab terms {sorted(p.removeprefix(ISAACLAB_OBS) for p in OBSERVATIONS)}")
    if term.modifiers:
        raise IsaacLabImportError(f"{term.label} has modifiers {term.modifiers!r}, which the robot side does not apply")
    if term.history_length > 0 and not term.flatten_history_dim:
        raise IsaacLabImportError(f"{term.label} keeps its history as a separate dimension (flatten_history_dim: "
                                  "false); batonlab's policy input is flat")
    scale = term.scale or (1.0,)
    if len(set(scale)) != 1:
        raise IsaacLabImportError(f"{term.label} scales its elements differently ({list(scale)}); a batonlab term has "
                                  "one scale")
    func, params = mapper(term, name, ctx)
    return ObsTermLayout(name, func, params, term.size, term.history_length, scale[0], term.clip)


def _action_term(action: ActionDescriptor, name: str, default_pos: dict[str, float], robot) -> ActionTerm:
    """The manifest's action term; Isaac Lab's clip (a bound of the target) becomes the joints' control range."""
    if action.full_path not in ACTIONS:
        raise IsaacLabImportError(f"{action.label}: '{action.full_path}' has no robot-side twin; batonlab runs the Isaac "
                                  f"Lab action terms {sorted(ACTIONS)}")
    action_type, control = ACTIONS[action.full_path]
    wrong = [j for j in action.joint_names if robot.joint(j).control != control]
    if wrong:
        raise IsaacLabImportError(f"{action.label} commands joints {wrong} by {control}, the robot description drives "
                                  f"them by {sorted({robot.joint(j).control for j in wrong})}")
    offset = np.array(action.offset)
    if np.all(np.abs(offset) <= OFFSET_TOLERANCE):
        use_default = False
    elif action_type == "joint_position" and np.all(
            np.abs(offset - [default_pos[j] for j in action.joint_names]) <= OFFSET_TOLERANCE):
        use_default = True
    else:
        raise IsaacLabImportError(f"{action.label} adds the offset {offset.tolist()}, which is neither zero nor its "
                                  "joints' default position; a manifest cannot express it")
    return ActionTerm(name, action_type, action.joint_names, action.scale, None, use_default)


def _check_gains(robot, articulation: ArticulationDescriptor, joints: tuple[str, ...]) -> list[str]:
    """Isaac Lab's non-zero drive gains (implicit actuators) must be the robot description's; returns the joints
    with a zero one (explicit actuators), whose description gains nothing checks."""
    wrong, unchecked = [], []
    for values, field in ((articulation.stiffness, "stiffness"), (articulation.damping, "damping")):
        by_joint = articulation.by_joint(values or ())
        for j in joints:
            theirs, ours = by_joint.get(j, 0.0), float(getattr(robot.joint(j), field))
            if theirs == 0.0:
                unchecked.append(j)
            elif not math.isclose(theirs, ours, rel_tol=GAIN_TOLERANCE):
                wrong.append(f"{j} {field} {theirs:g} in Isaac Lab, {ours:g} in the description")
    if wrong:
        raise IsaacLabImportError("the robot description's gains are not those the policy was trained with: "
                                  + "; ".join(wrong))
    return [j for j in joints if j in unchecked]


def _check_default_pose(robot, default_pos: dict[str, float]) -> None:
    """The robot description's default pose must be the one the policy was trained with (the descriptors')."""
    wrong = []
    for j, theirs in default_pos.items():
        ours = robot.joint(j).default_pos if j in robot.joint_names else theirs
        if abs(ours - theirs) > OFFSET_TOLERANCE:
            wrong.append(f"{j} {ours:g} in the description, {theirs:g} in Isaac Lab")
    if wrong:
        raise IsaacLabImportError("the robot description's default_joint_pos is not the default pose the policy was "
                                  "trained with: " + "; ".join(wrong) + "; make the description's default_joint_pos "
                                  "those of the descriptors")


def _check_imu(terms, robot, imu: ImuMount | None, root_body: str) -> None:
    """Terms that read the IMU need one, as an unrotated frame on the root body (the module docstring's rule)."""
    reading = [t.name for t in terms if t.full_path in IMU_TERMS]
    if not reading:
        return
    if imu is None:
        raise IsaacLabImportError(f"observation terms {reading} read the robot's IMU, and robot description "
                                  f"'{robot.name}' names no imu_site; give it the IMU's site (a site or body, or "
                                  f"{{parent, pos, quat}}) on the root body '{root_body}'")
    where = f"the IMU (imu_site '{robot.imu_site}') "
    if imu.body != root_body:
        raise IsaacLabImportError(f"{where}sits on body '{imu.body}', not on the root body '{root_body}': {reading} "
                                  "are the root body's angular velocity and gravity direction, which an IMU on "
                                  "another body does not measure")
    if np.linalg.norm(imu.quat[1:]) > OFFSET_TOLERANCE:
        quat = [round(q, 6) for q in imu.quat]
        raise IsaacLabImportError(f"{where}is rotated in the root body '{root_body}' (quat {quat}): {reading} are "
                                  "in the root body's frame and the robot side does not rotate IMU "
                                  "readings; give an imu_site whose axes are the root body's")


def _check_joints_known(robot, actions, terms) -> None:
    """Every joint an action or observation term names must be a joint of the robot description."""
    named = [j for a in actions for j in a.joint_names] + [j for t in terms for j in t.joint_names or ()]
    known = set(robot.joint_names)
    missing = list(dict.fromkeys(j for j in named if j not in known))
    if missing:
        raise IsaacLabImportError(f"joints {missing} of the descriptors are not joints of the robot description "
                                  f"'{robot.name}' (it has {list(robot.joint_names)})")


def _joints_of(term: ObsDescriptor) -> list[str]:
    if term.joint_names is None:
        raise IsaacLabImportError(f"{term.label} names no joints (joint_names)")
    return list(term.joint_names)


def _check_size(term: ObsDescriptor, size: int) -> None:
    if term.size != size:
        raise IsaacLabImportError(f"{term.label} has shape [{term.size}], the term is {size} values wide")


def _unique(names: list[str]) -> list[str]:
    """`names`, each repeated name suffixed with its index."""
    return [f"{name}_{k}" if name in names[:k] else name for k, name in enumerate(names)]
