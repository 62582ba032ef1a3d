# SPDX-License-Identifier: BSD-3-Clause
"""The session fixtures' trainings, run ahead of the tests that need them in one background process.

pytest runs one test at a time, which leaves one of two cores mostly idle (a ROS test waits on the wall
clock, a CLI test on one subprocess). conftest.py starts this module as a child process at the start of
the session with the trainings its selected tests need, in `TRAININGS` order, and runs the tests that
need none first; a fixture then waits only for what is not done yet. The child trains exactly as the
fixture would (`batonlab train`'s own entry, then `batonlab export`) on one physics thread and one torch
thread, at a lower priority (nice 10), so that the tests in front keep the cores they ask for.

    python tests/fixture_trainer.py OUT_DIR NAME [NAME ...]

writes OUT_DIR/NAME/ (logs/, exported/) and, when a training is done, OUT_DIR/NAME.json (run folder,
env steps, wall time). A job of `fixture_trainings.JOBS` (a fixture's other long setup) runs after the
trainings and writes what it returns, with its wall time, to OUT_DIR/NAME.json. A failure writes
OUT_DIR/NAME.failed with the traceback and ends the process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

HERE = Path(__file__).resolve().parent

BACKGROUND_OVERRIDES = ["env.sim.num_threads=1", "agent.learner_threads=1"]
"""One physics thread and one torch thread: the background training keeps to one core."""

NICENESS = 10


@dataclass
class BackgroundRun:
    """A training of the background process, as the fixture reads it back."""

    run_dir: Path
    checkpoint: Path
    """The run's last checkpoint."""
    export_dir: Path | None
    env_steps: int
    wall_s: float
    train_success_rate: float


class FixtureTrainer:
    """The background process and what it has finished (in the test process)."""

    def __init__(self, out_dir: Path, names: list[str]):
        from fixture_trainings import with_needs

        self.out_dir, self.names = Path(out_dir), with_needs(list(names))
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.out_dir / "trainer.log"
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), str(self.out_dir), *self.names],
                                        stdout=self._log, stderr=subprocess.STDOUT, cwd=HERE.parent)

    def result(self, name: str, timeout_s: float = 3600.0) -> BackgroundRun:
        """Wait for `name`'s training; raise with the trainer's log if it failed or the process died."""
        self._wait(name, timeout_s)
        return _read(self.out_dir / f"{name}.json")

    def job_result(self, name: str, timeout_s: float = 3600.0) -> dict:
        """Wait for job `name`; what its function returned, and `wall_s`."""
        self._wait(name, timeout_s)
        return json.loads((self.out_dir / f"{name}.json").read_text())

    def _wait(self, name: str, timeout_s: float) -> None:
        done, failed = self.out_dir / f"{name}.json", self.out_dir / f"{name}.failed"
        deadline = time.monotonic() + timeout_s
        while not done.is_file():
            if failed.is_file():
                raise RuntimeError(f"the background training of {name} failed:\n{failed.read_text()}")
            if self.process.poll() is not None and not done.is_file():
                raise RuntimeError(f"the background trainer exited ({self.process.returncode}) before {name} was done:\n"
                                   f"{self.log_path.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the background training of {name} took over {timeout_s:.0f} s")
            time.sleep(0.5)

    def finished(self) -> dict[str, BackgroundRun | float]:
        """The trainings (their runs) and jobs (their wall times [s]) done so far, by fixture name."""
        from fixture_trainings import JOBS

        done = {}
        for name in self.names:
            path = self.out_dir / f"{name}.json"
            if path.is_file():
                done[name] = json.loads(path.read_text())["wall_s"] if name in JOBS else _read(path)
        return done

    def close(self) -> None:
        """Stop the trainer if it still runs (an interrupted session leaves nothing running) and remove its runs."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        shutil.rmtree(self.out_dir, ignore_errors=True)


def _read(path: Path) -> BackgroundRun:
    info = json.loads(path.read_text())
    return BackgroundRun(Path(info["run_dir"]), Path(info["checkpoint"]),
                         Path(info["export_dir"]) if info["export_dir"] else None, info["env_steps"], info["wall_s"],
                         info["train_success_rate"])


def _train(name: str, out_dir: Path) -> dict:
    from cli_training import export_run, train_run
    from fixture_trainings import TRAININGS

    training = TRAININGS[name]
    root = out_dir / name
    run = train_run(training.task, root / "logs", *training.overrides, *BACKGROUND_OVERRIDES)
    export_dir = export_run(run.run_dir, root / "exported") if training.export else None
    return {"run_dir": str(run.run_dir), "checkpoint": str(run.checkpoint),
            "export_dir": str(export_dir) if export_dir else None,
            "env_steps": run.env_steps, "wall_s": run.wall_s,
            "train_success_rate": float(run.stats.get("Episode/success_rate", float("nan")))}


def _job(name: str, out_dir: Path) -> dict:
    from fixture_trainings import JOBS

    job = JOBS[name]
    module, function = job.target.split(":")
    runs = {need: _read(out_dir / f"{need}.json") for need in job.needs}
    (out_dir / name).mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    info = getattr(import_module(module), function)(out_dir / name, runs)
    return {**info, "wall_s": time.perf_counter() - start}


def main(argv: list[str]) -> int:
    out_dir, names = Path(argv[0]), argv[1:]
    os.nice(NICENESS)
    sys.path.insert(0, str(HERE))
    from fixture_trainings import JOBS

    for name in names:
        print(f"[fixture_trainer] {'running' if name in JOBS else 'training'} {name}", flush=True)
        try:
            info = _job(name, out_dir) if name in JOBS else _train(name, out_dir)
        except BaseException:
            (out_dir / f"{name}.failed").write_text(traceback.format_exc())
            raise
        tmp = out_dir / f"{name}.json.tmp"
        tmp.write_text(json.dumps(info))
        tmp.rename(out_dir / f"{name}.json")  # whole or absent: the fixture never reads half a file
        print(f"[fixture_trainer] {name}: done in {info['wall_s']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
