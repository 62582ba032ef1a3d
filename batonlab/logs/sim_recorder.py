# SPDX-License-Identifier: BSD-3-Clause
"""Recording simulation rollouts as rosbag2 bags, one bag per episode (`batonlab play record=DIR`).

The bags have the layout of a robot log (`batonlab.deploy.recording`), with simulation time as
the clock. At control step k of an episode (time k · step_dt) a bag holds what a robot would log
at that tick: the measured joint state s_k of every 1-DoF joint, the base's IMU (and odometry, for a
floating base), the task commands, the observation the policy saw, its raw action, and the joint
targets u_k applied during the step.

For open-loop replay the metadata also holds the world's complete initial state (qpos, qvel), the
controls of the actuators the policy does not command (`uncommanded_ctrl`, by actuator name) and every
model parameter that randomisation changed in that world (`PARAM_FIELDS`), so the same simulator
started from the same state with the same targets reproduces the logged trajectory.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch

import batonlab
from batonlab.deploy.bag_format import metadata_json
from batonlab.deploy.recording import BagRecorder
from batonlab.env.env import BatonEnv
from batonlab.sim.joints import one_dof_joint_ids

PARAM_FIELDS = (
    "dof_damping", "dof_frictionloss", "dof_armature", "jnt_stiffness", "body_mass", "body_inertia", "body_ipos",
    "geom_friction", "actuator_gainprm", "actuator_biasprm", "actuator_forcerange",
)
"""Model fields that domain randomisation may change per world; those that differ from the nominal
model are stored in each bag's metadata under `physics`."""


def robot_name(env: BatonEnv) -> str:
    """The compiled model's name (e.g. `table_arm6`)."""
    model = env.scene.model
    return bytes(model.names[: model.names.index(b"\x00")]).decode() or "robot"


def world_params(env: BatonEnv, env_id: int) -> dict[str, list]:
    """`PARAM_FIELDS` of world `env_id` that differ from the nominal model."""
    out = {}
    for name in PARAM_FIELDS:
        nominal = np.asarray(getattr(env.scene.model, name))
        value = env.sim.get_params(name)[env_id].cpu().numpy()
        if value.shape == nominal.shape and not np.array_equal(value, nominal):
            out[name] = value.tolist()
    return out


def env_manifest(env: BatonEnv, task: str) -> tuple[dict, str]:
    """The export manifest of `env` (without training config) and the sha256 of its canonical JSON."""
    from batonlab.export.manifest import manifest_from_env

    manifest = manifest_from_env(env, task).to_json()
    return manifest, hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()


class RecordingError(RuntimeError):
    """A bag could not be written (a full disk, a folder that cannot be written); its path and the cause."""


