# SPDX-License-Identifier: BSD-3-Clause
"""The simulated robot behind `sim_robot_node`: one world of a task, one physics step at a time.

Design and contract notes: docs/modules/batonlab.sim2sim.robot.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np
import torch

from batonlab.actions.command_layer import whole_body_policy_terms, with_lower_level
from batonlab.commands.base_velocity import BaseVelocityCommand
from batonlab.observations.sensors import projected_gravity, sensor, sensor_pose
from batonlab.utils.quaternions import quat_mul, quat_rotate
from batonlab.deploy.manifest_sections import COMMAND_LAYER_TYPE
from batonlab.deploy.pose import POSE_FIELDS
from batonlab.deploy.wiring import POSITION, command_interface, group_by_interface
from batonlab.env.commands import episode_mean_errors
from batonlab.env.env import BatonEnv
from batonlab.events.physics import randomize_joint_parameters
from batonlab.robots.description import RobotDescriptionError
from batonlab.robots.fitted import FitOverlayError, read_fit
from batonlab.sim.joints import one_dof_joint_ids
from batonlab.tasks import TaskRobotError, make_task_cfg



GRAVITY = 9.81
"""Specific force of a resting IMU without an accelerometer sensor (the root-body IMU) [m/s²]."""


_STAND_STIFFNESS, _STAND_DAMPING = 2e4, 9e2
"""The warm-up stand's spring on the root body [N/m, N·s/m]: 2.5 mm of sag for 5 kg beyond the weight it
carries. The wrench is explicit (computed once per physics step), so the gains stay well inside what a
10 kg torso with 0.06–0.1 kg·m² of inertia integrates stably at 5 ms: ω·dt ≈ 0.2, damping·dt/m ≈ 0.4."""
_STAND_ROT_STIFFNESS, _STAND_ROT_DAMPING = 5e2, 8.0
"""Its rotational spring [N·m/rad, N·m·s/rad]: ω·dt ≈ 0.4, damping ratio ≈ 0.7."""


class ConfigError(ValueError):
    """The sim robot cannot be built as configured (unknown task, unknown joints)."""


def seed_episode(env: BatonEnv, seed: int) -> None:
    """Make the next `env.reset()` the episode of `seed`: re-seed the generator, redraw startup
    randomisation and the interval-event timers (the push schedule).

    `SimRobot` and the `play` comparison both call this before their reset, so that episode `seed`
    has the same dynamics parameters, initial pose, targets and pushes on both sides, whatever ran
    before it.
    """
    env.generator.manual_seed(int(seed))
    env.event_manager.apply("startup", env.all_env_ids)
    env.event_manager.rearm_intervals(env.all_env_ids)


@dataclass
class EpisodeResult:
    """How one episode ended, as the env's `end_control_period` reported it."""

    index: int
    seed: int
    success: bool
    length: int
    """Control steps the episode lasted (the task's time limit unless it failed)."""
    terminated: bool
    """Ended by a failure term (a fall, physics divergence) rather than by the time limit."""
    final_distance: float | None
    """Distance between the last command and its sensor, for position commands [m]."""
    mean_speed_error: float | None = None
    """Mean |v - v_cmd| over the episode, for tasks with a `BaseVelocityCommand` [m/s]: its
    `metrics["lin_vel_error"] / metrics["time"]` at the end of the episode (what curricula judge)."""
    mean_errors: dict[str, float] = field(default_factory=dict)
    """Every mean tracking error of the episode (`episode_mean_errors`: `ee_target/ee_error` [m], …),
    read as `batonlab play` reads them."""


@dataclass
class ImuReading:
    """One IMU sample, in the conventions of sensor_msgs/Imu (REP-145)."""

    frame_id: str
    """The IMU's frame: the sensors' site, or the root body for the root-body IMU."""
    orientation: np.ndarray
    """(4,) wxyz, the IMU frame's orientation in the world (z up: ENU, REP-103)."""
    angular_velocity: np.ndarray
    """(3,) in the IMU frame [rad/s]."""
    linear_acceleration: np.ndarray
    """(3,) specific force in the IMU frame (+9.81 on z at rest, upright) [m/s²]."""


@dataclass
class BaseMotion:
    """Pose and twist of the robot's root body, in the conventions of nav_msgs/Odometry (REP-105)."""

    position: np.ndarray
    """(3,) in the world (the odom frame) [m]."""
    orientation: np.ndarray
    """(4,) wxyz, the root body's orientation in the world."""
    linear_velocity: np.ndarray
    """(3,) in the root body's frame (the odom message's child frame) [m/s]."""
    angular_velocity: np.ndarray
    """(3,) in the root body's frame [rad/s]."""


