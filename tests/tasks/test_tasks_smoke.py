# SPDX-License-Identifier: BSD-3-Clause
"""Every registered task builds, steps, exports and deploys: a task that breaks shows up here first.

A task whose default actor reads privileged observations (a teacher, e.g. arm_lift) is exported
with an actor of its deployable groups, as a distilled student would be; privileged action dims are
not exported.

"Deploys" means the robot side accepts the export: `batonlab.deploy` builds its pipeline (every
observation term has a numpy twin, every sensor a source), the dry run reaches RUN with finite targets
inside the limits, and the twins rebuild the training observation from robot-style inputs (joint
states by name, sensor readings, commands, the last action) to 1e-5 on states of the simulator.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from batonlab.observations.sensors import sensor_pose
from batonlab.deploy import load_manifest
from batonlab.deploy.dry_run import dry_run
from batonlab.deploy.observation import ObservationBuilder, RobotInputs
from batonlab.deploy.safety import State
from batonlab.env.env import BatonEnv
from batonlab.export.onnx import export
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.export.deployable import ExportError
from batonlab.tasks import list_tasks, make_agent_cfg, make_task_cfg
from batonlab.actions.command_layer import WholeBodyPolicyAction
from whole_body import (command_recording, is_hierarchical, plays_recorded_commands, untrained_export,
                        with_command_recording, with_lower_level)


@pytest.fixture(scope="module")
def whole_body_export(tmp_path_factory) -> str:
    """An untrained whole-body policy's export: the lower level the hierarchical tasks build with."""
    return untrained_export(tmp_path_factory.mktemp("whole_body"))


@pytest.fixture(scope="module")
def upper_commands(tmp_path_factory) -> Path:
    """A short recording of upper-level commands, for the tasks that train on them."""
    return command_recording(tmp_path_factory.mktemp("upper_commands") / "commands.npz")


@pytest.mark.parametrize("task", [t.name for t in list_tasks()])
def test_task_builds_steps_and_exports(task, tmp_path, request):
    cfg = make_task_cfg(task)
    cfg.num_envs = 2
    hierarchical = is_hierarchical(cfg)
    if hierarchical:
        with_lower_level(cfg, request.getfixturevalue("whole_body_export"))
    if plays_recorded_commands(cfg):
        with_command_recording(cfg, request.getfixturevalue("upper_commands"))
    env = BatonEnv(cfg)
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        obs, reward, terminated, truncated, extras = env.step(torch.randn(2, env.num_actions, generator=generator))
        assert all(torch.isfinite(v).all() for v in obs.values()), f"{task}: non-finite observation"
        assert reward.shape == (2,) and torch.isfinite(reward).all(), f"{task}: bad reward {reward}"
        assert terminated.dtype == torch.bool and truncated.dtype == torch.bool
    scripted = hierarchical and not any(issubclass(t.cls, WholeBodyPolicyAction) for t in cfg.actions.values())
    if scripted:  # a simulated stand-in for the lower level: no robot has it
        runner = BatonRunner(RslRlVecEnv(env), make_agent_cfg(task), log_dir=None)
        with pytest.raises(ExportError, match="simulated stand-in"):
            export(env, runner.inference_policy(), tmp_path, task)
        env.close()
        return
    env.close()

    # The exported policy (untrained) reads the play observation and returns one action per joint (per command
    # of a command layer).
    play_cfg = make_task_cfg(task, play=True)
    play_cfg.num_envs = 1
    if hierarchical:
        with_lower_level(play_cfg, request.getfixturevalue("whole_body_export"))
    if plays_recorded_commands(play_cfg):
        with_command_recording(play_cfg, request.getfixturevalue("upper_commands"))
    play_env = BatonEnv(play_cfg)
    agent = make_agent_cfg(task)
    agent.obs_groups["actor"] = [g for g in agent.obs_groups["actor"] if not play_cfg.observations[g].privileged]
    runner = BatonRunner(RslRlVecEnv(play_env), agent, log_dir=None)
    policy = runner.inference_policy()
    onnx_path, _ = export(play_env, policy, tmp_path, task)
    manifest = load_manifest(tmp_path)
    if hierarchical:  # both levels for the robot: the upper level's export, the lower level's in lower/
        assert manifest.levels is not None and (tmp_path / "lower" / "policy.onnx").is_file()
        assert dry_run(manifest).state is State.RUN
        manifest = manifest.levels[0]
    obs = play_env.obs[manifest.obs_group][0].numpy()
    robot_actions = play_env.num_actions - play_env.action_manager.privileged_dim
    assert manifest.task == task and manifest.obs_dim == obs.shape[0] and manifest.action_dim == robot_actions
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    action = session.run([manifest.output_name], {manifest.input_name: obs[None].astype(np.float32)})[0]
    with torch.inference_mode():
        expected = policy(play_env.obs)[0, :robot_actions].numpy()
    np.testing.assert_allclose(action[0], expected, atol=1e-5)

    # The robot side: the pipeline builds and runs, and its observation is training's.
    if not hierarchical:
        assert dry_run(manifest).state is State.RUN
    assert_robot_observation_matches(play_env, manifest, steps=30)
    play_env.close()


def assert_robot_observation_matches(env: BatonEnv, manifest, steps: int) -> None:
    """Step `env` (one world) with random actions and compare, at every step, its policy observation
    with the one `batonlab.deploy` builds from what a robot would send."""
    builder = ObservationBuilder(manifest)
    ctx = builder.ctx
    # A pose input (`sensor_pose`, e.g. a perception node's object_pose) is what the sim computes from its two sensors.
    poses = {t.params["name"]: t.params for t in manifest.obs_terms if t.func == "batonlab.observations.sensors:sensor_pose"}
    qadr, dadr = env.scene.qpos_adr(ctx.joints), env.scene.dof_adr(ctx.joints)
    generator = torch.Generator().manual_seed(1)
    env.reset()
    worst = 0.0
    for step in range(steps):
        inputs = RobotInputs(
            joint_pos=env.sim.qpos[0, qadr].double().numpy(), joint_vel=env.sim.qvel[0, dadr].double().numpy(),
            vectors={**{name: (sensor_pose(env, **poses[name]) if name in poses else env.sim.sensor(name))[0]
                        .double().numpy() for name in ctx.sensors},
                     **{name: env.command_manager.command(name)[0].double().numpy() for name in ctx.commands}},
            last_action=env.action_manager.action[0].numpy(),
        )
        robot = builder.compute(inputs)
        sim = env.obs[manifest.obs_group][0].numpy()
        worst = max(worst, float(np.abs(robot - sim).max()))
        np.testing.assert_allclose(robot, sim, atol=1e-5, err_msg=f"step {step}: the robot-side observation differs")
        _, _, terminated, truncated, _ = env.step(torch.randn(1, env.num_actions, generator=generator))
        if bool(terminated[0] | truncated[0]):
            builder.reset()  # a new episode: no history, as after the env's reset
    print(f"\n[robot obs] {manifest.task}: max |robot - sim| = {worst:.2e} over {steps} steps")
