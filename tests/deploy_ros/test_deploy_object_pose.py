# SPDX-License-Identifier: BSD-3-Clause
"""The object pose as a deployable sensor: arm_lift's student reads `observations.sensor_pose` ("object_pose"), which a
robot gets from a perception node as geometry_msgs/PoseStamped on sensors/object_pose.

- the manifest names it (a "pose" sensor: dim 7, its frame, the two MuJoCo sensors behind it) and refuses
  malformed entries;
- the robot side rebuilds training's observation from it (the quaternion made unit, w >= 0) and treats a
  missing, late, non-finite or non-unit pose as bad input (passive, or stop);
- policy_node subscribes it (RELIABLE and BEST_EFFORT publishers), records it in its bag as PoseStamped, and
  logs read it back;
- over ROS 2, sim_robot_node publishes it from its MuJoCo sensors and policy_node's observation equals
  training's for the simulator states it was built from (`sim_robot_node state_file:=...` is the truth).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from batonlab.deploy import DeployRuntime, ManifestError, SafetyCfg, State, load_manifest, parse_manifest
from batonlab.deploy.bag_format import POSE_STAMPED
from batonlab.deploy.dry_run import dry_run
from batonlab.deploy.manifest_robot import POSE, SensorSpec
from batonlab.deploy.observation import ObservationBuilder, RobotInputs
from batonlab.deploy.pose import canonical_pose, pose_problem
from batonlab.env.env import BatonEnv
from batonlab.tasks import make_agent_cfg, make_task_cfg
from ros.exports import arm_lift_manifest, make_export

TASK = "arm_lift"
POSE_NAME = "object_pose"
RESTING_POSE = [0.45, 0.05, 0.022, np.cos(0.3), 0.0, 0.0, np.sin(0.3)]
"""The cube on the table, turned 0.6 rad about z, in the arm base frame: x, y, z [m], qw, qx, qy, qz."""


def training_env(num_envs: int = 1) -> BatonEnv:
    """arm_lift's play env with its observation noise and delay off: what the robot side must reproduce
    (training's processing minus the noise, `batonlab.deploy.observation`)."""
    cfg = make_task_cfg(TASK, play=True)
    cfg.num_envs = num_envs
    cfg.observations["policy"].enable_corruption = False
    return BatonEnv(cfg)


def term_columns(manifest) -> dict[str, slice]:
    """Observation term name → its columns in the policy input."""
    offsets = np.cumsum([0] + [t.width for t in manifest.obs_terms])
    return {t.name: slice(int(a), int(b)) for t, a, b in zip(manifest.obs_terms, offsets[:-1], offsets[1:])}


def sim_reading(env: BatonEnv, spec: SensorSpec, env_id: int = 0) -> np.ndarray:
    """A manifest sensor as the simulator gives it: its MuJoCo sensors, concatenated."""
    return np.concatenate([env.sim.sensor(s)[env_id].double().numpy() for s in spec.mujoco_sensors])


# The manifest.


def test_the_arm_lift_manifest_names_the_object_pose_and_round_trips():
    data = arm_lift_manifest()
    manifest = parse_manifest(data)
    spec = manifest.sensors[POSE_NAME]
    assert spec == SensorSpec(POSE, 7, "topic", "arm_base_site", "arm_base", (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0),
                              ("object_pos", "object_quat"))
    assert "PoseStamped" in data["sensors"][POSE_NAME]["convention"] and "w >= 0" in data["sensors"][POSE_NAME]["convention"]
    assert manifest.sensors["ee_pos_b"].mujoco_sensors == ("ee_pos_b",)
    assert parse_manifest(json.loads(json.dumps(manifest.to_json(), allow_nan=False))) == manifest
    assert [t.name for t in manifest.obs_terms] == ["joint_pos", "joint_vel", "ee_pos", POSE_NAME, "last_action"]
    # A manifest written before poses (no mujoco_sensors) still loads.
    del data["sensors"]["ee_pos_b"]["mujoco_sensors"]
    assert parse_manifest(data).sensors["ee_pos_b"].mujoco_sensors == ()


@pytest.mark.parametrize("key, value, message", [
    ("dim", 6, "a pose sensor has dim 7 and source 'topic'"),
    ("source", "imu.orientation", "a pose sensor has dim 7 and source 'topic'"),
    ("mujoco_sensors", ["object_pos"], "a pose sensor names two MuJoCo sensors"),
    ("mujoco_sensors", "object_pos", "field 'sensors.object_pose.mujoco_sensors' should be a list of sensor names"),
    ("mujoco_sensors", ["object_pos", 3], "field 'sensors.object_pose.mujoco_sensors' should be a list of sensor names"),
    ("type", None, "required field 'sensors.object_pose.type' is missing"),
])
def test_malformed_pose_entries_are_refused_naming_the_field(key, value, message):
    data = arm_lift_manifest()
    data["sensors"][POSE_NAME][key] = value
    with pytest.raises(ManifestError, match=re.escape(message)) as err:
        parse_manifest(data)
    assert "sensors.object_pose" in str(err.value)


def test_a_pose_term_on_a_sensor_the_manifest_calls_something_else_is_refused():
    data = arm_lift_manifest()
    data["sensors"][POSE_NAME].update(type="framepos", mujoco_sensors=["object_pos"])
    with pytest.raises(ManifestError, match="sensor 'object_pose' is a 'framepos' in the manifest's sensors, a term reads "
                                            "it as a pose"):
        ObservationBuilder(parse_manifest(data))


@pytest.mark.parametrize("param, sensor, message", [
    ("orientation", "ee_pos_b", "sensor_pose needs a framepos and a framequat; 'object_pos' and 'ee_pos_b' are"),
    ("position", "ee_pos_b", "'ee_pos_b' and 'object_quat' must sense one object in one reference frame"),
])
def test_export_refuses_a_pose_of_sensors_that_are_not_one(param, sensor, message):
    from batonlab.export.manifest import manifest_from_env

    cfg = make_task_cfg(TASK, play=True)
    cfg.num_envs = 1
    cfg.observations["policy"].terms[POSE_NAME].params[param] = sensor
    env = BatonEnv(cfg)
    with pytest.raises(ValueError, match=message):
        manifest_from_env(env, TASK)
    env.close()


# The numpy twin.


def test_the_twin_is_training_for_any_object_pose_up_to_the_quaternion_sign():
    """Random arm and object states (object orientations from both hemispheres): the robot-side observation,
    built from the readings the manifest's MuJoCo sensors give, equals training's; both report the object
    quaternion in the hemisphere w >= 0, whichever sign MuJoCo's sensor gives."""
    env = training_env()
    manifest = parse_manifest(arm_lift_manifest())
    builder = ObservationBuilder(manifest)
    ctx = builder.ctx
    columns = term_columns(manifest)
    model = env.scene.model
    qadr, dadr = env.scene.qpos_adr(ctx.joints), env.scene.dof_adr(ctx.joints)
    limits = model.jnt_range[env.scene.joint_ids(ctx.joints)]
    object_adr = int(model.jnt_qposadr[model.joint("object").id])
    rng = np.random.default_rng(3)
    flipped = 0
    for _ in range(40):
        qpos = env.default_qpos.clone().double()
        qpos[qadr] = torch.as_tensor(rng.uniform(limits[:, 0], limits[:, 1]))
        quat = rng.normal(size=4)
        qpos[object_adr:object_adr + 7] = torch.as_tensor([*rng.uniform([0.3, -0.2, 0.02], [0.6, 0.2, 0.3]),
                                                          *(quat / np.linalg.norm(quat))])
        qvel = torch.as_tensor(rng.normal(0.0, 0.5, model.nv))
        env.sim.reset(env.all_env_ids, qpos[None], qvel[None])
        env.action_manager.action[0] = torch.as_tensor(rng.normal(size=manifest.action_dim), dtype=torch.float32)
        sim = env.observation_manager.compute()["policy"][0].double().numpy()
        inputs = RobotInputs(joint_pos=env.sim.qpos[0, qadr].double().numpy(), joint_vel=env.sim.qvel[0, dadr].double().numpy(),
                             vectors={name: sim_reading(env, manifest.sensors[name]) for name in ctx.sensors},
                             last_action=env.action_manager.action[0].numpy())
        robot = builder.compute(inputs).astype(np.float64)
        quat_cols = slice(columns[POSE_NAME].start + 3, columns[POSE_NAME].stop)
        flipped += int(env.sim.sensor("object_quat")[0, 0] < 0)  # MuJoCo's own sign
        assert sim[quat_cols.start] >= 0.0
        np.testing.assert_allclose(robot, sim, atol=1e-5)
    env.close()
    assert 5 <= flipped <= 35, "both hemispheres were drawn"


def test_the_twin_makes_the_quaternion_unit_and_w_positive():
    pose = np.array(RESTING_POSE)
    np.testing.assert_allclose(canonical_pose(pose), pose, atol=1e-15)
    np.testing.assert_allclose(canonical_pose(np.r_[pose[:3], -pose[3:]]), pose, atol=1e-15)
    np.testing.assert_allclose(canonical_pose(np.r_[pose[:3], 1.005 * pose[3:]]), pose, atol=1e-15)
    assert pose_problem(pose) is None and pose_problem(np.r_[pose[:3], -pose[3:]]) is None
    assert "length 0.5000" in pose_problem(np.r_[pose[:3], 0.5 * pose[3:]])
    assert "length 0.0000" in pose_problem(np.zeros(7))
    assert "non-finite" in pose_problem(np.r_[pose[:6], np.nan])


# The runtime's safety rules.


def lift_runtime(tmp_path: Path) -> tuple[DeployRuntime, dict]:
    manifest = load_manifest(make_export(tmp_path / "exported", arm_lift_manifest()))
    runtime = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, input_rate_samples=0))
    joints = list(runtime.ctx.joints)
    inputs = {"joint_states": (joints, [manifest.default_joint_pos[j] for j in joints], np.zeros(len(joints))),
              "ee_pos_b": [0.3, 0.0, 0.3], POSE_NAME: list(RESTING_POSE)}
    return runtime, inputs