class SimRobot:
    """One simulated robot of `task` (play configuration).

    Until `next_episode` is first called the robot is in its warm-up (the initial state of `seed`,
    episodes that end there are reset by the task's rules and not counted); episode i then starts
    from the initial state of seed `seed + i`.

    Args:
        task: Registered task name.
        seed: Seed of the first episode.
        robot: Robot description YAML of a task over any robot (`reach`, `velocity`); None: the task's own.
        lower_export: A hierarchy's task (commands to a whole-body policy): the whole-body policy's export folder,
            whose action terms and observation the robot then has (its joints commanded, its sensors published).

    `fit` (a `batonlab sysid` fit.yaml) makes it that one identified robot: the fit is written over the model and
    the task's randomisation of joint parameters is left out.

    Raises:
        ConfigError: `task` is not a registered task, `robot` does not fit it, its held joints are
            not actuated as expected, or `fit` is not a fit of its joints.
    """

    def __init__(self, task: str, seed: int = 0, robot: str | None = None, lower_export: str | None = None,
                 fit: str | None = None):
        try:  # a registered name, an entry-point plugin or a `<module>:<factory>` import path
            cfg = make_task_cfg(task, play=True, robot=robot)
        except KeyError as err:
            raise ConfigError(err.args[0]) from None
        except (TaskRobotError, RobotDescriptionError, FileNotFoundError) as err:
            raise ConfigError(str(err)) from None
        _name_lower_level(cfg, task, lower_export)
        if fit:
            _on_fitted_robot(cfg, fit)
        cfg.num_envs = 1
        cfg.seed = int(seed)
        cfg.sim.num_threads = 1
        torch.set_num_threads(1)
        try:
            self.env = env = BatonEnv(cfg)
        except FitOverlayError as err:
            raise ConfigError(str(err)) from None
        self.task = task
        self.base_seed = int(seed)
        model = env.scene.model
        self.physics_dt = float(cfg.sim.physics_dt)
        self.decimation = int(cfg.sim.decimation)
        self.control_dt = env.step_dt
        # Every 1-DoF joint of the scene is part of the robot's joint states (fingers included).
        joints = one_dof_joint_ids(model)
        self.joint_names = [model.joint(j).name for j in joints]
        self._qadr = np.array([model.jnt_qposadr[j] for j in joints])
        self._dadr = np.array([model.jnt_dofadr[j] for j in joints])
        # Commanded joints: those of the task's action terms (through their actuators and ctrl ranges, as
        # the terms apply them), then the held joints (their servos keep the default pose unless commanded).
        terms = _joint_terms(env, task)
        action_joints = [j for t in terms for j in t.joint_names]
        self.held_joints = list(cfg.deploy.held_joints)
        held_actuators, self._held_default = _held_servos(env, self.held_joints, action_joints)
        self.command_joints = action_joints + self.held_joints
        self._actuators = torch.cat([*(t.actuator_ids for t in terms), held_actuators])
        held_low, held_high = env.scene.actuator_ctrl_range(held_actuators)
        self._ctrl_low = torch.cat([*(t.ctrl_low for t in terms), held_low])
        self._ctrl_high = torch.cat([*(t.ctrl_high for t in terms), held_high])
        self.targets = torch.cat([*(t.offset for t in terms), self._held_default]).clone()
        """Actuator targets applied at every physics step (default pose, wheels at rest, until commands arrive)."""
        kinds = [command_interface(t.action_type) for t in terms for _ in t.joint_names] + [POSITION] * len(held_actuators)
        self.interfaces = group_by_interface(self.command_joints, kinds)
        """ros2_control interface → its joints, action joints (task order) first, then held joints."""
        # Sensors the policy reads, and the task's commands: published by the node.
        policy_terms = _read_terms(cfg)
        self.sensor_names = list(dict.fromkeys(t.params["name"] for t in policy_terms if t.func is sensor))
        self.pose_sensors = {t.params["name"]: (t.params["position"], t.params["orientation"])
                             for t in policy_terms if t.func is sensor_pose}
        """Pose sensor name → its (framepos, framequat) MuJoCo sensors, as training's `observations.sensor_pose` reads them."""
        self.pose_frames = {name: _reference_frame(model, position) for name, (position, _) in self.pose_sensors.items()}
        """Pose sensor name → the frame its pose is in (the sensors' reference; "world" without one)."""
        self.command_names = list(env.command_manager.terms)
        self.pose_commands = {n for n, t in env.command_manager.terms.items() if t.fields == POSE_FIELDS}
        """Commands that are poses (position then quaternion w x y z): published as geometry_msgs/PoseStamped."""
        self._distance_pair = next(((p["command"], p["sensor"]) for p in (t.params for t in cfg.rewards.values())
                                    if "command" in p and "sensor" in p), None)
        """(command, sensor) of a position command, whose distance is reported with each episode."""
        self._speed_command = velocity_command(env)
        """The velocity command whose tracking error is reported with each episode."""
        # Root body (odometry, and the IMU of scenes without IMU sensors).
        self.root_body, self._root_free_adr, self._root_pose = _root_body(model, self.command_joints[0])
        self._imu = _imu_sensors(model, policy_terms)
        """(site, framequat, gyro, accelerometer or None) of the IMU the policy reads, or None."""
        self.imu_noise_std = _imu_noise(policy_terms, self._imu)
        """(orientation [rad], gyro [rad/s]): the policy observation's noise on the IMU (see `imu`)."""
        self.episode_index = -1
        self.episode_seed = self.base_seed
        self.physics_steps = 0
        self._diverged_in_period = False
        self._stand_pose: torch.Tensor | None = None
        """Warm-up: the pose a floating base is held at (see `_hold_on_stand`)."""
        self._root_body_id = int(model.body(self.root_body).id)
        self._weight_n = float(model.body_subtreemass[self._root_body_id]) * float(-model.opt.gravity[2])
        """The robot's nominal weight, which the stand carries [N]."""

    # Episodes.

    def next_episode(self) -> None:
        """Start the next episode from the initial state of its seed, as `play` starts one.

        Held joints go back to their default pose, as the task's hold event puts them in training
        (a robot side that commands them sends its own targets again).
        """
        self.episode_index += 1
        self.episode_seed = self.base_seed + self.episode_index
        seed_episode(self.env, self.episode_seed)
        self.env.reset()
        if self.held_joints:
            self.targets[len(self.command_joints) - len(self.held_joints):] = self._held_default

    def fix_command_field(self, command: str, field: str, value: float) -> None:
        """Hold one component of a task command at `value` in every later draw (`CommandTerm.fix_field`),
        e.g. the height of a velocity command that arrives as a Twist. Call it before the episodes start;
        `play` fixes the same field to compare on the same commands.

        Raises:
            ConfigError: no such command or field.
        """
        term = self.env.command_manager.terms.get(command)
        if term is None:
            raise ConfigError(f"unknown command '{command}'; the task has {self.command_names}")
        try:
            term.fix_field(field, value)
        except KeyError as err:
            raise ConfigError(str(err.args[0])) from None

    # Commands.

    def set_targets(self, names, values) -> None:
        """Joint targets by name (the task's action joints and held joints): positions [rad or m],
        velocities [rad/s] or efforts [N·m], as each joint's interface takes them."""
        for name, value in zip(names, values):
            self.targets[self.command_joints.index(name)] = float(value)

    # Stepping.

    def step(self) -> EpisodeResult | None:
        """One physics step with the current targets; returns the result of an episode that just ended.

        The episode that ends is followed at once by the next one (`next_episode`).
        """
        env = self.env
        env.sim.ctrl[0, self._actuators] = torch.maximum(torch.minimum(self.targets, self._ctrl_high), self._ctrl_low)
        env.sim.step(1)
        if self.episode_index < 0 and self._root_free_adr is not None:
            self._hold_on_stand()
        self.physics_steps += 1
        self._diverged_in_period |= bool(env.sim.diverged[0])
        if self.physics_steps % self.decimation:
            return None
        # A decimated step reports a divergence anywhere in its substeps; so must this period.
        env.sim.diverged[0] = self._diverged_in_period
        self._diverged_in_period = False
        if self.episode_index < 0:
            # Before episode 0 (the policy's soft start) the task's clock does not run: no time-outs,
            # no resets that would move the robot under a policy that is still starting.
            return None
        # The last state of the period, before the command timers move on (as the success test sees it).
        distance = self._command_distance()
        _, _, terminated, truncated, extras = env.end_control_period()
        if not bool(terminated[0] | truncated[0]):
            return None
        result = EpisodeResult(self.episode_index, self.episode_seed, bool(extras["success"][0]),
                               int(extras["episode_length"][0]), bool(terminated[0]), distance,
                               mean_speed_error(extras, self._speed_command),
                               {k: float(v[0]) for k, v in episode_mean_errors(extras["command_metrics"]).items()})
        self.next_episode()
        return result

    def _hold_on_stand(self) -> None:
        """Before episode 0 a floating base hangs from a stand at its warm-up pose, its joints free.

        A real wheel-legged robot is started hanging from a gantry: its policy's soft start blends in
        from standing still, which a self-balancing robot on the ground would not survive (it would
        tip over and hit the ground with its arm while the policy is still starting). The stand is a
        stiff, damped spring on the root body carrying the robot's weight (`xfrc_applied`), so the
        IMU feels it as a real robot on a gantry does. Episode 0 starts from the initial state of its
        seed, as in `play` (the env's reset clears the applied wrench).
        """
        sim = self.env.sim
        q, d = self._root_free_adr
        qpos, qvel = sim.qpos[0].double(), sim.qvel[0].double()
        if self._stand_pose is None:
            self._stand_pose = qpos[q:q + 7].clone()
        position, orientation = qpos[q:q + 3], qpos[q + 3:q + 7]
        force = _STAND_STIFFNESS * (self._stand_pose[:3] - position) - _STAND_DAMPING * qvel[d:d + 3]
        force[2] += self._weight_n
        # Orientation error as a rotation vector in the world: stand ⊗ conj(current).
        conjugate = orientation * torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=torch.float64)
        error = quat_mul(self._stand_pose[None, 3:], conjugate[None])[0]
        rotation = 2.0 * error[1:] * (1.0 if error[0] >= 0 else -1.0)  # small angles: the shorter way round
        angular_w = quat_rotate(orientation[None], qvel[None, d + 3:d + 6])[0]
        torque = _STAND_ROT_STIFFNESS * rotation - _STAND_ROT_DAMPING * angular_w
        sim.xfrc_applied[0, self._root_body_id] = torch.cat([force, torque]).float()

    # State.

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Positions and velocities of `joint_names`."""
        return self.env.sim.qpos[0, self._qadr].double().numpy(), self.env.sim.qvel[0, self._dadr].double().numpy()

    def sensor(self, name: str) -> np.ndarray:
        """The (dim,) float64 reading of the named MuJoCo sensor."""
        return self.env.sim.sensor(name)[0].double().numpy()

    def pose(self, name: str) -> np.ndarray:
        """A pose sensor: (7,) position [m] then quaternion (w, x, y, z), exactly as `observations.sensor_pose` reads it."""
        position, orientation = self.pose_sensors[name]
        return np.concatenate([self.sensor(position), self.sensor(orientation)])

    def world_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What every reading of this instant comes from: (nq,) qpos and (nv,) qvel of the whole world (free
        bodies included, e.g. the object) and (nsensordata,) MuJoCo's sensor readings as the env holds them.

        The sensor readings are the backend's, which (as in training) MuJoCo computes at the start of
        the physics step that led here, or for the reset state right after a reset.
        """
        sim = self.env.sim
        return (sim.qpos[0].double().numpy().copy(), sim.qvel[0].double().numpy().copy(),
                sim.sensordata[0].double().numpy().copy())

    def command(self, name: str) -> np.ndarray:
        """The (dim,) float64 value of the task command `name`."""
        return self.env.command_manager.command(name)[0].double().numpy()

    def base_motion(self) -> BaseMotion:
        """The root body's pose in the world and its twist in its own frame (zero for a fixed base)."""
        if self._root_free_adr is None:
            position, orientation = self._root_pose
            return BaseMotion(position.copy(), orientation.copy(), np.zeros(3), np.zeros(3))
        q, d = self._root_free_adr
        qpos, qvel = self.env.sim.qpos[0].double().numpy(), self.env.sim.qvel[0].double().numpy()
        orientation = qpos[q + 3:q + 7]
        # A free joint's qvel: linear velocity in the world, angular velocity in the body frame.
        return BaseMotion(qpos[q:q + 3], orientation, _rotate_inverse(orientation, qvel[d:d + 3]), qvel[d + 3:d + 6])

    def imu(self, noise: np.random.Generator | None = None) -> ImuReading:
        """The IMU: the scene's IMU sensors when the policy reads them, else the root body's motion
        (orientation, body angular velocity, gravity's reaction as specific force).

        With `noise`, adds what the policy's observation terms add in training (`imu_noise_std`):
        Gaussian noise of the gyro term's `noise_std` on each gyro axis, and a random rotation of
        the orientation, rotation vector ~ N(0, σ² I) [rad] in the IMU frame, with σ the
        `projected_gravity` term's `noise_std`. The rotation moves the projected gravity by σ per
        axis across gravity, as training's additive noise does; it cannot change the vector's length
        (training's third, along-gravity component) and it also turns the heading, which no policy
        input reads. Drawn per message (at the physics rate); a policy that samples the latest message
        each control period sees independent draws, as in training.
        """
        if self._imu is None:
            base = self.base_motion()
            acc = _rotate_inverse(base.orientation, np.array([0.0, 0.0, GRAVITY]))
            reading = ImuReading(self.root_body, base.orientation, base.angular_velocity, acc)
        else:
            site, quat, gyro, acc = self._imu
            orientation = self.sensor(quat)
            specific_force = self.sensor(acc) if acc else _rotate_inverse(orientation, np.array([0.0, 0.0, GRAVITY]))
            reading = ImuReading(site, orientation, self.sensor(gyro), specific_force)
        if noise is not None:
            rot_std, gyro_std = self.imu_noise_std
            reading.angular_velocity = reading.angular_velocity + gyro_std * noise.standard_normal(3)
            delta = np.zeros(4)
            rotvec = rot_std * noise.standard_normal(3)
            mujoco.mju_axisAngle2Quat(delta, rotvec / max(np.linalg.norm(rotvec), 1e-12), np.linalg.norm(rotvec))
            perturbed = np.zeros(4)
            mujoco.mju_mulQuat(perturbed, reading.orientation, delta)
            reading.orientation = perturbed
        return reading

    def _command_distance(self) -> float | None:
        if self._distance_pair is None:
            return None
        command, sensor = self._distance_pair
        return float(np.linalg.norm(self.command(command)[:3] - self.sensor(sensor)))  # a point's, or a pose's position

    def close(self) -> None:
        """Close the env."""
        self.env.close()


