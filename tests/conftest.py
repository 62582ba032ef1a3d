# SPDX-License-Identifier: BSD-3-Clause
"""Shared fixtures: small arm_reach envs and inline MJCF models."""

from __future__ import annotations

import mujoco
import pytest
import torch
from batonlab.env.env import BatonEnv
from batonlab.tasks import make_task_cfg

PENDULUM_XML = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <light pos="0 0 2"/>
    <body name="pole" pos="0 0 1">
      <joint name="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03" mass="1"/>
      <site name="tip" pos="0 0 -0.5"/>
    </body>
  </worldbody>
  <actuator><position name="hinge" joint="hinge" kp="20" kv="1"/></actuator>
  <sensor><framepos name="tip_pos" objtype="site" objname="tip"/><jointpos name="hinge_pos" joint="hinge"/></sensor>
</mujoco>
"""


@pytest.fixture
def pendulum_model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(PENDULUM_XML)


def make_reach_env(num_envs: int = 8, seed: int = 0, play: bool = False, **overrides) -> BatonEnv:
    cfg = make_task_cfg("arm_reach", play=play)
    cfg.num_envs = num_envs
    cfg.seed = seed
    for key, value in overrides.items():
        setattr(cfg, key, value)
    return BatonEnv(cfg)


@pytest.fixture
def reach_env():
    env = make_reach_env()
    yield env
    env.close()


def pytest_collection_modifyitems(config, items):
    """GPU tests skip cleanly on machines without CUDA."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def arm_reach_policy(tmp_path_factory):
    """arm_reach trained from scratch (1024 envs × 24 steps × 80 iterations, ~2 min on 2 idle cores) and exported, once per session.

    Returns `ros.training.TrainedPolicy` (export folder + the torch inference policy `play` runs).
    """
    from ros.training import train_and_export

    return train_and_export("arm_reach", tmp_path_factory.mktemp("arm_reach_policy") / "exported", num_envs=1024,
                            iterations=80)


@pytest.fixture(scope="session")
def wl_balance_policy(tmp_path_factory):
    """wl_balance (stowed arm) trained from scratch (512 envs × 24 steps × 64 iterations, ~3 min on 2 idle cores,
    one learner thread) and exported, once per session: the learning test and the sim-to-sim tests share it.

    Returns `ros.training.TrainedPolicy`.
    """
    from ros.training import train_and_export

    return train_and_export("wl_balance", tmp_path_factory.mktemp("wl_balance_policy") / "exported", num_envs=512,
                            iterations=64, learner_threads=1)


@pytest.fixture(scope="session")
def wl_loco_manip_policy(tmp_path_factory):
    """wl_loco_manip trained from scratch with its defaults (P3O, the three curricula; 512 envs × 24 steps
    × 200 iterations = 2.46M env steps, about 6 min on 2 idle cores, one learner thread) and exported, once
    per session: the learning test and the sim-to-sim test share it. The base learns to balance first
    (about 1.5M steps), the arm after it: a smaller budget leaves a robot that still falls.

    Returns `ros.training.TrainedPolicy`.
    """
    from ros.training import train_and_export

    return train_and_export("wl_loco_manip", tmp_path_factory.mktemp("wl_loco_manip_policy") / "exported",
                            num_envs=512, iterations=200, learner_threads=1)


@pytest.fixture(scope="session")
def arm_lift_teacher(tmp_path_factory):
    """arm_lift's teacher (actor reads the privileged group) trained from scratch at λ = 1 without the
    schedule (512 envs × 24 steps × 50 iterations = 0.61M env steps, about 1 min on 2 idle cores),
    once per session. Returns `privileged_training.TrainedTeacher` (run folder, checkpoint, inference policy).
    """
    from privileged_training import train_teacher

    return train_teacher("arm_lift", tmp_path_factory.mktemp("arm_lift_teacher"), num_envs=512, iterations=50,
                         privilege_level=1.0)