def feed(runtime: DeployRuntime, inputs: dict, now: float, skip: tuple[str, ...] = ()):
    names, position, velocity = inputs["joint_states"]
    runtime.set_joint_state(names, position, velocity, now)
    for name in ("ee_pos_b", POSE_NAME):
        if name not in skip:
            runtime.set_vector(name, inputs[name], now)
    return runtime.step(now)


def test_a_robot_without_the_object_pose_does_not_start(tmp_path):
    runtime, inputs = lift_runtime(tmp_path)
    for k in range(5):
        result = feed(runtime, inputs, k * runtime.dt, skip=(POSE_NAME,))
        assert result.state is State.PASSIVE and result.command is None
    assert result.reason == "never received sensor 'object_pose'" and runtime.never_received() == [POSE_NAME]
    ok, message = runtime.start(5 * runtime.dt)
    assert not ok and "object_pose" in message


@pytest.mark.parametrize("bad, reason", [
    ("late", "stale object_pose"),
    ("nan", "non-finite object_pose"),
    ("non_unit", "bad object_pose: quaternion (w, x, y, z)"),
    ("zero_quaternion", "bad object_pose: quaternion (w, x, y, z) [0.0, 0.0, 0.0, 0.0] has length 0.0000"),
])
def test_a_late_or_broken_object_pose_stops_the_robot(tmp_path, bad, reason):
    runtime, inputs = lift_runtime(tmp_path)
    k = 0
    for k in range(3):
        assert feed(runtime, inputs, k * runtime.dt).state is State.RUN
    held = feed(runtime, inputs, (k + 1) * runtime.dt).command
    pose = np.array(RESTING_POSE)
    broken = {"nan": np.r_[pose[:4], np.nan, pose[5:]], "non_unit": np.r_[pose[:3], 0.9 * pose[3:]],
              "zero_quaternion": np.r_[pose[:3], np.zeros(4)]}
    first_bad, stops_at = k + 2, None
    for k in range(first_bad, first_bad + 6):
        if bad == "late":
            result = feed(runtime, inputs, k * runtime.dt, skip=(POSE_NAME,))
        else:
            result = feed(runtime, {**inputs, POSE_NAME: broken[bad]}, k * runtime.dt)
        assert result.command is None or np.isfinite(result.command).all()
        if result.state is State.STOP:
            stops_at = stops_at or k
            assert result.reason.startswith(reason), result.reason
            np.testing.assert_allclose(result.command, held, err_msg="stop holds the last command")
    assert stops_at is not None and (bad == "late" or stops_at == first_bad), "a broken pose stops at once"