def velocity_command(env: BatonEnv) -> str | None:
    """The task's velocity command (a `BaseVelocityCommand`), whose tracking error episodes report."""
    return next((name for name, term in env.command_manager.terms.items()
                 if isinstance(term, BaseVelocityCommand)), None)


def mean_speed_error(extras: dict, command: str | None, env_id: int = 0) -> float | None:
    """Mean |v - v_cmd| over the episode that just ended [m/s], from `extras["command_metrics"]` of
    `end_control_period` (None without a velocity command). `play` comparisons read it the same way."""
    if command is None:
        return None
    metrics = extras["command_metrics"][command]
    return float(metrics["lin_vel_error"][env_id] / metrics["time"][env_id].clamp(min=1e-6))


# Private helpers.


def _on_fitted_robot(cfg, fit: str) -> None:
    """The task's world as the robot `fit` describes: the fit over its model, its joint parameters not redrawn."""
    try:
        read_fit(fit)
    except FitOverlayError as err:
        raise ConfigError(str(err)) from None
    cfg.scene.fit = fit
    for name in [n for n, term in cfg.events.items() if term.func is randomize_joint_parameters]:
        del cfg.events[name]


def _name_lower_level(cfg, task: str, lower_export: str | None) -> None:
    """Point a hierarchy's frozen whole-body policy term at `lower_export` (the task needs one; others take none)."""
    layers = whole_body_policy_terms(cfg)
    if lower_export and not layers:
        raise ConfigError(f"lower_export {lower_export}: task '{task}' has no lower level (its actions drive joints)")
    if layers and not lower_export:
        raise ConfigError(f"task '{task}' issues commands to a whole-body policy: name its export with lower_export "
                          "(a two-level export's lower/ folder)")
    if layers:
        with_lower_level(cfg, lower_export)


