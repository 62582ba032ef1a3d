# SPDX-License-Identifier: BSD-3-Clause
"""The policy input, rebuilt on the robot exactly as training built it.

Each training observation function named in the manifest (`func`, "module:qualname") maps to a
numpy twin here, by name; a manifest naming a function without a twin is refused. Processing is
training's, minus the noise: value → clip → scale → history (oldest frame first; after a reset the
history is filled with the current frame).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np

from batonlab.deploy.manifest import Manifest, ManifestError, ObsTermLayout
from batonlab.deploy.manifest_robot import POSE
from batonlab.deploy.pose import POSE_DIM, canonical_pose


@dataclass
class RobotInputs:
    """The latest inputs, as the observation terms read them.

    Attributes:
        joint_pos: (num_joints,) positions of `JointStates.needed`, in that order [rad or m].
        joint_vel: (num_joints,) velocities [rad/s or m/s].
        vectors: sensor readings and commands by name (e.g. "ee_pos_b", "ee_target").
        last_action: (action_dim,) raw policy output of the previous step.
    """

    joint_pos: np.ndarray
    joint_vel: np.ndarray
    vectors: dict[str, np.ndarray]
    last_action: np.ndarray


@dataclass
class ObsContext:
    """What terms need to know when they are built; collects the joints and inputs they read."""

    manifest: Manifest
    joints: list[str] = field(default_factory=list)
    """Joints read by any term or commanded, in first-use order: action joints, held joints, then the rest."""
    sensors: dict[str, int] = field(default_factory=dict)
    """Sensor inputs by name → width."""
    poses: set[str] = field(default_factory=set)
    """Sensor inputs that are poses (`batonlab.deploy.pose`): they arrive as geometry_msgs/PoseStamped,
    and a quaternion off unit length is bad input."""
    commands: dict[str, int] = field(default_factory=dict)
    """Command inputs by name → width."""
    uses_joint_vel: bool = False

    def __post_init__(self):
        self.joint_index((*self.manifest.joint_names, *self.manifest.held_joints.names))

    def joint_index(self, names) -> np.ndarray:
        """Add the joints not yet read to `joints` and return (len(names),) indices of `names` in it."""
        for name in names:
            if name not in self.joints:
                self.joints.append(name)
        return np.array([self.joints.index(n) for n in names], dtype=np.intp)

    def sensor(self, name: str, dim: int, pose: bool = False) -> None:
        """Declare a sensor input; two terms reading one sensor must agree on its width and on whether it is a pose."""
        known = name in self.sensors
        if self.sensors.setdefault(name, dim) != dim:
            raise ManifestError(f"sensor '{name}' is read with {self.sensors[name]} and with {dim} values")
        if known and (name in self.poses) != pose:
            raise ManifestError(f"sensor '{name}' is read both as a pose and as a vector")
        if pose:
            self.poses.add(name)
        spec = self.manifest.sensors.get(name)
        if spec is not None and spec.dim != dim:
            raise ManifestError(f"sensor '{name}' has {spec.dim} values in the manifest's sensors, a term reads {dim}")
        if spec is not None and (spec.type == POSE) != pose:
            raise ManifestError(f"sensor '{name}' is a '{spec.type}' in the manifest's sensors, a term reads it as "
                                f"{'a pose' if pose else 'a vector'}")

    def default_pos(self, names) -> np.ndarray:
        """The (len(names),) manifest default positions of `names` [rad or m]; `ManifestError` if one is missing."""
        missing = [n for n in names if n not in self.manifest.default_joint_pos]
        if missing:
            raise ManifestError(f"the manifest has no default position for joints {missing}")
        return np.array([self.manifest.default_joint_pos[n] for n in names])


# Terms: numpy twins of the training functions in batonlab.observations.


class JointPosRel:
    """`observations.joint_pos_rel`: joint positions minus the default pose [rad or m]."""

    def __init__(self, ctx: ObsContext, joints):
        self.idx = ctx.joint_index(joints)
        self.default = ctx.default_pos(joints)
        self.size = len(joints)

    def __call__(self, inputs: RobotInputs) -> np.ndarray:
        return inputs.joint_pos[self.idx] - self.default


class JointVel:
    """`observations.joint_vel`: joint velocities [rad/s or m/s]."""

    def __init__(self, ctx: ObsContext, joints):
        self.idx = ctx.joint_index(joints)
        ctx.uses_joint_vel = True
        self.size = len(joints)

    def __call__(self, inputs: RobotInputs) -> np.ndarray:
        return inputs.joint_vel[self.idx]


class LastAction:
    """`observations.last_action`: the raw policy output of the previous step."""

    def __init__(self, ctx: ObsContext):
        self.size = ctx.manifest.action_dim

    def __call__(self, inputs: RobotInputs) -> np.ndarray:
        return inputs.last_action


class GeneratedCommand:
    """`observations.generated_command`: a command input (target, velocity) received from outside; a pose command's
    quaternion made unit, w >= 0, as training's."""

    def __init__(self, ctx: ObsContext, command: str):
        if command not in ctx.manifest.commands:
            raise ManifestError(f"observation reads command '{command}', which the manifest does not list")
        self.name = command
        self.size = ctx.commands[command] = ctx.manifest.commands[command].dim
        self.pose = ctx.manifest.commands[command].pose

    def __call__(self, inputs: RobotInputs) -> np.ndarray:
        value = inputs.vectors[self.name]
        return canonical_pose(value) if self.pose else value


