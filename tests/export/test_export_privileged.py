# SPDX-License-Identifier: BSD-3-Clause
"""Privileged inputs and outputs never reach an export.

An arm_lift variant whose policy also commands a virtual force on the cube (`VirtualForceAction`,
three privileged action dims after the seven joint actions) exports only the joint actions, and a
policy reading the privileged observation group is refused with the way out (distil a student).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

from batonlab.observations.proprioception import last_action
from batonlab.deploy import load_manifest
from batonlab.deploy.dry_run import dry_run
from batonlab.deploy.safety import State
from batonlab.env.cfg import ActionTermCfg
from batonlab.env.env import BatonEnv
from batonlab.privileges.virtual_forces import VirtualForceAction
from batonlab.export.deployable import ExportError
from batonlab.export.onnx import export
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg, make_task_cfg


def _virtual_force_env() -> BatonEnv:
    """arm_lift's play variant with a privileged virtual-force action term appended last."""
    cfg = make_task_cfg("arm_lift", play=True)
    cfg.num_envs = 2
    cfg.actions["virtual_force"] = ActionTermCfg(cls=VirtualForceAction, joints=(), params={"body": "object", "max_force": 5.0})
    return BatonEnv(cfg)


def _runner(env: BatonEnv, actor: list[str]) -> BatonRunner:
    agent = make_agent_cfg("arm_lift")
    agent.obs_groups = {"actor": actor, "critic": ["policy", "privileged"]}
    return BatonRunner(RslRlVecEnv(env), agent)


def test_virtual_force_outputs_are_cut_from_the_export(tmp_path):
    torch.manual_seed(0)
    env = _virtual_force_env()
    assert env.num_actions == 10 and env.action_manager.privileged_dim == 3
    policy = _runner(env, ["policy"]).inference_policy()
    onnx_path, _ = export(env, policy, tmp_path, "arm_lift")

    manifest = load_manifest(tmp_path)
    assert manifest.action_dim == 7 and [a.name for a in manifest.actions] == ["arm", "gripper"]
    assert all(a.type != "virtual_force" for a in manifest.actions)
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    assert session.get_outputs()[0].shape[1] == 7
    obs = env.obs
    (action,) = session.run([manifest.output_name], {manifest.input_name: obs["policy"].numpy()})
    with torch.inference_mode():
        full = policy(obs).numpy()
    assert action.shape == (2, 7) and full.shape == (2, 10)
    np.testing.assert_allclose(action, full[:, :7], atol=1e-5)  # the deployable outputs, unchanged
    assert dry_run(manifest).state is State.RUN  # and the robot side runs it
    env.close()


def test_privileged_inputs_are_refused(tmp_path):
    env = _virtual_force_env()
    with pytest.raises(ExportError, match=r"privileged observation group\(s\) \['privileged'\].*"
                                          r"agent.algorithm.class_name=Distillation teacher=RUN_DIR"):
        export(env, _runner(env, ["policy", "privileged"]).inference_policy(), tmp_path / "teacher", "arm_lift")
    with pytest.raises(ExportError, match=r"exactly one"):
        export(env, _runner(env, ["policy", "policy"]).inference_policy(), tmp_path / "two", "arm_lift")
    env.close()
    assert not any(tmp_path.iterdir())  # nothing written


def test_last_action_holds_only_the_deployable_dims():
    """A robot knows the actions it executed: the policy's `last_action` input never carries virtual forces."""
    env = _virtual_force_env()
    action = torch.arange(10, dtype=torch.float32).expand(2, 10)
    env.step(action)
    width = sum(t.width for t in env.observation_manager.layout["policy"] if t.name == "last_action")
    assert width == 7
    assert torch.equal(last_action(env), action[:, :7])
    env.close()
