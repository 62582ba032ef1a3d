# SPDX-License-Identifier: BSD-3-Clause
"""Policy re-evaluation: an exported policy on a bag's logged observations, run as the robot runs it.

Feeds every logged observation to `batonlab.deploy.policy.OnnxPolicy` and compares its actions with
the logged ones. It needs no simulator, so it lives apart from the replay modules; a mismatch says
the export or the robot-side runtime differs from what ran when the bag was recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from batonlab.logs.bag_reader import BagError, BagLog


@dataclass
class PolicyEvalResult:
    """An exported policy's actions on the logged observations vs. the logged actions."""

    t: np.ndarray
    """(N,) times of the steps where the logged policy ran [s since bag start]."""
    logged: np.ndarray
    """(N, A) logged raw actions."""
    replayed: np.ndarray
    """(N, A) the export's raw actions for the same observations."""
    action_names: list[str]
    target_diff: np.ndarray | None
    """(N, A) post-processed targets minus logged filtered targets of the policy's joints, where the step ran
    unfiltered (run/sim); NaN elsewhere."""
    export_dir: Path
    notes: list[str] = field(default_factory=list)

    @property
    def diff(self) -> np.ndarray:
        """Replayed minus logged raw actions (N, A)."""
        return self.replayed - self.logged

    @property
    def max_abs_diff(self) -> float:
        """Largest |replayed - logged| over steps and actions (0 if no steps)."""
        return float(np.abs(self.diff).max()) if self.diff.size else 0.0

    @property
    def rms_per_action(self) -> np.ndarray:
        """RMS of `diff` over steps, per action (A,)."""
        return np.sqrt(np.mean(self.diff**2, axis=0))


def reevaluate_policy(log: BagLog, export_dir: str | Path | None = None) -> PolicyEvalResult:
    """Run the exported policy on every logged observation, as the robot runs it, and compare the actions.

    The policy runs in the robot-side runtime's control law (`OnnxPolicy`, same session options, one observation
    per call; both levels of a two-level export), and its actions go through the runtime's `ActionProcessor`.

    Args:
        log: The bag.
        export_dir: Folder with manifest.json + policy.onnx; default: the bag's `export_dir` metadata.
    """
    from batonlab.deploy import ManifestError, load_manifest
    from batonlab.deploy.actions import ActionProcessor
    from batonlab.deploy.manifest import sha256_file
    from batonlab.deploy.control import control_law

    log.require("policy re-evaluation", "policy_step")
    export_dir = export_dir or log.metadata.get("export_dir")
    if not export_dir:
        raise BagError(f"{log.path}: policy re-evaluation needs an exported policy (--policy EXPORT_DIR)")
    try:
        manifest = load_manifest(export_dir)
        control = control_law(manifest)  # a two-level export: both levels, each on its part of the observation
    except ManifestError as err:
        raise BagError(f"policy re-evaluation: {err}") from None
    steps = log.policy_steps
    notes = []
    if steps.observation.shape[1] != manifest.obs_dim:
        raise BagError(f"{log.path}: logged observations have {steps.observation.shape[1]} values, the policy in "
                       f"{export_dir} reads {manifest.obs_dim}: not the policy (or task) of this bag")
    if steps.action_raw.shape[1] not in (0, manifest.action_dim):
        raise BagError(f"{log.path}: logged actions have {steps.action_raw.shape[1]} values, the policy writes "
                       f"{manifest.action_dim}")
    sha = log.metadata.get("manifest_sha256")
    if log.metadata.get("manifest_source") == "export" and sha:
        if sha256_file(Path(export_dir) / "manifest.json") != sha:
            notes.append("the bag was recorded with a different manifest.json than the one re-evaluated")
    ran = np.isfinite(steps.action_raw).all(axis=1) & (steps.action_raw.shape[1] > 0) & np.isfinite(steps.observation).all(axis=1)
    if not ran.any():
        raise BagError(f"{log.path}: no step of the bag ran the policy (all passive/stop)")
    replayed = np.array([control.replay(obs) for obs in steps.observation[ran].astype(np.float32)])
    target_diff = None
    # The robot side logs its whole command: the policy's joints, then the joints it holds (their own targets).
    joints = len(manifest.joint_names)
    process = ActionProcessor(manifest)
    if process.ik_terms or process.tool_terms:
        notes.append("targets not compared: IK action terms need the measured joints of every step")
    elif steps.action_filtered.shape[1] in (joints, joints + len(manifest.held_joints.names)):
        unfiltered = np.array([s in ("run", "sim") for s in np.array(steps.safety_state)[ran]])
        targets = np.array([process(a) for a in replayed])
        if log.metadata.get("source") == "sim":
            # Simulation logs the targets after the actuators' control range, where MuJoCo applies them.
            ctrl = manifest.ctrl_range
            targets = np.clip(targets, ctrl[:, 0], ctrl[:, 1])
        logged = steps.action_filtered[ran][:, :joints]
        target_diff = np.where(unfiltered[:, None], targets - logged, np.nan)
    return PolicyEvalResult(steps.t[ran], steps.action_raw[ran].astype(np.float64), replayed.astype(np.float64),
                            list(manifest.joint_names), target_diff, Path(export_dir), notes)