class EpisodeRecorder:
    """Records the first episode of envs `0 .. num_episodes-1` during `batonlab.rl.evaluate`.

    Pass it as `evaluate(..., step_callback=recorder)`, then call `close()`.

    Args:
        env: The evaluated env.
        out_dir: Folder for the bags (`<prefix>_ep000`, `<prefix>_ep001`, …).
        num_episodes: Number of envs (from env 0) whose first episode is recorded.
        task: Task name (metadata).
        metadata: Extra metadata for every bag (seed, checkpoint, manifest sha256, …).
        prefix: Bag folder prefix (default `<task>_<date-time>`).
        obs_group: Observation group the policy reads.
        chunk_bytes: MCAP chunk size (small values make many chunks; tests use that).
    """

    def __init__(self, env: BatonEnv, out_dir: str | Path, num_episodes: int, task: str,
                 metadata: dict[str, Any] | None = None, prefix: str | None = None, obs_group: str = "policy",
                 chunk_bytes: int = 1 << 20):
        self.env = env
        self.out_dir = Path(out_dir)
        self.num_episodes = min(int(num_episodes), env.num_envs)
        self.task = task
        self.obs_group = obs_group
        self.chunk_bytes = chunk_bytes
        self.prefix = prefix or f"{task}_{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}"
        for name, term in env.action_manager.terms.items():
            if not hasattr(term, "qpos_adr"):
                raise RecordingError(f"cannot record {task}: its action term '{name}' ({type(term).__name__}) drives "
                                     f"no joints of its own (a lower level drives them); bags record joint-level "
                                     f"actions only")
        terms = list(env.action_manager.terms.values())
        self.joint_names = [j for t in terms for j in t.joint_names]
        self._actuators = torch.cat([t.actuator_ids for t in terms]).cpu()
        manifest, manifest_sha = env_manifest(env, task)
        self.metadata = {
            "source": "sim",
            "task": task,
            "robot": robot_name(env),
            "batonlab_version": batonlab.__version__,
            "manifest_sha256": manifest_sha,
            "manifest_source": "env",
            "manifest": manifest,
            "control_dt": env.step_dt,
            "physics_dt": env.cfg.sim.physics_dt,
            "decimation": env.cfg.sim.decimation,
            "obs_group": obs_group,
            "ctrl_range": _ctrl_range(env.scene.model, self._actuators.numpy()),
            "model": {"nq": env.scene.model.nq, "nv": env.scene.model.nv, "nu": env.scene.model.nu},
            **(metadata or {}),
        }
        # The joint states hold every 1-DoF joint of the robot, as a robot publishes them (a stowed arm, the fingers).
        model = env.scene.model
        states = one_dof_joint_ids(model)
        self.state_joint_names = [model.joint(j).name for j in states]
        self._state_qadr = torch.as_tensor([int(model.jnt_qposadr[j]) for j in states])
        self._state_dadr = torch.as_tensor([int(model.jnt_dofadr[j]) for j in states])
        self._effort_cols = torch.as_tensor([self.state_joint_names.index(j) for j in self.joint_names])
        self._base = _BaseFrame(env.scene.model, self.joint_names[0])
        self._effort = _ActuatorForce(env, self._actuators)
        self.recorders: dict[int, BagRecorder] = {}
        self.paths: list[Path] = []
        self._step = 0
        self._state: dict[str, torch.Tensor] = {}

    def __call__(self, env: BatonEnv, obs, actions: torch.Tensor | None, done: torch.Tensor | None) -> None:
        ids = list(range(self.num_episodes))
        if actions is None:
            self._start(env, ids)
            self._cache(env)
            return
        active = [i for i in ids if i in self.recorders]
        if not active:
            return
        stamp = round(self._step * env.step_dt * 1e9)
        pre = self._state
        ctrl = env.sim.ctrl[:, self._actuators].double().cpu()
        efforts = self._effort(pre["qpos"], pre["qvel"], ctrl)
        obs_group = obs[self.obs_group].cpu()
        raw = actions.float().cpu()
        done = done.cpu()
        for i in active:
            rec = self.recorders[i]
            effort = None
            if efforts is not None:  # the efforts of the commanded joints' actuators; NaN for the others
                effort = np.full(len(self.state_joint_names), np.nan)
                effort[self._effort_cols.numpy()] = efforts[i].numpy()
            rec.joint_state(stamp, pre["qpos"][i, self._state_qadr].numpy(), pre["qvel"][i, self._state_dadr].numpy(),
                            effort)
            quat, ang_vel, lin_acc = self._base(pre["qpos"][i].numpy(), pre["qvel"][i].numpy())
            rec.imu(stamp, quat, ang_vel, lin_acc, frame_id=self._base.frame)
            odom = self._base.odometry(pre["qpos"][i].numpy(), pre["qvel"][i].numpy())
            if odom is not None:
                rec.odom(stamp, *odom, child_frame_id=self._base.frame)
            for name, values in pre["commands"].items():
                rec.task_command(name, stamp, values[i].numpy(), frame_id=self._base.frame)
            rec.joint_command(stamp, ctrl[i].numpy())
            rec.policy_step(stamp, self._step, obs_group[i].numpy(), raw[i].numpy(), ctrl[i].numpy(), "sim",
                            episode=i, compute_time_s=0.0)
            if bool(done[i]):
                self._finish(i)
        self._step += 1
        self._cache(env)

    def close(self) -> list[Path]:
        """Close every bag still open (episodes cut short by the caller); returns all bag paths.

        Each bag gets its MCAP summary and metadata.yaml even when another one fails (the first
        failure is raised afterwards). Calling it again does nothing.
        """
        failures = []
        for i in list(self.recorders):
            try:
                self._finish(i)
            except RecordingError as err:
                failures.append(err)
        if failures:
            raise failures[0]
        return self.paths

    # Private methods.

    def _start(self, env: BatonEnv, ids: list[int]) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        qpos, qvel = env.sim.qpos.double().cpu(), env.sim.qvel.double().cpu()
        model, ctrl = env.scene.model, env.sim.ctrl.double().cpu()
        uncommanded = sorted(set(range(model.nu)) - set(self._actuators.tolist()))
        for i in ids:
            path = self.out_dir / f"{self.prefix}_ep{i:03d}"
            meta = {
                **self.metadata,
                "episode": i,
                "env_id": i,
                "initial_state": {"time": 0.0, "qpos": qpos[i].tolist(), "qvel": qvel[i].tolist()},
                "physics": world_params(env, i),
                "uncommanded_ctrl": {model.actuator(a).name: float(ctrl[i, a]) for a in uncommanded},
            }
            json.loads(metadata_json(meta))  # fail here, not in the writer thread, on values JSON cannot hold
            # Simulation is not real time: the bag is written by a thread of this process.
            self.recorders[i] = BagRecorder(path, meta, self.state_joint_names, command_joint_names=self.joint_names,
                                            chunk_bytes=self.chunk_bytes, isolate=False)
            self.paths.append(path)
        self._step = 0

    def _cache(self, env: BatonEnv) -> None:
        """The state the next step starts from (for envs that did not just reset)."""
        self._state = {
            "qpos": env.sim.qpos.double().cpu().clone(),
            "qvel": env.sim.qvel.double().cpu().clone(),
            "commands": {n: t.command.double().cpu().clone() for n, t in env.command_manager.terms.items()},
        }

    def _finish(self, i: int) -> None:
        rec = self.recorders.pop(i)
        status = rec.close()
        if not status["recording_ok"]:
            raise RecordingError(f"recording episode {i} to {rec.path} failed: {status['recording_error']}")