def test_either_quaternion_sign_runs_the_same_policy_input(tmp_path):
    runtime, inputs = lift_runtime(tmp_path)
    columns = term_columns(runtime.manifest)[POSE_NAME]
    assert feed(runtime, inputs, 0.0).state is State.RUN
    first = runtime.control.observation.obs[columns].copy()
    pose = np.array(RESTING_POSE)
    assert feed(runtime, {**inputs, POSE_NAME: np.r_[pose[:3], -pose[3:]]}, runtime.dt).state is State.RUN
    np.testing.assert_array_equal(runtime.control.observation.obs[columns], first)
    np.testing.assert_allclose(first, RESTING_POSE, atol=1e-7)


def test_an_arm_lift_student_export_dry_runs(tmp_path):
    assert dry_run(load_manifest(export_untrained_student(tmp_path / "exported"))).state is State.RUN


# Exports.


def export_untrained_student(out_dir: Path) -> Path:
    """A deployable arm_lift export: a BatonRunner whose actor reads only the `policy` group (the critic
    also the privileged one), untrained, exported by `batonlab.export.onnx.export`."""
    from batonlab.export.onnx import export
    from batonlab.rl.runner import BatonRunner
    from batonlab.rl.vecenv import RslRlVecEnv

    torch.manual_seed(0)
    env = training_env()
    agent = make_agent_cfg(TASK)
    agent.obs_groups = {"actor": ["policy"], "critic": ["policy", "privileged"]}
    runner = BatonRunner(RslRlVecEnv(env), agent, log_dir=None)
    export(env, runner.inference_policy(), out_dir, TASK)
    env.close()
    return Path(out_dir)


