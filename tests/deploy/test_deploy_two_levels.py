# SPDX-License-Identifier: BSD-3-Clause
"""A two-level policy on the robot side: `wl_baton`'s upper level over a whole-body policy's export.

The export holds both levels (the lower level's export copied into `lower/`); `load_manifest` joins them; the
runtime's two control steps compute, from what a robot sends, the upper observation, the lower level's commands, its
observation and its actions that training computed (`WholeBodyPolicyAction`) on the same states; broken exports are
refused with the reason, and a fault at either level stops the robot.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from batonlab.deploy import DeployRuntime, ManifestError, SafetyCfg, State, load_manifest, parse_manifest
from batonlab.deploy.control import TwoLevels
from batonlab.deploy.manifest import sha256_file
from batonlab.deploy.observation import ObsContext, RobotInputs
from batonlab.env.env import BatonEnv
from batonlab.observations.sensors import sensor_pose
from batonlab.robots.arm6 import GRIPPER_JOINT
from batonlab.tasks import make_task_cfg
from whole_body import untrained_export, untrained_two_level_export, with_lower_level

TASK = "wl_baton"


@pytest.fixture(scope="module")
def two_levels(tmp_path_factory):
    """(play env of `TASK` over an untrained whole-body export, the export folder of an untrained upper level)."""
    lower = untrained_export(tmp_path_factory.mktemp("whole_body"))
    out = untrained_two_level_export(tmp_path_factory.mktemp("export") / "exported", lower, TASK)
    cfg = with_lower_level(make_task_cfg(TASK, play=True), lower)
    cfg.num_envs = 1
    cfg.events.pop("action_delay")  # the robot's own latency: the runtime adds none
    env = BatonEnv(cfg)
    yield env, out, lower
    env.close()


def test_the_export_holds_both_levels_and_loads_joined(two_levels):
    env, out, lower = two_levels
    for name in ("manifest.json", "policy.onnx"):
        assert sha256_file(out / "lower" / name) == sha256_file(f"{lower}/{name}"), f"lower/{name} is the export, as is"
    manifest = load_manifest(out)
    upper, whole_body = manifest.levels
    assert upper.task == TASK and whole_body.task == "wl_loco_manip_pose"
    assert manifest.joint_names == (*whole_body.joint_names, GRIPPER_JOINT)
    assert not set(manifest.held_joints.names) & set(manifest.joint_names)
    # The two commands the layer gives are not inputs; the baton and holder sensors are.
    assert "base_velocity" not in manifest.commands and "ee_target" not in manifest.commands
    assert {"baton_pos_b", "baton_holder_pos_b"} <= set(manifest.sensors)
    layer = json.loads((out / "manifest.json").read_text())["actions"][0]
    assert layer["type"] == "whole_body_commands" and layer["joints"] == [] and layer["command_layer"]["lower"] == "lower"
    stowed = env.command_manager.terms["ee_target"].stowed_command.tolist()
    assert layer["command_layer"]["stowed"] == pytest.approx(stowed)
    assert manifest.action_dim == whole_body.action_dim + 1 and upper.action_dim == 9


def test_the_robot_computes_both_levels_as_training_did(two_levels):
    """On 40 states of the simulator, from joint states and sensors as a robot sends them."""
    env, out, _ = two_levels
    manifest = load_manifest(out)
    upper, lower = manifest.levels
    ctx = ObsContext(manifest)
    control = TwoLevels(manifest, ctx)
    layer = env.action_manager.terms["commands"]
    gripper = env.action_manager.terms["gripper"]
    poses = {t.params["name"]: t.params for level in manifest.levels for t in level.obs_terms
             if t.func == "batonlab.observations.sensors:sensor_pose"}
    qadr, dadr = env.scene.qpos_adr(ctx.joints), env.scene.dof_adr(ctx.joints)
    env.reset()
    resets = 0
    worst = {"upper obs": 0.0, "commands": 0.0, "lower actions": 0.0, "gripper target": 0.0}
    for step in range(40):
        inputs = RobotInputs(
            joint_pos=env.sim.qpos[0, qadr].double().numpy(), joint_vel=env.sim.qvel[0, dadr].double().numpy(),
            vectors={name: (sensor_pose(env, **poses[name]) if name in poses else env.sim.sensor(name))[0].double().numpy()
                     for name in ctx.sensors},
            last_action=np.zeros(manifest.action_dim, dtype=np.float32))
        q = inputs.joint_pos[: len(manifest.joint_names)]
        obs, raw, targets = control.act(inputs, q)
        upper_raw = control.upper_last.copy()
        sim_obs = env.obs["policy"][0].numpy()
        _, _, terminated, truncated, _ = env.step(torch.as_tensor(upper_raw)[None])
        sim = {"upper obs": (obs[: upper.obs_dim], sim_obs),
               "commands": (np.concatenate([control.commands["base_velocity"], control.commands["ee_target"]]),
                            torch.cat([env.command_manager.command(n)[0] for n in ("base_velocity", "ee_target")]).numpy()),
               "lower actions": (raw[: lower.action_dim], layer.lower.action[0].numpy()),
               "gripper target": (targets[-1:], gripper.processed_actions[0].numpy())}
        if bool(terminated[0] | truncated[0]):  # the env reset its commands and the lower level's actions
            control.reset()  # a new episode: no history and no last actions, as after the env's reset
            resets += 1
            continue
        for key, (robot, training) in sim.items():
            worst[key] = max(worst[key], float(np.abs(robot - training).max()))
    print(f"\n[two levels] max |robot - training| over 40 steps ({resets} resets): {worst}")
    assert worst["upper obs"] < 1e-5 and worst["commands"] < 1e-5 and worst["gripper target"] < 1e-5
    assert worst["lower actions"] < 1e-4


def resting_inputs(runtime: DeployRuntime, manifest, now: float, **overrides) -> None:
    joints = list(runtime.ctx.joints)
    runtime.set_joint_state(joints, [manifest.default_joint_pos[j] for j in joints], np.zeros(len(joints)), now)
    for name in runtime.required_inputs[1:]:
        runtime.set_vector(name, overrides.get(name, manifest.sensors[name].at_rest()), now)


def test_the_runtime_runs_both_levels_and_stops_on_a_fault_at_either(two_levels):
    _, out, _ = two_levels
    manifest = load_manifest(out)
    runtime = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, input_rate_samples=0))
    assert runtime.joint_names == (*manifest.joint_names, *manifest.held_joints.names)
    for tick in range(3):
        resting_inputs(runtime, manifest, tick * 0.02)
        result = runtime.step(tick * 0.02)
    assert result.state is State.RUN and np.isfinite(result.command).all()
    assert result.observation.shape == (manifest.obs_dim,) and result.raw_action.shape == (manifest.action_dim,)
    # A baton estimate that is not a number stops the robot.
    resting_inputs(runtime, manifest, 0.06, baton_pos_b=np.array([np.nan, 0.0, 0.4]))
    assert runtime.step(0.06).state is State.STOP

    # Either level outputting NaN stops the robot: no NaN reaches a command, and what the step reports (and a bag
    # records) keeps the joint-level widths.
    upper, lower = manifest.levels
    for nan_level in ("upper", "lower"):
        policies = [lambda obs: np.zeros(upper.action_dim), lambda obs: np.zeros(lower.action_dim)]
        dims = (upper.action_dim, lower.action_dim)
        k = 0 if nan_level == "upper" else 1
        policies[k] = lambda obs, dim=dims[k]: np.full(dim, np.nan)
        broken = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, input_rate_samples=0), policy=tuple(policies))
        for tick in range(3):
            resting_inputs(broken, manifest, tick * 0.02)
            result = broken.step(tick * 0.02)
            if result.raw_action is not None:
                assert result.raw_action.shape == (manifest.action_dim,) and result.observation.shape == (manifest.obs_dim,)
        assert result.state is State.STOP and "non-finite policy output" in result.reason, nan_level
        assert result.command is None or np.isfinite(result.command).all()


def test_broken_two_level_exports_are_refused_with_the_reason(two_levels, tmp_path):
    _, out, _ = two_levels
    data = json.loads((out / "manifest.json").read_text())
    with pytest.raises(ManifestError, match="upper level of a two-level policy"):
        DeployRuntime(parse_manifest(data), policy=(lambda o: o, lambda o: o))
    data["actions"][0]["command_layer"]["lower"] = "../elsewhere"
    with pytest.raises(ManifestError, match="inside the export folder"):
        parse_manifest(data)

    # Anchors must be the upper level's perceived positions or poses.
    bad = json.loads((out / "manifest.json").read_text())
    bad["actions"][0]["command_layer"]["anchor"] = 3
    with pytest.raises(ManifestError, match="anchor' should be a non-empty string or absent, got 3"):
        parse_manifest(bad)
    for key, name, message in (("anchor", "nope", "anchor 'nope' is not an upper observation term; they are"),
                               ("anchor", "gripper", "anchor 'gripper' is 1 wide; it must be 3 or 7 wide"),
                               ("orientation_anchor", "baton_pos", "anchor 'baton_pos' is 3 wide; it must be 7 wide")):
        anchored = tmp_path / f"{key}_{name}"
        shutil.copytree(out, anchored)
        upper = json.loads((out / "manifest.json").read_text())
        upper["actions"][0]["command_layer"][key] = name
        (anchored / "manifest.json").write_text(json.dumps(upper))
        with pytest.raises(ManifestError, match=message):
            load_manifest(anchored)

    missing = tmp_path / "missing"
    shutil.copytree(out, missing)
    shutil.rmtree(missing / "lower")
    with pytest.raises(ManifestError, match=r"its lower level .*manifest not found"):
        load_manifest(missing)

    # A lower level that has no tool command (another robot's whole-body policy).
    other = tmp_path / "other"
    shutil.copytree(out, other)
    lower_manifest = json.loads((other / "lower" / "manifest.json").read_text())
    lower_manifest["commands"].pop("ee_target")
    lower_manifest["observations"]["terms"] = [t for t in lower_manifest["observations"]["terms"]
                                               if t["params"].get("command") != "ee_target"]
    for term in lower_manifest["actions"]:
        term.pop("ik", None)
        term["type"] = "joint_position" if term["type"] == "ik_residual" else term["type"]
    (other / "lower" / "manifest.json").write_text(json.dumps(lower_manifest))
    with pytest.raises(ManifestError, match="drives command 'ee_target', which the lower level's manifest"):
        load_manifest(other)
