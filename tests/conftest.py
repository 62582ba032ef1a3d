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


def pytest_terminal_summary(terminalreporter):
    """What the session's trainings cost (`cli_training.TRAINED`), under pytest's durations."""
    from cli_training import TRAINED

    if TRAINED:
        terminalreporter.section("trainings of this session")
        for run in TRAINED:
            terminalreporter.write_line(f"{run.task:16s} {run.env_steps / 1e6:5.2f}M env steps in {run.wall_s:6.1f} s "
                                        f"({run.env_steps / run.wall_s:6.0f} env steps/s)  {run.run_dir}")


@pytest.fixture(scope="session")
def arm_reach_policy(tmp_path_factory):
    """arm_reach trained from scratch by `batonlab train` (`fixture_trainings.TRAININGS`) and exported, once per
    session. Returns `ros.training.TrainedPolicy` (export folder + the torch inference policy `play` runs)."""
    from fixture_trainings import TRAININGS
    from ros.training import train_and_export

    training = TRAININGS["arm_reach_policy"]
    return train_and_export(training.task, tmp_path_factory.mktemp("arm_reach_policy"), *training.overrides)


@pytest.fixture(scope="session")
def wl_balance_policy(tmp_path_factory):
    """wl_balance (stowed arm) trained from scratch by `batonlab train` and exported, once per session: the
    learning test and the sim-to-sim tests share it. Returns `ros.training.TrainedPolicy`."""
    from fixture_trainings import TRAININGS
    from ros.training import train_and_export

    training = TRAININGS["wl_balance_policy"]
    return train_and_export(training.task, tmp_path_factory.mktemp("wl_balance_policy"), *training.overrides)


@pytest.fixture(scope="session")
def wl_loco_manip_policy(tmp_path_factory):
    """wl_loco_manip trained from scratch by `batonlab train` with its defaults (P3O, the three curricula) and
    exported, once per session: the learning test and the sim-to-sim test share it.
    Returns `ros.training.TrainedPolicy`."""
    from fixture_trainings import TRAININGS
    from ros.training import train_and_export

    training = TRAININGS["wl_loco_manip_policy"]
    return train_and_export(training.task, tmp_path_factory.mktemp("wl_loco_manip_policy"), *training.overrides)


@pytest.fixture(scope="session")
def arm_lift_teacher(tmp_path_factory):
    """arm_lift's teacher (actor reads the privileged group) trained from scratch by `batonlab train` at λ = 1
    without the schedule, once per session.
    Returns `privileged_training.TrainedTeacher` (run folder, checkpoint, inference policy)."""
    from fixture_trainings import TRAININGS
    from privileged_training import train_teacher

    training = TRAININGS["arm_lift_teacher"]
    return train_teacher(training.task, tmp_path_factory.mktemp("arm_lift_teacher"), *training.overrides,
                         privilege_level=1.0)