@pytest.fixture(scope="module")
def arm_lift_student_export(tmp_path_factory) -> Path:
    """The arm_lift student export the ROS 2 sim-to-sim test drives: untrained (the plumbing does not need a
    skilled policy). A trained student plugs in here (any export folder of a policy reading `policy` only)."""
    return export_untrained_student(tmp_path_factory.mktemp("arm_lift_student") / "exported")


# policy_node over ROS 2, a fake robot publishing the pose.


def pose_reading_export(tmp_path: Path) -> tuple[Path, dict]:
    """An arm_lift export whose linear policy turns the shoulder by the observed qz and the elbow by the
    observed x: the commands show which numbers reached the observation's pose columns."""
    manifest = parse_manifest(arm_lift_manifest())
    columns = term_columns(manifest)[POSE_NAME]
    weight = np.zeros((manifest.obs_dim, manifest.action_dim))
    weight[columns.start + 6, 0] = 1.0  # qz → shoulder_yaw
    weight[columns.start + 0, 2] = 1.0  # x → elbow_pitch
    return make_export(tmp_path / "exported", manifest, weight=weight), manifest.default_joint_pos


def lift_robot(domain: int, default_joint_pos: dict, **kwargs):
    from ros.nodes import FakeRobot

    joints = [*default_joint_pos]  # every 1-DoF joint of the scene (the arm, both fingers)
    return FakeRobot(domain, joints, [default_joint_pos[j] for j in joints], poses={POSE_NAME: list(RESTING_POSE)},
                     **kwargs)


def lift_node(export: Path, domain: int, tmp_path: Path, **extra):
    from ros.nodes import NodeProcess

    params = {"manifest": str(export), "control_rate_hz": 20.0, "ramp_time_s": 0.2, "command_topic": "joint_commands",
              "ignored_joints": ["finger_right"], "max_joint_velocity": 10.0, **extra}
    return NodeProcess("policy_node", domain, tmp_path, params=params)