def _ctrl_range(model: mujoco.MjModel, actuators: np.ndarray) -> list:
    """[low, high] control range of each actuator (None where unlimited)."""
    return [[float(model.actuator_ctrlrange[a, 0]), float(model.actuator_ctrlrange[a, 1])]
            if model.actuator_ctrllimited[a] else [None, None] for a in actuators]


class _BaseFrame:
    """Orientation, angular velocity and gravity reaction of the robot's root body (an IMU at the base)."""

    def __init__(self, model: mujoco.MjModel, joint: str):
        body = int(model.jnt_bodyid[model.joint(joint).id])
        while int(model.body_parentid[body]) != 0:
            body = int(model.body_parentid[body])
        self.frame = model.body(body).name
        self.free_qadr = self.free_dadr = None
        if model.body_jntnum[body] and int(model.jnt_type[model.body_jntadr[body]]) == int(mujoco.mjtJoint.mjJNT_FREE):
            joint_id = int(model.body_jntadr[body])
            self.free_qadr, self.free_dadr = int(model.jnt_qposadr[joint_id]), int(model.jnt_dofadr[joint_id])
            self.fixed_quat = None
        else:
            data = mujoco.MjData(model)
            mujoco.mj_kinematics(model, data)
            self.fixed_quat = data.xquat[body].copy()

    def odometry(self, qpos: np.ndarray, qvel: np.ndarray) -> tuple[np.ndarray, ...] | None:
        """A floating base's (position, orientation wxyz) in the world and (linear, angular) velocity in its own frame,
        as a robot's state estimator publishes them on `odom` (REP-105); None for a fixed base."""
        if self.free_qadr is None:
            return None
        q, d = self.free_qadr, self.free_dadr
        quat = qpos[q + 3 : q + 7]
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, np.asarray(quat, dtype=np.float64))
        return qpos[q : q + 3], quat, rot.reshape(3, 3).T @ qvel[d : d + 3], qvel[d + 3 : d + 6]

    def __call__(self, qpos: np.ndarray, qvel: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.fixed_quat is not None:
            quat, ang_vel = self.fixed_quat, np.zeros(3)
        else:
            quat = qpos[self.free_qadr + 3 : self.free_qadr + 7]
            ang_vel = qvel[self.free_dadr + 3 : self.free_dadr + 6]  # free-joint angular velocity is in the body frame
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, np.asarray(quat, dtype=np.float64))
        return quat, ang_vel, rot.reshape(3, 3).T @ np.array([0.0, 0.0, 9.81])


class _ActuatorForce:
    """MuJoCo's force law of fixed-gain, affine-bias actuators without dynamics (position/velocity/motor):
    `clamp(gain·ctrl + b0 + b1·q + b2·qd, forcerange)`, per world (gains may be randomised)."""

    def __init__(self, env: BatonEnv, actuators: torch.Tensor):
        model = env.scene.model
        act = actuators.numpy()
        simple = (
            all(int(model.actuator_gaintype[a]) == int(mujoco.mjtGain.mjGAIN_FIXED) for a in act)
            and all(int(model.actuator_biastype[a]) in (int(mujoco.mjtBias.mjBIAS_NONE), int(mujoco.mjtBias.mjBIAS_AFFINE))
                    for a in act)
            and all(int(model.actuator_dyntype[a]) == int(mujoco.mjtDyn.mjDYN_NONE) for a in act)
            and all(int(model.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT) for a in act)
        )
        self.enabled = simple
        if not simple:
            return
        gain = env.sim.get_params("actuator_gainprm")[:, act, 0].double()
        bias = env.sim.get_params("actuator_biasprm")[:, act, :3].double()
        forcerange = env.sim.get_params("actuator_forcerange")[:, act].double()
        limited = torch.as_tensor(model.actuator_forcelimited[act].astype(bool))
        self.gain, self.bias = gain, bias
        self.low = torch.where(limited, forcerange[..., 0], -torch.inf)
        self.high = torch.where(limited, forcerange[..., 1], torch.inf)
        joints = model.actuator_trnid[act, 0]
        self.qadr = torch.as_tensor(model.jnt_qposadr[joints])
        self.dadr = torch.as_tensor(model.jnt_dofadr[joints])
        self.gear = torch.as_tensor(model.actuator_gear[act, 0])

    def __call__(self, qpos: torch.Tensor, qvel: torch.Tensor, ctrl: torch.Tensor) -> torch.Tensor | None:
        """(num_envs, num_joints) joint torques [N·m or N], or None for other actuator types."""
        if not self.enabled:
            return None
        q, qd = qpos[:, self.qadr] * self.gear, qvel[:, self.dadr] * self.gear
        force = self.gain * ctrl + self.bias[..., 0] + self.bias[..., 1] * q + self.bias[..., 2] * qd
        return torch.minimum(torch.maximum(force, self.low), self.high) * self.gear
