# SPDX-License-Identifier: BSD-3-Clause
"""`reach` over any arm: `batonlab train task=reach robot=ROBOT.yaml` on arm6's description (the same task as
`arm_reach`) and on a URDF arm with STL meshes written by `tests/robot_files.py`; the `robot=` plumbing
(task registry, command line, run folders, the sim robot); a gripper arm (TCP past its hand, held fingers,
a mimic joint); and, slow, the gripper arm trained from scratch with the defaults (to the task's bar),
exported and run over ROS 2 sim-to-sim.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from batonlab.cli.common import CliError, build_invocation
from batonlab.env.env import BatonEnv
from batonlab.robots.assets import asset_path
from batonlab.robots.description import RobotDescriptionError
from batonlab.tasks import TaskRobotError, get_task, list_tasks, make_task_cfg
from batonlab.tasks.arm_reach import TARGET_BOX_B
from robot_files import ARM_JOINTS, FINGER_JOINTS, tool_position, write_urdf_arm
from conftest import make_env

URDF_JOINTS = tuple(j["name"] for j in ARM_JOINTS)
ARM6_YAML = asset_path("arm6", "arm6.yaml")


WRIST_ARMATURE = 0.02
"""Armature of the elbow and wrist joints in the reach description of the URDF arm [kg·m²] (arm6's value)."""


@pytest.fixture
def urdf_arm(tmp_path) -> Path:
    """The URDF arm's description as a reach task needs it: `robot_files`' description with rotor inertia on
    the elbow and wrist joints. Without it (armature 0) the wrist servos are unstable at the 5 ms physics
    step: kd·dt/I = 2 N·m·s/rad · 5 ms / 2e-4 kg·m² ≈ 50 for wrist_roll (1.8 for wrist_pitch), so MuJoCo's
    explicit actuator damping drives them into a limit cycle at the torque limit."""
    written = write_urdf_arm(tmp_path / "robot")
    raw = yaml.safe_load(written.read_text())
    assert raw["actuators"][1]["joints"] == ["elbow", "wrist_.*"] and raw["actuators"][1]["armature"] == 0.0
    raw["actuators"][1]["armature"] = WRIST_ARMATURE
    path = written.with_name("test_arm_reach.yaml")
    path.write_text(yaml.safe_dump(raw))
    return path


def _env(task: str, robot=None, num_envs: int = 4, play: bool = False, seed: int = 0) -> BatonEnv:
    return make_env(task, num_envs, seed, play, robot)


# The task.


def test_reach_on_arm6_is_arm_reach():
    """Over arm6's description, reach is arm_reach: the same observation layout, reward terms, actions,
    servos and, from the same seed, the same first observation (pose, tool position, target)."""
    reach, arm_reach = _env("reach", ARM6_YAML), _env("arm_reach")
    try:
        layout, expected = reach.observation_manager.layout, arm_reach.observation_manager.layout
        assert list(layout) == list(expected) == ["policy"]
        assert [(t.name, t.size, t.func, t.params, t.scale, t.noise_std) for t in layout["policy"]] == \
               [(t.name, t.size, t.func, t.params, t.scale, t.noise_std) for t in expected["policy"]]
        reach_cfg, arm_cfg = make_task_cfg("reach"), make_task_cfg("arm_reach")
        assert list(reach_cfg.rewards) == list(arm_cfg.rewards)
        assert [(t.func, t.params, t.weight) for t in reach_cfg.rewards.values()] == \
               [(t.func, t.params, t.weight) for t in arm_cfg.rewards.values()]
        assert reach_cfg.commands["ee_target"].params == {**TARGET_BOX_B, "marker_mocap": "target"}
        terms = reach.action_manager.terms["arm"], arm_reach.action_manager.terms["arm"]
        assert terms[0].joint_names == terms[1].joint_names
        torch.testing.assert_close(terms[0].offset, terms[1].offset)  # arm6's home pose
        for env_gains in zip(reach.scene.actuator_gains(terms[0].actuator_ids),
                             arm_reach.scene.actuator_gains(terms[1].actuator_ids)):
            np.testing.assert_allclose(*env_gains)
        obs_reach, _ = reach.reset()
        obs_arm, _ = arm_reach.reset()
        torch.testing.assert_close(obs_reach["policy"], obs_arm["policy"])
    finally:
        reach.close()
        arm_reach.close()


def test_reach_builds_the_urdf_arm_and_steps(urdf_arm):
    env = _env("reach", urdf_arm, num_envs=4)
    try:
        assert env.action_manager.terms["arm"].joint_names == list(URDF_JOINTS)
        sizes = {t.name: t.size for t in env.observation_manager.layout["policy"]}
        assert sizes == {"joint_pos": 5, "joint_vel": 5, "ee_pos": 3, "ee_target": 3, "last_action": 5}
        # The tool frame the policy sees is the URDF's `tool0`, in the base frame.
        home = {"shoulder_yaw": 0.0, "shoulder_pitch": 0.3, "elbow": 1.0, "wrist_pitch": 0.0, "wrist_roll": 0.0}
        env.sim.reset(env.all_env_ids, env.scene.default_qpos.expand(4, -1).clone(), torch.zeros(4, env.scene.model.nv))
        np.testing.assert_allclose(env.sim.sensor("ee_pos_b")[0].numpy(), tool_position(home), atol=1e-5)
        env.reset()
        start = env.sim.sensor("ee_pos_b").clone()
        for _ in range(50):
            _, reward, terminated, truncated, extras = env.step(torch.full((4, 5), 0.5))
        assert torch.isfinite(reward).all() and not terminated.any()
        assert (env.sim.sensor("ee_pos_b") - start).norm(dim=1).min() > 0.05  # the actions move the tool
        # The servos settle on their targets (1 s at a constant action): no limit cycle, no drift.
        arm = env.action_manager.terms["arm"]
        settled = env.sim.qpos[:, arm.qpos_adr] - arm.processed_actions
        assert settled.abs().max() < 0.1 and env.sim.qvel[:, arm.dof_adr].abs().max() < 0.05
    finally:
        env.close()


def test_reach_over_a_gripper_arm_drives_the_arm_and_holds_the_fingers(tmp_path):
    """Over the gripper arm (TCP 10 cm past the hand, `finger_left` held, `finger_right` its mimic), the policy
    drives the five arm joints; the fingers keep their default opening in every episode, the tool the policy
    sees is the TCP, and the export's manifest and the sim robot command the held finger."""
    from ros.training import SimRobot

    from batonlab.deploy.manifest import Manifest
    from batonlab.export.manifest import manifest_from_env

    robot = write_urdf_arm(tmp_path / "robot", gripper=True)
    env = _env("reach", robot, num_envs=4)
    try:
        assert env.num_actions == 5 and env.action_manager.terms["arm"].joint_names == list(URDF_JOINTS)
        fingers = env.scene.qpos_adr(FINGER_JOINTS)
        for _ in range(60):
            env.step(torch.rand(4, 5) * 2 - 1)
        torch.testing.assert_close(env.sim.qpos[:, fingers], torch.full((4, 2), 0.02), atol=4e-3, rtol=0)
        manifest = manifest_from_env(env, "reach")
        assert manifest.joint_names == URDF_JOINTS and manifest.held_joints.names == ("finger_left",)
        assert manifest.held_joints.targets == pytest.approx((0.02,)) and not manifest.joints.gravity_compensation
    finally:
        env.close()
    sim = SimRobot("reach", robot=str(robot))
    try:
        assert sim.command_joints == [*URDF_JOINTS, "finger_left"]
    finally:
        sim.close()
    compensated = robot.with_name("compensated.yaml")
    compensated.write_text(robot.read_text() + "gravity_compensation: true\n")
    env = _env("reach", compensated, num_envs=1)
    try:
        manifest = manifest_from_env(env, "reach")
        assert manifest.joints.gravity_compensation
        assert Manifest.from_json(json.loads(json.dumps(manifest.to_json()))).joints.gravity_compensation
    finally:
        env.close()


def test_default_box_lies_in_the_urdf_arm_reach():
    """The test arm has arm6's size: inverse kinematics (URDF forward kinematics, least squares within the
    joint limits) brings the tool within 1 cm of every corner of the default workspace box, well inside
    the 3 cm of a success; so the slow test keeps arm_reach's box. (The two far top corners are 9 mm out.)"""
    from scipy.optimize import least_squares

    rng = np.random.default_rng(0)
    limits = np.array([j["limit"] or (-np.pi, np.pi) for j in ARM_JOINTS])
    corners = np.stack(np.meshgrid(*(TARGET_BOX_B[k] for k in ("x_range", "y_range", "z_range")), indexing="ij"), -1)
    for corner in corners.reshape(-1, 3):
        def error(q, corner=corner):
            return tool_position(dict(zip(URDF_JOINTS, q))) - corner

        fits = [least_squares(error, rng.uniform(limits[:, 0], limits[:, 1]), bounds=(limits[:, 0], limits[:, 1]))
                for _ in range(4)]
        assert min(np.linalg.norm(f.fun) for f in fits) < 0.01, corner


def test_sim_robot_runs_reach_over_the_urdf_arm(urdf_arm):
    """The sim robot builds reach over the robot it is given (and refuses a robot for a fixed-robot task),
    and ends episodes as play does."""
    from ros.training import SimRobot, hold_still, play_on_seeds, sim_robot_on_seeds

    from batonlab.sim2sim.robot import ConfigError

    robot = SimRobot("reach", robot=str(urdf_arm))
    try:
        assert robot.command_joints == list(URDF_JOINTS) and robot.interfaces == {"position": list(URDF_JOINTS)}
        assert robot.sensor_names == ["ee_pos_b"] and robot.command_names == ["ee_target"]
    finally:
        robot.close()
    with pytest.raises(ConfigError, match="task 'arm_reach' has a fixed robot"):
        SimRobot("arm_reach", robot=str(urdf_arm))
    seeds = range(10, 13)
    play = play_on_seeds("reach", hold_still("reach", str(urdf_arm)), seeds, robot=str(urdf_arm))
    sim = sim_robot_on_seeds("reach", hold_still("reach", str(urdf_arm)), seeds, robot=str(urdf_arm))
    assert sim.lengths.tolist() == play.lengths.tolist() == [200, 200, 200]
    assert sim.successes.tolist() == play.successes.tolist()


def test_a_reach_factory_carries_its_box_to_the_sim_robot(urdf_arm, tmp_path, monkeypatch):
    """The documented way to a box that travels everywhere (reach.py): a task factory naming robot and
    box, given as the task (`task=<module>:<factory>`); the sim robot builds it by that name."""
    from ros.training import SimRobot

    box = {"x_range": (0.2, 0.4), "y_range": (-0.2, 0.2), "z_range": (0.1, 0.3)}
    (tmp_path / "my_reach.py").write_text(
        "from batonlab.tasks.reach import make_reach_agent_cfg as make_my_reach_agent_cfg, make_reach_cfg\n\n\n"
        "def make_my_reach_cfg(play=False):\n"
        f"    cfg = make_reach_cfg(play=play, robot={str(urdf_arm)!r})\n"
        f"    cfg.commands['ee_target'].params.update({box!r})\n"
        "    return cfg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    task = "my_reach:make_my_reach_cfg"
    assert get_task(task).make_agent_cfg().experiment_name == "reach"  # the sibling: reach's training settings
    robot = SimRobot(task, seed=3)
    try:
        assert robot.command_joints == list(URDF_JOINTS)
        for _ in range(8):  # arm_reach's box would put one of 8 targets outside this one (p ≈ 1 - 2e-6)
            robot.next_episode()
            target = robot.command("ee_target")
            assert all(low <= x <= high for x, (low, high) in zip(target, box.values())), target
    finally:
        robot.close()


# Errors.


def test_robot_on_a_fixed_robot_task_is_refused(urdf_arm):
    over_any = [t.name for t in list_tasks() if t.takes_robot]
    assert "reach" in over_any and "arm_reach" not in over_any
    with pytest.raises(TaskRobotError, match=r"task 'arm_reach' has a fixed robot; robot= applies to tasks: .*reach"):
        make_task_cfg("arm_reach", robot=str(urdf_arm))
    with pytest.raises(TaskRobotError, match="task 'wl_balance' has a fixed robot"):
        get_task("wl_balance").make_cfg(play=True, robot=str(urdf_arm))
    with pytest.raises(CliError, match="task 'arm_reach' has a fixed robot"):
        build_invocation(["task=arm_reach", f"robot={urdf_arm}"])


def test_unknown_or_unfit_robot_is_refused(urdf_arm, tmp_path, capsys):
    missing = tmp_path / "no_such_robot.yaml"
    with pytest.raises(FileNotFoundError, match=f"robot description not found: {missing}"):
        make_task_cfg("reach", robot=str(missing))
    from batonlab.cli.main import main

    assert main(["train", "task=reach", f"robot={missing}", f"log_root={tmp_path / 'logs'}"]) == 2
    assert f"robot description not found: {missing}" in capsys.readouterr().err
    # A model file is not a description; a description without an end effector cannot reach.
    with pytest.raises(RobotDescriptionError, match="is a model file"):
        make_task_cfg("reach", robot=str(urdf_arm.parent / "test_arm_description" / "urdf" / "test_arm.urdf"))
    no_tool = urdf_arm.with_name("no_tool.yaml")
    no_tool.write_text(urdf_arm.read_text().replace("ee_site: tool0\n", ""))
    with pytest.raises(RobotDescriptionError, match="has no end effector: set `ee_site`"):
        make_task_cfg("reach", robot=str(no_tool))


# The command line: robot=, the run folder, overrides.


def test_cli_robot_is_recorded_and_read_back(urdf_arm, tmp_path, monkeypatch):
    monkeypatch.chdir(urdf_arm.parent)
    inv = build_invocation(["task=reach", f"robot={urdf_arm.name}", "env.commands.ee_target.params.x_range=[0.2,0.4]"])
    assert inv.top.robot == str(urdf_arm)  # absolute, as config.yaml records it
    assert inv.task.actions["arm"].joints == URDF_JOINTS
    assert inv.task.commands["ee_target"].params["x_range"] == (0.2, 0.4)
    assert inv.make_task(play=True).actions["arm"].joints == URDF_JOINTS  # play's evaluation: the same robot
    # A run folder names its task and robot: play and export rebuild the robot without robot=.
    run_dir = tmp_path / "logs" / "reach" / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"task_name": "reach", "cli": {"robot": str(urdf_arm)}}))
    for args in ([f"run_dir={run_dir}"], ["task=reach", f"run_dir={run_dir}"]):
        inv = build_invocation(args, play=True)
        assert (inv.task_name, inv.top.robot) == ("reach", str(urdf_arm))
        assert inv.task.actions["arm"].joints == URDF_JOINTS
    # The latest run of the task, found without run_dir, must be of the robot being built.
    from batonlab.cli.common import check_run_robot

    inv = build_invocation(["task=reach", f"log_root={tmp_path / 'logs'}"], play=True)
    with pytest.raises(CliError, match=f"trained on robot={urdf_arm}, this command builds the task's default robot"):
        check_run_robot(inv.top, run_dir)


