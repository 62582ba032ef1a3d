# SPDX-License-Identifier: BSD-3-Clause
"""The deployment manifest, filled from the objects that drive the simulator.

The manifest's definition lives on the robot side (`batonlab.deploy.manifest.Manifest`, numpy only);
this module fills it. Every number is read from the env that trained the policy (its action terms,
its compiled MuJoCo model, its observation manager), never retyped, so the robot side cannot drift
from sim.
"""

from __future__ import annotations

import mujoco
import numpy as np

import batonlab
from batonlab.observations.sensors import sensor_pose
from batonlab.deploy.levels import LOWER_FOLDER
from batonlab.deploy.manifest_sections import COMMAND_LAYER_TYPE, CommandLayerSpec
from batonlab.deploy.manifest import (  # noqa: F401  (sha256_file: the robot side checks the same hash)
    ActionTerm,
    ActuatedJoints,
    CommandSpec,
    ControlTiming,
    HeldJoints,
    IKSpec,
    ToolStepSpec,
    Manifest,
    PolicyFile,
    SensorSpec,
    StopSpec,
    sha256_file,
)
from batonlab.deploy.manifest_robot import IMU_ANGULAR_VELOCITY, IMU_LINEAR_ACCELERATION, IMU_ORIENTATION, POSE, TOPIC
from batonlab.deploy.pose import POSE_DIM
from batonlab.env.env import BatonEnv
from batonlab.env.terms import qualified_name
from batonlab.sim.joints import one_dof_joint_ids



def manifest_from_env(env: BatonEnv, task: str, obs_group: str = "policy", training_config: dict | None = None) -> Manifest:
    """Everything the robot needs to rebuild the policy input and interpret its output (ONNX hash not filled in).

    Args:
        env: The env the policy was trained in (its play configuration is fine: the contract is the same).
        task: Registered task name.
        obs_group: Observation group the policy reads (deployable: see `batonlab.export.deployable`).
        training_config: How the policy was trained (checkpoint, configs), stored for reference.

    Raises:
        ValueError: an action term whose target offset is neither its joints' default position nor zero
            (the manifest cannot express it).
    """
    model = env.scene.model
    # Privileged action terms (virtual forces) are simulation only: the robot never sees them.
    terms = list(env.action_manager.deployable_terms.items())
    # A command layer's raw actions are the lower level's commands: it drives no joints of its own.
    layers = [term for _, term in terms if term.action_type == COMMAND_LAYER_TYPE]
    joint_terms = [term for _, term in terms if term.action_type != COMMAND_LAYER_TYPE]
    driven = {name for layer in layers for name in (layer.base_command, layer.ee_command)}
    joint_names = [j for term in joint_terms for j in term.joint_names]
    joint_range, torque_limits, kp, kd = _servo_limits(env, joint_names)
    # The range the action terms clamp their targets into before writing them to MuJoCo's ctrl.
    ctrl_range = np.stack([np.concatenate([t.ctrl_low.cpu().numpy() for t in joint_terms] or [np.zeros(0)]),
                           np.concatenate([t.ctrl_high.cpu().numpy() for t in joint_terms] or [np.zeros(0)])], axis=1)
    # Default pose of every 1-DoF joint, for observation terms that read joints the policy does not command.
    scalar = one_dof_joint_ids(model)
    default_qpos = env.default_qpos.cpu().double().numpy()
    default_joint_pos = {model.joint(j).name: float(default_qpos[int(model.jnt_qposadr[j])]) for j in scalar}
    return Manifest(
        task=task,
        policy=PolicyFile(),
        control=ControlTiming(physics_dt=float(env.cfg.sim.physics_dt), decimation=int(env.cfg.sim.decimation)),
        joints=ActuatedJoints(
            names=tuple(joint_names),
            pos_limits=_pairs(joint_range),
            ctrl_range=_pairs(ctrl_range),
            torque_limits=torque_limits,
            kp=kp,
            kd=kd,
            gravity_compensation=bool(model.jnt_actgravcomp[env.scene.joint_ids(joint_names)].any()),
        ),
        default_joint_pos=default_joint_pos,
        actions=tuple(_action_term(name, term, default_qpos) for name, term in terms),
        obs_terms=tuple(env.observation_manager.layout[obs_group]),
        obs_group=obs_group,
        commands={name: _command_spec(c) for name, c in env.command_manager.terms.items() if name not in driven},
        sensors=_sensor_specs(model, env.observation_manager.layout[obs_group]),
        held_joints=_held_joints(env, default_qpos),
        stop=StopSpec(env.cfg.deploy.stop_behavior, dict(env.cfg.deploy.stop_pose), float(env.cfg.deploy.stop_time_s)),
        batonlab_version=batonlab.__version__,
        training_config=training_config or {},
    )