def _joint_terms(env: BatonEnv, task: str) -> list:
    """The action terms that drive joints: a command layer's whole-body policy's terms in its place."""
    terms = []
    for name, term in env.action_manager.terms.items():
        if term.action_type != COMMAND_LAYER_TYPE:
            terms.append(term)
        elif getattr(term, "lower", None) is None:
            raise ConfigError(f"task '{task}' runs its commands (action term '{name}') through a simulated stand-in for "
                              "the whole-body policy, which no robot has: run the task without `_scripted`")
        else:
            terms.extend(term.lower.terms.values())
    return terms


def _read_terms(cfg) -> list:
    """The observation terms a deployed policy reads: the `policy` group's, and a whole-body policy's under commands."""
    lower = [t.params["observations"] for t in whole_body_policy_terms(cfg).values()]
    return [*cfg.observations["policy"].terms.values(), *(term for group in lower for term in group.terms.values())]


def _held_servos(env: BatonEnv, held: list[str], action_joints: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Actuators of the held joints and their default positions (the targets the task's hold event sets)."""
    both = sorted(set(action_joints) & set(held))
    if both:
        raise ConfigError(f"deploy.held_joints {both} are driven by the policy's actions too")
    if not held:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0)
    try:
        actuators = env.scene.actuator_for_joints(held)
    except (KeyError, ValueError) as err:
        raise ConfigError(f"deploy.held_joints: {err.args[0]}") from None
    return actuators, env.default_qpos[env.scene.qpos_adr(held)].clone()


def _root_body(model: mujoco.MjModel, joint: str):
    """The robot's root body (the child of the world above `joint`): (name, (qpos, dof) address of its
    free joint, None) if it floats, else (name, None, (position, orientation wxyz)) of its fixed pose."""
    body = int(model.jnt_bodyid[model.joint(joint).id])
    while int(model.body_parentid[body]) != 0:
        body = int(model.body_parentid[body])
    name = model.body(body).name
    if model.body_jntnum[body] and int(model.jnt_type[model.body_jntadr[body]]) == int(mujoco.mjtJoint.mjJNT_FREE):
        free = int(model.body_jntadr[body])
        return name, (int(model.jnt_qposadr[free]), int(model.jnt_dofadr[free])), None
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    return name, None, (data.xpos[body].copy(), data.xquat[body].copy())


def _reference_frame(model: mujoco.MjModel, sensor: str) -> str:
    """The name of the frame a MuJoCo frame sensor is referenced to ("world" without a reference)."""
    refid = int(model.sensor(sensor).refid[0])
    if refid < 0:
        return "world"
    return mujoco.mj_id2name(model, int(model.sensor(sensor).reftype[0]), refid) or "world"


def _imu_sensors(model: mujoco.MjModel, policy_terms) -> tuple[str, str, str, str | None] | None:
    """(site, framequat, gyro, accelerometer or None) on the site of an IMU sensor the policy reads.

    An IMU here is a `framequat` in the world frame and a `gyro` on one site (an `accelerometer` on it
    is used when present); the policy reads it when a term's params name one of them.
    """
    read = {v for t in policy_terms for v in t.params.values() if isinstance(v, str)}
    by_site: dict[int, dict[str, str]] = {}
    kinds = {int(mujoco.mjtSensor.mjSENS_FRAMEQUAT): "quat", int(mujoco.mjtSensor.mjSENS_GYRO): "gyro",
             int(mujoco.mjtSensor.mjSENS_ACCELEROMETER): "acc"}
    for s in range(model.nsensor):
        kind = kinds.get(int(model.sensor_type[s]))
        if kind is None or int(model.sensor_objtype[s]) != int(mujoco.mjtObj.mjOBJ_SITE):
            continue
        if kind == "quat" and int(model.sensor_refid[s]) >= 0:
            continue  # relative to another frame: not the IMU's orientation in the world
        by_site.setdefault(int(model.sensor_objid[s]), {}).setdefault(kind, model.sensor(s).name)
    for site, sensors in by_site.items():
        if {"quat", "gyro"} <= set(sensors) and read & set(sensors.values()):
            return model.site(site).name, sensors["quat"], sensors["gyro"], sensors.get("acc")
    return None


def _imu_noise(policy_terms, imu) -> tuple[float, float]:
    """(orientation, gyro) noise std of the policy terms reading the IMU: a `projected_gravity` term on
    its framequat [unit vector ≈ rad], an `observations.sensor` term on its gyro [rad/s]; 0 where none does."""
    if imu is None:
        return 0.0, 0.0
    _, quat, gyro, _ = imu
    rot = max((t.noise_std for t in policy_terms if t.func is projected_gravity and t.params.get("sensor") == quat),
              default=0.0)
    rate = max((t.noise_std for t in policy_terms if t.func is sensor and t.params.get("name") == gyro), default=0.0)
    return float(rot), float(rate)


def _rotate_inverse(quat: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """`vector` (world) in the frame of orientation `quat` (wxyz)."""
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, np.asarray(quat, dtype=np.float64))
    return rot.reshape(3, 3).T @ vector