@pytest.mark.parametrize("reliability", ["reliable", "best_effort"])
def test_policy_node_reads_the_object_pose_as_pose_stamped_and_records_it(tmp_path, reliability):
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from batonlab.logs.bag_reader import open_bag
    from ros.nodes import new_domain_id, robot_and_node

    export, defaults = pose_reading_export(tmp_path)
    domain = new_domain_id()
    robot = lift_robot(domain, defaults, reliability=reliability)
    node = lift_node(export, domain, tmp_path, record=True, record_dir=str(tmp_path / "bags"))
    pose = np.array(RESTING_POSE)
    expected = [defaults["shoulder_yaw"] + 0.5 * pose[6], defaults["elbow_pitch"] + 0.5 * pose[0]]
    with robot_and_node(robot, node):
        time.sleep(0.5)
        np.testing.assert_allclose(robot.command_array()[-1][[0, 2]], expected, atol=1e-6)
        # The other sign of the same orientation: the same command.
        robot.poses[POSE_NAME] = [*pose[:3], *-pose[3:]]
        time.sleep(0.5)
        assert robot.state_names()[-1] == "run"
        np.testing.assert_allclose(robot.command_array()[-1][[0, 2]], expected, atol=1e-6)
    (bag,) = (tmp_path / "bags").iterdir()
    log = open_bag(bag)
    assert log.topics["/sensors/object_pose"].msgtype == POSE_STAMPED
    received = log.sensors[POSE_NAME].values
    assert received.shape[1] == 7 and len(received) > 20
    signs = np.where(received[:, 3:4] < 0, -1.0, 1.0)
    np.testing.assert_allclose(received * np.c_[np.ones((len(received), 3)), np.repeat(signs, 4, axis=1)],
                               np.tile(pose, (len(received), 1)), atol=1e-12, err_msg="the bag holds the poses received")
    assert (signs < 0).any() and (signs > 0).any()


def test_policy_node_stops_on_a_broken_or_late_object_pose_and_waits_for_a_missing_one(tmp_path):
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from ros.nodes import new_domain_id, robot_and_node

    export, defaults = pose_reading_export(tmp_path)
    domain = new_domain_id()
    robot = lift_robot(domain, defaults)
    robot.publish_poses = False
    node = lift_node(export, domain, tmp_path)
    pose = np.array(RESTING_POSE)
    with robot_and_node(robot, node, wait_for="passive"):
        robot.wait_for_state("passive", timeout=30, reason="never received sensor 'object_pose'")
        response = robot.start()
        assert not response.success and "object_pose" in response.message and "sensors/object_pose" in response.message
        assert "run" not in robot.state_names() and len(robot.command_array()) == 0
        robot.publish_poses = True
        robot.wait_for_state("run", timeout=30)
        for broken, reason in (([*pose[:3], *(0.9 * pose[3:])], "bad object_pose: quaternion"),
                               ([*pose[:4], float("nan"), *pose[5:]], "non-finite object_pose"),
                               (None, "stale object_pose")):
            seen = len(robot.states)
            if broken is None:
                robot.publish_poses = False  # the perception node stalls
            else:
                robot.poses[POSE_NAME] = broken
            robot.wait_for_state("stop", timeout=10, after=seen, reason=reason)
            time.sleep(0.2)
            commands = robot.command_array()
            assert np.isfinite(commands).all()
            robot.poses[POSE_NAME], robot.publish_poses = list(pose), True
            seen = len(robot.states)
            time.sleep(0.3)
            assert robot.reset().success
            robot.wait_for_state("run", timeout=10, after=seen)


# Sim-to-sim over ROS 2: sim_robot_node publishes the pose from its MuJoCo sensors.


