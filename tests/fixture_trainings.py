# SPDX-License-Identifier: BSD-3-Clause
"""The trainings behind the session fixtures, in one table: conftest.py trains them, the learning tests
assert on their budgets, and `bench/suite_cost.py` times them. `JOBS` are the session fixtures' other
long setups, run by the same background process after the trainings they need.

Each is `batonlab train task=<task> env.num_envs=<num_envs> max_iterations=<iterations> seed=0 <extra>`.
What each budget gives (success, survival, wall time) is in docs/TESTING.md.
"""

from __future__ import annotations

from dataclasses import dataclass

NUM_STEPS_PER_ENV = 24
"""Every fixture trains with its task's rollout length (all of them 24 steps)."""


@dataclass(frozen=True)
class FixtureTraining:
    task: str
    num_envs: int
    iterations: int
    extra: tuple[str, ...] = ()
    """More `batonlab train` overrides."""
    export: bool = True
    """Exported after training (`batonlab export`); a teacher reading privileged observations is not."""

    @property
    def overrides(self) -> list[str]:
        return [f"env.num_envs={self.num_envs}", f"max_iterations={self.iterations}", *self.extra]

    @property
    def env_steps(self) -> int:
        return self.num_envs * NUM_STEPS_PER_ENV * self.iterations


TEACHER_LEVEL = 1.0
"""λ of arm_lift's teacher: trained with full privileges, without the schedule that would lower them."""

TRAININGS = {
    "arm_lift_teacher": FixtureTraining("arm_lift", num_envs=512, iterations=50, export=False,
                                        extra=(f"env.privilege_level={TEACHER_LEVEL}", "~env.curriculum.privilege")),
    "wl_balance_policy": FixtureTraining("wl_balance", num_envs=256, iterations=64),
    "arm_reach_policy": FixtureTraining("arm_reach", num_envs=1024, iterations=80),
    "wl_loco_manip_policy": FixtureTraining("wl_loco_manip_ik", num_envs=128, iterations=200,
                                            extra=("agent.algorithm.num_learning_epochs=3",)),
}
"""Session fixture name → its training, cheapest first (the order of the background trainer). arm_reach keeps
its original budget: the progress encoder ranks its episodes at the bar only with that policy (docs/TESTING.md)."""


@dataclass(frozen=True)
class FixtureJob:
    """A session fixture's setup that is not one `batonlab train` row: `function(out_dir, runs)` of a module in
    tests/ (`"module:function"`), called by the background process once the trainings it `needs` are done, with
    their `fixture_trainer.BackgroundRun`s by name; returns a JSON-able dict, which the fixture reads back."""

    target: str
    needs: tuple[str, ...] = ()


JOBS = {
    "gripper_arm_reach_run": FixtureJob("background_jobs:train_gripper_arm_reach"),
    "progress_encoders": FixtureJob("background_jobs:train_progress_encoders",
                                    needs=("arm_reach_policy", "arm_lift_teacher")),
}
"""Session fixture name → its job, in the background process's order (after every training)."""


def with_needs(names: list[str]) -> list[str]:
    """`names` and what their jobs need, in background order: `TRAININGS` order, then `JOBS` order."""
    wanted = set(names) | {need for name in names if name in JOBS for need in JOBS[name].needs}
    unknown = sorted(wanted - set(TRAININGS) - set(JOBS))
    if unknown:
        raise KeyError(f"no fixture training or job named {unknown}")
    return [name for name in [*TRAININGS, *JOBS] if name in wanted]