def _servo_limits(env: BatonEnv, joints) -> tuple:
    """Position limits, actuator force limits and PD gains of `joints`' actuators, as manifest tuples."""
    model = env.scene.model
    joint_ids = env.scene.joint_ids(joints)
    actuator_ids = env.scene.actuator_for_joints(joints)
    kp, kd = env.scene.actuator_gains(actuator_ids)
    force = env.scene.actuator_force_limits(actuator_ids)
    joint_range = np.where(model.jnt_limited[joint_ids, None].astype(bool), model.jnt_range[joint_ids], [-np.inf, np.inf])
    return (_pairs(joint_range), tuple(float(v) for v in force), tuple(float(v) for v in kp),
            tuple(float(v) for v in kd))


def _held_joints(env: BatonEnv, default_qpos: np.ndarray) -> HeldJoints:
    """The task's held joints (`TaskCfg.deploy.held_joints`), held at their default pose as in training."""
    names = tuple(env.cfg.deploy.held_joints)
    if not names:
        return HeldJoints()
    pos_limits, torque_limits, kp, kd = _servo_limits(env, names)
    targets = tuple(float(v) for v in default_qpos[env.scene.qpos_adr(names).numpy()])
    return HeldJoints(names, targets, pos_limits, torque_limits, kp, kd)


def _command_spec(term) -> CommandSpec:
    default = term.default_value()
    return CommandSpec(type(term).__name__, int(term.dim), tuple(term.fields),
                       tuple(float(v) for v in default) if default is not None else None)


_SENSOR_PARAMS = ("name", "sensor")
"""Observation-term parameters that name a MuJoCo sensor (`observations.sensor`, `observations.projected_gravity`)."""


def _sensor_specs(model: mujoco.MjModel, layout) -> dict[str, SensorSpec]:
    """Every sensor an observation term reads: its type, its frame, where a robot gets it and which
    MuJoCo sensors give it in simulation.

    A gyro, an accelerometer or a world-referenced orientation (`framequat` without a reference
    frame) of a site is an IMU field; anything else is a vector the robot publishes itself. A
    `observations.sensor_pose` term is a pose sensor named by its `name` param (`_pose_spec`).
    """
    specs = {}
    pose_func = qualified_name(sensor_pose)
    for term in layout:
        if term.func == pose_func:
            specs[term.params["name"]] = _pose_spec(model, term.params["position"], term.params["orientation"])
            continue
        for key in _SENSOR_PARAMS:
            name = term.params.get(key)
            if not isinstance(name, str) or mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, name) < 0:
                continue
            sensor = model.sensor(name)
            kind = mujoco.mjtSensor(int(sensor.type[0]))
            objtype = int(sensor.objtype[0])
            source = TOPIC
            if kind == mujoco.mjtSensor.mjSENS_GYRO:
                source = IMU_ANGULAR_VELOCITY
            elif kind == mujoco.mjtSensor.mjSENS_ACCELEROMETER:
                source = IMU_LINEAR_ACCELERATION
            elif kind == mujoco.mjtSensor.mjSENS_FRAMEQUAT and int(sensor.reftype[0]) in (-1, 0) and int(sensor.refid[0]) < 0:
                source = IMU_ORIENTATION
            frame = body = ""
            pos, quat = (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)
            if source == TOPIC and int(sensor.refid[0]) >= 0:
                # A frame sensor with a reference (e.g. the tool point in the arm base): the vector is in that frame.
                frame = mujoco.mj_id2name(model, int(sensor.reftype[0]), int(sensor.refid[0])) or ""
            elif objtype == int(mujoco.mjtObj.mjOBJ_SITE):
                site = model.site(int(sensor.objid[0]))
                frame, body = site.name, model.body(int(site.bodyid[0])).name
                pos, quat = tuple(map(float, site.pos)), tuple(map(float, site.quat))
            specs[name] = SensorSpec(kind.name.removeprefix("mjSENS_").lower(), int(sensor.dim[0]), source, frame, body,
                                     pos, quat, (name,))
    return specs


