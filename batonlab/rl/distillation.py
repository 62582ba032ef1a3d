# SPDX-License-Identifier: BSD-3-Clause
"""Distillation configs from files: the teacher from its run's saved config, a distillation run from its checkpoint.

The teacher's architecture is read from the teacher run's resolved `config.yaml` (its `agent`
section, written after the env was built), not guessed from the checkpoint's tensor shapes: shapes
cannot tell the activation or which observation groups the actor read. `BatonRunner.load_teacher`
then checks that the checkpoint's tensors fit that architecture.
"""

from __future__ import annotations

from pathlib import Path

from batonlab.rl.cfg import RunnerCfg, TeacherCfg


def teacher_cfg_from_run(agent: dict, teacher_checkpoint: str | Path) -> TeacherCfg:
    """The teacher as the run that trained it built its actor.

    Args:
        agent: The `agent` section of the teacher run's `config.yaml` (a plain `RunnerCfg`).
        teacher_checkpoint: The teacher's `model_*.pt`.

    Raises:
        ValueError: The run was itself a distillation (its policy is a student, with no actor), or the
            section lacks the actor's settings.
    """
    algorithm = (agent.get("algorithm") or {}).get("class_name", "PPO")
    if algorithm == "Distillation":
        raise ValueError("the teacher run is a distillation run; a teacher is the actor of an RL run (PPO, P3O, "
                         "PPOLagrangian)")
    try:
        policy, groups = agent["policy"], agent["obs_groups"]["actor"]
        return TeacherCfg(checkpoint=str(teacher_checkpoint), obs_groups=list(groups),
                          hidden_dims=tuple(int(d) for d in policy["actor_hidden_dims"]),
                          activation=str(policy["activation"]), obs_normalization=bool(policy["obs_normalization"]))
    except (KeyError, TypeError) as err:
        raise ValueError(f"the teacher run's config has no actor settings ({err!r} missing)") from None


def restore_distillation_cfg(cfg: RunnerCfg, state: dict) -> bool:
    """Set `cfg` to rebuild the student and teacher of a distillation checkpoint (play, export, resume).

    The student's widths and activation stay `cfg.policy` (as for any run, pass the training overrides);
    its observation groups, whether it is a last-action residual, and the teacher come from the checkpoint.

    Returns:
        Whether `state` is a distillation checkpoint (otherwise `cfg` is left as it is).
    """
    if state.get("algorithm") != "Distillation":
        return False
    saved = state["teacher_cfg"]
    cfg.algorithm.class_name = "Distillation"
    cfg.teacher = TeacherCfg(checkpoint=saved["checkpoint"], obs_groups=list(saved["obs_groups"]),
                             hidden_dims=tuple(saved["hidden_dims"]), activation=saved["activation"],
                             obs_normalization=bool(saved["obs_normalization"]), expert=bool(saved.get("expert", False)))
    cfg.obs_groups = {**cfg.obs_groups, "student": list(state["student_obs_groups"])}
    cfg.policy.last_action_residual = bool(state.get("student_last_action_residual", False))
    return True


def restore_actor_cfg(cfg: RunnerCfg, state: dict) -> bool:
    """Set `cfg`'s actor (groups, widths, activation, normalisation, residual) to an RL checkpoint's `actor_cfg`.

    Returns:
        Whether `state` holds one (checkpoints written before it, and distillations, do not).
    """
    saved = state.get("actor_cfg")
    if saved is None:
        return False
    cfg.obs_groups = {**cfg.obs_groups, "actor": list(saved["obs_groups"])}
    cfg.policy.actor_hidden_dims = tuple(int(d) for d in saved["hidden_dims"])
    cfg.policy.activation = str(saved["activation"])
    cfg.policy.obs_normalization = bool(saved["obs_normalization"])
    cfg.policy.last_action_residual = bool(saved.get("last_action_residual", False))
    return True