def test_a_bag_of_the_urdf_arm_replays_on_the_urdf_arm(urdf_arm, tmp_path, capsys):
    """`play record=` names the robot file in each bag; replay rebuilds that robot. A bag whose robot is
    unknown or missing is refused: replaying it into arm6 would leave every logged joint unmatched."""
    from batonlab.cli.play import _recorder
    from batonlab.logs.bag_reader import BagError, open_bag
    from batonlab.logs.playback import playback_frames
    from batonlab.tasks.replay import replay_env_for
    from batonlab.rl.evaluate import evaluate

    inv = build_invocation(["task=reach", f"robot={urdf_arm}", f"record={tmp_path / 'bags'}"], play=True)
    inv.task.num_envs, inv.task.episode_length_s = 1, 0.4
    env = BatonEnv(inv.task)
    recorder = _recorder(inv, env, tmp_path, tmp_path / "model_0.pt")
    evaluate(env, lambda obs: 0.5 * torch.ones(1, env.num_actions), progress=False, step_callback=recorder)
    bag = recorder.close()[0]
    env.close()
    log = open_bag(bag)
    assert log.metadata["robot_file"] == str(urdf_arm)
    replay = replay_env_for(log)
    assert tuple(replay.action_manager.terms["arm"].joint_names) == URDF_JOINTS
    frames = playback_frames(log, replay, size=(32, 32), fps=10.0, effects=False)
    assert np.abs(frames[-1].astype(float) - frames[0]).mean() > 0.5, "the logged joints move the URDF arm"
    replay.close()
    del log.metadata["robot_file"]  # a bag that does not say: the task's default robot, arm6
    with pytest.raises(BagError, match="acts on joints the bag does not log"):
        replay_env_for(log)
    log.metadata["robot_file"] = str(tmp_path / "moved.yaml")
    with pytest.raises(BagError, match="moved.yaml, which does not exist here"):
        replay_env_for(log)
    # The command: the bag's robot by default, --robot over it.
    from batonlab.cli.main import main

    assert main(["replay", str(bag), "--mode", "open_loop"]) == 0
    assert main(["replay", str(bag), "--mode", "open_loop", "--robot", str(tmp_path / "moved.yaml")]) == 2
    assert "moved.yaml: no such file; expected a robot description YAML" in capsys.readouterr().err