class Sensor:
    """`observations.sensor`: a named sensor reading received from outside (e.g. the tool point in the base frame)."""

    def __init__(self, ctx: ObsContext, name: str, size: int):
        self.name = name
        self.size = size
        ctx.sensor(name, size)

    def __call__(self, inputs: RobotInputs) -> np.ndarray:
        return inputs.vectors[self.name]


class ProjectedGravity:
    """`observations.projected_gravity`: the unit gravity direction in the IMU frame, from the IMU's
    orientation (w, x, y, z) in a z-up frame; (0, 0, -1) when level. Yaw does not enter.

    The quaternion is normalised first: a robot's IMU filter may report one slightly off unit length,
    which the simulator's never is (a zero or non-finite quaternion yields NaN, which stops the robot).
    """

    def __init__(self, ctx: ObsContext, sensor: str = "imu_quat"):
        self.name = sensor
        self.size = 3
        ctx.sensor(sensor, 4)

    def __call__(self, inputs: RobotInputs) -> np.ndarray:
        q = inputs.vectors[self.name]
        with np.errstate(divide="ignore", invalid="ignore"):
            w, x, y, z = q / np.sqrt(q @ q)
        # R(q)^T · (0, 0, -1): minus the third row of the rotation matrix.
        return -np.array([2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y)])


class SensorPose:
    """`observations.sensor_pose`: a pose received from outside (a perception node's object estimate on
    sensors/<name>): position [m] then quaternion (w, x, y, z), in the frame the manifest names.

    The quaternion is made unit and put in the hemisphere w >= 0 (`pose.canonical_pose`): an estimator
    may report either sign. `position` and `orientation` name the MuJoCo sensors that give the pose
    in simulation; the robot does not read them. A reading that is no pose (non-finite, quaternion
    off unit length) stops the robot before it reaches this term (`DeployRuntime.check_inputs`).
    """

    def __init__(self, ctx: ObsContext, name: str, position: str, orientation: str):
        self.name = name
        self.size = POSE_DIM
        ctx.sensor(name, POSE_DIM, pose=True)

    def __call__(self, inputs: RobotInputs) -> np.ndarray:
        return canonical_pose(inputs.vectors[self.name])


OBS_FUNCS: dict[str, type] = {
    "batonlab.observations.proprioception:joint_pos_rel": JointPosRel,
    "batonlab.observations.proprioception:joint_vel": JointVel,
    "batonlab.observations.proprioception:last_action": LastAction,
    "batonlab.observations.commands:generated_command": GeneratedCommand,
    "batonlab.observations.sensors:sensor": Sensor,
    "batonlab.observations.sensors:sensor_pose": SensorPose,
    "batonlab.observations.sensors:projected_gravity": ProjectedGravity,
}
"""Training function → numpy twin. A term is added here together with a parity test."""


def build_term(ctx: ObsContext, spec: ObsTermLayout):
    """The numpy twin of one manifest term, with its parameters checked."""
    cls = OBS_FUNCS.get(spec.func)
    if cls is None:
        raise ManifestError(
            f"observation term '{spec.name}' uses {spec.func}, which batonlab.deploy cannot compute on the robot; "
            f"supported functions: {sorted(OBS_FUNCS)}"
        )
    params = dict(spec.params)
    if cls is Sensor:
        params["size"] = spec.size
    try:
        inspect.signature(cls.__init__).bind(None, ctx, **params)
    except TypeError as err:
        raise ManifestError(f"observation term '{spec.name}' ({spec.func}): bad params {spec.params}: {err}") from None
    term = cls(ctx, **params)
    if term.size != spec.size:
        raise ManifestError(f"observation term '{spec.name}' has size {spec.size} in the manifest, the robot side computes {term.size}")
    return term


class ObservationBuilder:
    """Assembles the (obs_dim,) float32 policy input from `RobotInputs`."""

    def __init__(self, manifest: Manifest, ctx: ObsContext | None = None):
        self.manifest = manifest
        self.ctx = ctx or ObsContext(manifest)
        self.specs = manifest.obs_terms
        self.terms = [build_term(self.ctx, spec) for spec in self.specs]
        self.history = [np.zeros((s.history_length, s.size)) if s.history_length > 0 else None for s in self.specs]
        self.obs = np.zeros(manifest.obs_dim, dtype=np.float32)
        self._slices = []
        start = 0
        for spec in self.specs:
            self._slices.append(slice(start, start + spec.width))
            start += spec.width
        self._fresh = True

    def reset(self) -> None:
        """Forget the history: the next frame fills it, as after an episode reset in training."""
        self._fresh = True

    def compute(self, inputs: RobotInputs) -> np.ndarray:
        """One policy input; advances the history by one frame. Returns a view that the next call overwrites."""
        for spec, term, history, cols in zip(self.specs, self.terms, self.history, self._slices):
            value = np.asarray(term(inputs), dtype=np.float64)
            if spec.clip is not None:
                value = np.clip(value, spec.clip[0], spec.clip[1])
            value = value * spec.scale
            if history is not None:
                if self._fresh:
                    history[:] = value
                else:
                    history[:-1] = history[1:]
                    history[-1] = value
                value = history.reshape(-1)
            self.obs[cols] = value
        self._fresh = False
        return self.obs