@pytest.mark.slow
def test_sim_to_sim_object_pose_reaches_the_policy_as_in_training(arm_lift_student_export, tmp_path):
    """sim_robot_node (arm_lift, two episodes) and policy_node, each in its own process over loopback DDS. For
    every control step the policy ran, its observation (policy_node's bag) equals training's observation
    (`ObservationManager`, noise off) of the simulator states it read: sim_robot_node's state file holds, per
    physics step, the qpos, qvel and MuJoCo sensor readings its messages were built from, which is what
    training's terms read. The joint terms come from the step of the joint_states message used, each sensor
    term from the step of its last message, last_action from the previous policy step of the same episode (the
    sim robot starts each on `~/new_episode`, as training's reset: none before its first step). The bag holds
    /sensors/object_pose as PoseStamped, read back exactly."""
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from batonlab.cli.deploy import sim_config
    from batonlab.logs.bag_reader import open_bag
    from ros.nodes import NodeProcess, new_domain_id

    export = arm_lift_student_export
    manifest = load_manifest(export)
    domain, seed = new_domain_id(), 40
    state_file, results_file = tmp_path / "states.npz", tmp_path / "results.json"
    sim = NodeProcess("sim_robot_node", domain, tmp_path, params_files=[sim_config()],
                      params={"task": TASK, "seed": seed, "num_episodes": 2, "results_file": str(results_file),
                              "state_file": str(state_file)})
    policy = NodeProcess("policy_node", domain, tmp_path, params_files=[sim_config()],
                         params={"manifest": str(export), "ignored_joints": ["finger_right"], "record": True,
                                 "record_dir": str(tmp_path / "bags")})
    try:
        sim.wait(timeout=300)
    finally:
        policy_code, sim_code = policy.stop(), sim.stop()
    assert sim_code == 0 and policy_code == 0, f"{sim.output}\n{policy.output}"
    summary = json.loads(results_file.read_text())
    assert [e["seed"] for e in summary["episodes"]] == [seed, seed + 1]
    assert all(e["commands_received"] > 0 for e in summary["episodes"])

    truth = np.load(state_file)
    (bag,) = (tmp_path / "bags").iterdir()
    log = open_bag(bag)
    assert log.topics["/sensors/object_pose"].msgtype == POSE_STAMPED
    start_s = log.start_ns * 1e-9
    steps = log.policy_steps
    ran = np.flatnonzero(np.isfinite(steps.observation).all(axis=1))
    assert len(ran) > 200, f"the policy ran {len(ran)} steps"

    env = training_env()
    columns = term_columns(manifest)
    by_term = {"joint_pos": None, "joint_vel": None, "last_action": None, "ee_pos": "ee_pos_b", POSE_NAME: POSE_NAME}
    sim_steps = {round(t * 1e6): k for k, t in enumerate(truth["time_s"])}

    def state_index(t_rel: float) -> int:
        return sim_steps[round((t_rel + start_s) * 1e6)]

    def load_step(k: int) -> None:
        """The training env's backend buffers (what observation terms read) as the sim robot held them at step k."""
        for key in ("qpos", "qvel", "sensordata"):
            getattr(env.sim, key)[0] = torch.as_tensor(truth[key][k])

    def training_obs(k: int, last_action: np.ndarray) -> np.ndarray:
        load_step(k)
        env.action_manager.action[0] = torch.as_tensor(last_action)
        return env.observation_manager.compute()["policy"][0].double().numpy()

    worst, same_step, object_moved = 0.0, 0, set()
    for i in ran:
        previous_ran = i > 0 and steps.safety_state[i - 1] in ("ramp", "run") and np.isfinite(steps.action_raw[i - 1]).all()
        previous_ran &= steps.episode[i] == steps.episode[i - 1]  # an episode starts without an action, as in training
        last_action = steps.action_raw[i - 1] if previous_ran else np.zeros(manifest.action_dim, dtype=np.float32)
        joints_k = state_index(steps.input_stamp[i])
        sources = {None: joints_k}
        for sensor in ("ee_pos_b", POSE_NAME):
            series = log.sensors[sensor]
            m = int(np.searchsorted(series.t, steps.t[i], side="right")) - 1
            sources[sensor] = state_index(series.stamp[m])
        same_step += len(set(sources.values())) == 1
        expected = np.empty(manifest.obs_dim)
        for term, sensor in by_term.items():
            expected[columns[term]] = training_obs(sources[sensor], last_action)[columns[term]]
        object_moved.add(tuple(np.round(expected[columns[POSE_NAME]], 3)))
        worst = max(worst, float(np.abs(steps.observation[i] - expected).max()))
        np.testing.assert_allclose(steps.observation[i], expected, atol=1e-6,
                                   err_msg=f"policy step {steps.step[i]} ({steps.safety_state[i]})")
    # What the bag holds for the pose is what the simulator's sensors read at the message's stamp.
    series = log.sensors[POSE_NAME]
    for m in range(len(series.t)):
        load_step(state_index(series.stamp[m]))
        np.testing.assert_array_equal(series.values[m], sim_reading(env, manifest.sensors[POSE_NAME]))
    env.close()
    print(f"\n[sim2sim object pose] {len(ran)} policy steps, max |node obs - training obs| = {worst:.1e}; "
          f"{same_step} steps read every input from one physics step; {len(object_moved)} distinct object poses seen")
    assert len({p[:3] for p in object_moved}) >= 2, "two episodes: two object placements"