# Slow: train, export, sim-to-sim.


SEEDS = range(1000, 1016)
"""Episode seeds of the play / ROS 2 comparison (as in test_deploy_sim2sim.py)."""


@pytest.mark.slow
def test_gripper_arm_reach_trains_to_its_bar_with_the_defaults_and_holds_it_over_ros(gripper_arm_reach_run, tmp_path):
    """`batonlab train task=reach robot=test_arm_gripper.yaml` with the defaults (a URDF arm whose TCP sits 10 cm
    past its hand, fingers held, one a mimic joint; trained in the background, `background_jobs`) trains until
    play success reaches the task's bar of 0.9 and says so; `batonlab export run_dir=…` rebuilds the robot from
    the run folder; over ROS 2 (sim_robot_node over the same robot ↔ policy_node, the held finger commanded too)
    the export reaches the bar on the same seeds."""
    from batonlab.cli import export
    from batonlab.cli.deploy import export_robot, run_sim_to_sim
    from batonlab.cli.policy_loading import load_trained
    from batonlab.deploy import load_manifest
    from ros.nodes import new_domain_id
    from ros.training import play_on_seeds

    result = gripper_arm_reach_run
    run_dir, robot, success = Path(result["run_dir"]), Path(result["robot"]), result["success_rate"]
    print(f"\n[reach] gripper arm, defaults: success {success:.3f} over {result['eval_episodes']} play episodes "
          f"after {result['iterations']} iterations, {result['env_steps']} env steps ({result['train_wall_s']:.0f} s of "
          f"training on one core), stopped by {result['stopped_by']}")
    assert result["stopped_by"] == "stop_at" and result["iterations"] < result["planned_iterations"]
    assert success >= 0.9

    export_dir = tmp_path / "exported"
    assert export.run(build_invocation([f"run_dir={run_dir}", f"export.out_dir={export_dir}"], play=True)) == 0
    manifest = load_manifest(export_dir)
    assert manifest.task == "reach" and tuple(manifest.joint_names) == URDF_JOINTS
    assert manifest.held_joints.names == ("finger_left",)

    inv = build_invocation([f"run_dir={run_dir}"], play=True)
    inv.task.num_envs = 1
    env, runner, _, _ = load_trained(inv)
    env.close()
    policy = runner.inference_policy()
    play = play_on_seeds("reach", policy, SEEDS, robot=str(robot)).successes
    summary = run_sim_to_sim(export_dir, "reach", seed=SEEDS[0], num_episodes=len(SEEDS), domain_id=new_domain_id(),
                             results_file=tmp_path / "sim_to_sim.json", timeout_s=600, robot=export_robot(manifest))
    assert summary is not None, "sim_robot_node wrote no results"
    episodes = summary["episodes"]
    assert [e["seed"] for e in episodes] == list(SEEDS)
    assert all(e["commands_received"] > 0 for e in episodes)
    ros = np.array([e["success"] for e in episodes])
    print(f"[reach] gripper arm over ROS 2: {ros.mean():.3f}, play on the same seeds: {play.mean():.3f} "
          f"(per seed ros={ros.astype(int).tolist()} play={play.astype(int).tolist()})")
    print(json.dumps({"final_distance_m": [round(e["final_distance"], 4) for e in episodes]}))
    assert play.mean() >= 0.9 and ros.mean() >= 0.9
    assert abs(ros.mean() - play.mean()) <= 0.10
