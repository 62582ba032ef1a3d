# SPDX-License-Identifier: BSD-3-Clause
"""A dry run of an export: the robot-side control step, end to end, on a synthetic robot at rest.

A manifest whose sha256 matches its ONNX file only says the two were copied together. Whether the
file loads, has the input and output widths the manifest declares, and turns an observation into
finite targets inside the joint limits is only known once the runtime has run it, so
`batonlab deploy EXPORT` does that before calling an export deployable. Only public calls of
`DeployRuntime` are used: the dry run exercises what a robot would.
"""

from __future__ import annotations

import logging

import numpy as np

from batonlab.deploy.manifest import Manifest
from batonlab.deploy.runtime import DeployRuntime, StepResult
from batonlab.deploy.safety import SafetyCfg, State

MAX_START_STEPS = 50
"""Control steps the runtime gets to leave passive (it may first measure how regularly inputs arrive)."""
RUN_STEPS = 3
"""Control steps checked once it runs: the first without a last action, the later ones with one."""


class DryRunError(ValueError):
    """The export cannot run on a robot; the message says why."""


def dry_run(manifest: Manifest) -> StepResult:
    """Load the policy and feed it a robot at rest: the default pose, zero joint velocities, sensors as
    they read at rest (a level IMU; zero for others), zero for commands without a default, one message
    of each per control period, until `RUN_STEPS` steps have run.

    Returns:
        The last step's result: state RUN, a finite command in `manifest.joint_names` order.

    Raises:
        DryRunError: the runtime cannot be built (ONNX file unreadable, names or widths that are not
            the manifest's, observation terms it cannot compute), it does not leave passive, or a
            step after that is not RUN with a finite command of the right width inside the position limits.
    """
    try:
        runtime = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0))
    except Exception as err:  # onnxruntime raises its own types for files it cannot parse
        raise DryRunError(f"the robot-side runtime cannot load this export: {_one_line(err)}") from None
    joints = list(runtime.ctx.joints)
    missing = [name for name in joints if name not in manifest.default_joint_pos]
    if missing:
        raise DryRunError(f"the manifest has no default position for joints {missing}")
    positions = np.array([manifest.default_joint_pos[name] for name in joints])
    at_rest = {name: spec.at_rest() for name, spec in manifest.sensors.items()}
    # The verdict is the dry run's to report: the runtime's own state-change warnings would only repeat it.
    logger = logging.getLogger("batonlab.deploy")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        ran = 0
        for tick in range(MAX_START_STEPS + RUN_STEPS):
            now = tick * manifest.control_dt
            runtime.set_joint_state(joints, positions, np.zeros(len(joints)), now)
            for name in runtime.required_inputs:
                if name != "joint_states":
                    runtime.set_vector(name, at_rest.get(name, np.zeros(runtime.vectors[name].dim)), now)
            result = runtime.step(now)
            if ran == 0 and result.state is State.PASSIVE:
                continue
            _check_result(runtime, result)
            ran += 1
            if ran == RUN_STEPS:
                return result
    finally:
        logger.setLevel(level)
    raise DryRunError(f"at the default pose the runtime stays {result.state.value} for {MAX_START_STEPS} control steps "
                      f"({result.reason})")


# Private helpers.


def _check_result(runtime: DeployRuntime, result: StepResult) -> None:
    if result.state is not State.RUN:
        raise DryRunError(f"at the default pose the runtime ends in state {result.state.value} ({result.reason}), not run")
    command = None if result.command is None else np.asarray(result.command, dtype=np.float64)
    width = len(runtime.joint_names)
    if command is None or command.shape != (width,):
        shape = None if command is None else command.shape
        raise DryRunError(f"the runtime sent a command of shape {shape}, the robot side commands {width} joints")
    if not np.isfinite(command).all():
        raise DryRunError(f"the runtime sent non-finite targets {command.tolist()}")
    outside = _outside_position_limits(runtime, command)
    if outside:
        raise DryRunError(f"targets of joints {outside} lie outside their position limits")


def _outside_position_limits(runtime: DeployRuntime, command: np.ndarray) -> list[str]:
    """Position-controlled joints whose target lies outside their position limits."""
    low, high = runtime.joint_states.low[: runtime.num_joints], runtime.joint_states.high[: runtime.num_joints]
    return [name for name, kind, value, lo, hi in zip(runtime.joint_names, runtime.command_kinds, command, low, high)
            if kind == "position" and not lo <= value <= hi]


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
