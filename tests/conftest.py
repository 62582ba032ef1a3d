# SPDX-License-Identifier: BSD-3-Clause
"""Shared fixtures: small arm_reach envs and inline MJCF models."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mujoco
import pytest
import torch
from batonlab.env.cfg import TaskCfg
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


def make_env(task: str, num_envs: int = 8, seed: int | None = None, play: bool = False, robot=None,
             edit: Callable[[TaskCfg], None] | None = None, **overrides) -> BatonEnv:
    """The one env factory of the tests: `task`'s config with `num_envs`, `seed` (None: the task's),
    top-level `overrides` and an optional `edit(cfg)` applied, built on the default backend."""
    cfg = make_task_cfg(task, play=play, robot=None if robot is None else str(robot))
    cfg.num_envs = num_envs
    if seed is not None:
        cfg.seed = seed
    for key, value in overrides.items():
        setattr(cfg, key, value)
    if edit is not None:
        edit(cfg)
    return BatonEnv(cfg)


def make_reach_env(num_envs: int = 8, seed: int = 0, play: bool = False, **overrides) -> BatonEnv:
    """arm_reach through `make_env`."""
    return make_env("arm_reach", num_envs, seed, play, **overrides)


@pytest.fixture
def reach_env():
    env = make_reach_env()
    yield env
    env.close()


@pytest.hookimpl(trylast=True)  # after `-m`/`-k` deselected what does not run
def pytest_collection_modifyitems(config, items):
    """GPU tests skip cleanly on machines without CUDA; the trained fixtures' trainings start in the
    background (`fixture_trainer`), and the tests that need them run last, those of the cheapest first."""
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
    from fixture_trainings import JOBS, TRAININGS

    order = [*TRAININGS, *JOBS]
    runnable = [item for item in items if not item.get_closest_marker("skip") and "gpu" not in item.keywords]
    needed = sorted({k for item in runnable for k in _needed(item, order)})
    items.sort(key=lambda item: max(_needed(item, order), default=-1))  # stable: pytest's order within each group
    if needed and not config.option.collectonly:
        import tempfile

        from fixture_trainer import FixtureTrainer

        _TRAINER["trainer"] = FixtureTrainer(Path(tempfile.mkdtemp(prefix="batonlab-fixtures-")),
                                             [order[k] for k in needed])


def _needed(item, order: list[str]) -> list[int]:
    """Indices in `order` of the trained fixtures `item` uses."""
    return [order.index(name) for name in getattr(item, "fixturenames", ()) if name in order]


_TRAINER: dict = {}
"""The session's background trainer (`fixture_trainer.FixtureTrainer`), if any fixture training was needed."""


def pytest_unconfigure(config):
    """No trainer outlives the session (Ctrl-C included)."""
    for trainer in [_TRAINER.pop("trainer", None), *_TRAINER.pop("extra", [])]:
        if trainer is not None:
            trainer.close()


def pytest_terminal_summary(terminalreporter):
    """What the session's fixture trainings cost, under pytest's durations."""
    done = {}
    for trainer in [_TRAINER.get("trainer"), *_TRAINER.get("extra", [])]:
        done.update(trainer.finished() if trainer is not None else {})
    if done:
        terminalreporter.section("fixture trainings and jobs of this session (background, one core)")
        for name, run in done.items():
            if isinstance(run, float):
                terminalreporter.write_line(f"{name:22s} job in {run:6.1f} s")
            else:
                terminalreporter.write_line(f"{name:22s} {run.env_steps / 1e6:5.2f}M env steps in {run.wall_s:6.1f} s "
                                            f"({run.env_steps / run.wall_s:6.0f} env steps/s)")


def _background(name: str):
    """The background process that has fixture `name`; one started for it now if it was not scheduled."""
    from fixture_trainer import FixtureTrainer

    trainer = _TRAINER.get("trainer")
    if trainer is None or name not in trainer.names:
        import tempfile

        trainer = FixtureTrainer(Path(tempfile.mkdtemp(prefix=f"batonlab-{name}-")), [name])
        _TRAINER.setdefault("extra", []).append(trainer)
    return trainer


def _trained(name: str):
    """The background training of fixture `name`, once done."""
    return _background(name).result(name)


def _trained_policy(name: str):
    from cli_training import load_policy
    from fixture_trainings import TRAININGS
    from ros.training import TrainedPolicy

    run = _trained(name)
    return TrainedPolicy(TRAININGS[name].task, run.run_dir, run.export_dir, load_policy(run.run_dir),
                         run.train_success_rate, run.env_steps, run.wall_s)


@pytest.fixture(scope="session")
def arm_reach_policy():
    """arm_reach trained from scratch by `batonlab train` (`fixture_trainings.TRAININGS`) and exported, once per
    session. Returns `ros.training.TrainedPolicy` (export folder + the torch inference policy `play` runs)."""
    return _trained_policy("arm_reach_policy")


@pytest.fixture(scope="session")
def wl_balance_policy():
    """wl_balance (stowed arm) trained from scratch and exported, once per session: the learning test and the
    sim-to-sim tests share it. Returns `ros.training.TrainedPolicy`."""
    return _trained_policy("wl_balance_policy")


@pytest.fixture(scope="session")
def wl_loco_manip_policy():
    """wl_loco_manip_ik trained from scratch (P3O, the three curricula; `fixture_trainings.TRAININGS`) and exported,
    once per session: the learning test and the sim-to-sim test share it. Returns `ros.training.TrainedPolicy`."""
    return _trained_policy("wl_loco_manip_policy")


@pytest.fixture(scope="session")
def arm_lift_teacher():
    """arm_lift's teacher (actor reads the privileged group) trained from scratch at λ = 1 without the schedule,
    once per session. Returns `privileged_training.TrainedTeacher` (run folder, checkpoint, inference policy)."""
    from cli_training import load_policy
    from fixture_trainings import TEACHER_LEVEL
    from privileged_training import TrainedTeacher

    run = _trained("arm_lift_teacher")
    return TrainedTeacher("arm_lift", run.run_dir, run.checkpoint, load_policy(run.run_dir), TEACHER_LEVEL,
                          run.env_steps)


@pytest.fixture(scope="session")
def gripper_arm_reach_run():
    """`batonlab train task=reach robot=<URDF gripper arm>` with the defaults, run in the background
    (`background_jobs.train_gripper_arm_reach`). Returns its dict: run folder, robot file, closing evaluation."""
    return _background("gripper_arm_reach_run").job_result("gripper_arm_reach_run")


@pytest.fixture(scope="session")
def progress_encoders():
    """One progress encoder per task (arm_reach, arm_lift) trained on rendered rollouts of the session's policies,
    a demo and held-out episodes each, made in the background (`background_jobs.train_progress_encoders`)."""
    return _background("progress_encoders").job_result("progress_encoders")