def _pose_spec(model: mujoco.MjModel, position: str, orientation: str) -> SensorSpec:
    """The pose sensor of a `framepos` (`position`) and a `framequat` (`orientation`) of one object in one
    reference frame: the pose's `frame` is that reference (with its body and placement when it is a
    site), "world" without one.

    Raises:
        ValueError: a sensor the scene lacks, of another type, or the two disagree on object or frame.
    """
    missing = [n for n in (position, orientation) if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, n) < 0]
    if missing:
        raise ValueError(f"sensor_pose reads the MuJoCo sensors {missing}, which the scene does not have")
    pos_sensor, quat_sensor = model.sensor(position), model.sensor(orientation)
    kinds = [mujoco.mjtSensor(int(s.type[0])) for s in (pos_sensor, quat_sensor)]
    if kinds != [mujoco.mjtSensor.mjSENS_FRAMEPOS, mujoco.mjtSensor.mjSENS_FRAMEQUAT]:
        raise ValueError(f"sensor_pose needs a framepos and a framequat; '{position}' and '{orientation}' are "
                         f"{kinds[0].name} and {kinds[1].name}")
    fields = ("objtype", "objid", "reftype", "refid")
    if any(int(getattr(pos_sensor, f)[0]) != int(getattr(quat_sensor, f)[0]) for f in fields):
        raise ValueError(f"sensor_pose: '{position}' and '{orientation}' must sense one object in one reference frame")
    reftype, refid = int(pos_sensor.reftype[0]), int(pos_sensor.refid[0])
    frame, body, pos, quat = "world", "", (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)
    if refid >= 0:
        frame = mujoco.mj_id2name(model, reftype, refid) or ""
        if reftype == int(mujoco.mjtObj.mjOBJ_SITE):
            site = model.site(refid)
            body, pos, quat = model.body(int(site.bodyid[0])).name, tuple(map(float, site.pos)), tuple(map(float, site.quat))
    return SensorSpec(POSE, POSE_DIM, TOPIC, frame, body, pos, quat, (position, orientation))


def _action_term(name: str, term, default_qpos: np.ndarray) -> ActionTerm:
    ik = term.action_type == "ik_residual"
    if term.action_type == "tool_step":
        return _tool_step_term(name, term)
    if term.action_type == COMMAND_LAYER_TYPE:
        return _command_layer_term(name, term)
    offset = term.offset.cpu().double().numpy()
    if ik:
        use_default_offset = False  # the offset is the IK target, computed on the robot from the chain
    elif not offset.any():
        use_default_offset = False
    elif np.array_equal(offset, default_qpos[term.qpos_adr.cpu().numpy()]):
        use_default_offset = True
    else:
        raise ValueError(f"action term '{name}' adds the offset {offset.tolist()}, which is neither its joints' default "
                         "position nor zero; the manifest cannot express it")
    return ActionTerm(
        name=name,
        type=term.action_type,
        joints=tuple(term.joint_names),
        scale=tuple(float(s) for s in term.scale.cpu().tolist()),
        clip=tuple(map(float, term.cfg.clip)) if term.cfg.clip is not None else None,
        use_default_offset=use_default_offset,
        max_target_rate=None if term.cfg.max_target_rate is None else float(term.cfg.max_target_rate),
        ik=IKSpec(term.command, term.damping, term.chain, term.orientation_weight) if ik else None,
    )


def _tool_step_term(name: str, term) -> ActionTerm:
    """A `ToolStepAction` as the manifest carries it: its scales per raw action and its IK (`ToolStepSpec`)."""
    limits = np.stack([term.joint_low.cpu().double().numpy(), term.joint_high.cpu().double().numpy()], axis=1)
    return ActionTerm(
        name=name,
        type=term.action_type,
        joints=tuple(term.joint_names),
        scale=(term.position_scale,) * 3 + (term.rotation_scale,) * 3,
        clip=(-1.0, 1.0),
        use_default_offset=False,
        max_target_rate=None if term.cfg.max_target_rate is None else float(term.cfg.max_target_rate),
        tool_step=ToolStepSpec(term.chain.chain, term.max_lead, term.iterations, term.damping, term.rotation_weight,
                               _pairs(limits)),
    )


def _command_layer_term(name: str, term) -> ActionTerm:
    """A `WholeBodyCommandAction` as the manifest carries it: no joints, its commands' scales, stowed tool pose and
    anchors, and the folder the lower level's export is copied to (`batonlab.deploy.levels`)."""
    spec = CommandLayerSpec(LOWER_FOLDER, term.base_command, term.ee_command, term.speed_scale, term.yaw_rate_scale,
                            term.position_scale, term.orientation_scale,
                            tuple(float(v) for v in term.stowed_pose().cpu().tolist()), term.anchor,
                            term.orientation_anchor)
    return ActionTerm(name=name, type=COMMAND_LAYER_TYPE, joints=(), scale=(1.0,) * spec.width, clip=(-1.0, 1.0),
                      use_default_offset=False, command_layer=spec)


def _pairs(values: np.ndarray) -> tuple[tuple[float, float], ...]:
    return tuple((float(lo), float(hi)) for lo, hi in values)
