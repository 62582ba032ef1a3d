# SPDX-License-Identifier: BSD-3-Clause
"""`finetune=RUN_DIR`: PPO fine-tuning of a distilled student at λ = 0.

Imitation leaves a gap where the student cannot see what the teacher acted on (exact object state,
contacts); rewards close it. The actor is the student of a distillation run (its observation groups, widths,
normaliser and weights, and its rollout noise as the starting std unless `agent.policy.init_noise_std` is given: a
task that fails under the student's noise needs a smaller one) of the same task, or of a task whose policies are this
one's (`same_policy_as`: an upper level cloned over `<task>_scripted` fine-tunes over the trained level of `<task>`);
the critic is the teacher's when the teacher's checkpoint is still there and its critic fits this
run's, else a fresh one. A resumed fine-tune is an RL run like any other (`resume=true`): its
checkpoint rebuilds the actor, and `finetune=` is not read again. PPO's adaptive step starts at its floor
(`FINETUNE_LEARNING_RATE`, unless `agent.algorithm.learning_rate` is given) and rises while the policy's KL
stays below the target: Adam's first steps at a fresh run's 1e-3 moved a trained student far from itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import yaml

from batonlab.cli.common import CliError, Invocation, find_checkpoint
from batonlab.rl import checkpoint
from batonlab.tasks import same_policy


FINETUNE_LEARNING_RATE = 1e-5
"""A fine-tune's first learning rate with the adaptive schedule (rsl-rl's floor; it grows ×1.5 per mini-batch
while the KL is under half the target). Evidence: docs/PRIVILEGES.md (arm_lift: success 0.70 → 0.11 in the first
actor update at 1e-3; no drop from 1e-5)."""


@dataclass
class FinetuneStart:
    """Where a fine-tune's weights come from."""

    student_checkpoint: Path
    """The distillation checkpoint whose student becomes the actor."""
    teacher_checkpoint: Path | None
    """The teacher's RL checkpoint whose critic starts this run's, if it is still there (None for a scripted expert)."""
    noise_std: float | None = None
    """The actor's starting std when `agent.policy.init_noise_std` is given (None: the student's rollout noise)."""


def resolve_finetune(inv: Invocation) -> FinetuneStart:
    """Set `inv.agent`'s actor to the student of `finetune=` (groups, widths, activation, normalisation).

    Raises:
        CliError: No such folder, no config.yaml, a run of another task, not a distillation run,
            a distillation algorithm for this run, or no readable checkpoint.
    """
    top = inv.top
    path = Path(top.finetune)
    if inv.agent.algorithm.is_distillation:
        raise CliError(f"finetune={path} fine-tunes a student with rewards: use agent.algorithm.class_name=PPO "
                       "(or P3O, PPOLagrangian), not Distillation")
    if not path.exists():
        raise CliError(f"finetune={path}: no such run folder or checkpoint")
    run_dir = path.parent if path.is_file() else path
    config = run_dir / "config.yaml"
    if not config.is_file():
        raise CliError(f"finetune={path}: {run_dir} has no config.yaml (not a batonlab training run folder)")
    saved = yaml.safe_load(config.read_text()) or {}
    student_task = saved.get("task_name")
    if not isinstance(student_task, str) or not same_policy(student_task, inv.task_name):
        raise CliError(f"finetune={path} is a run of task {student_task!r}, this run trains {inv.task_name!r}: "
                       "fine-tune a student of the same task (or of a task whose policies are its own, e.g. "
                       "<task>_scripted for <task>)")
    if student_task != inv.task_name:
        print(f"[batonlab] fine-tune: the student learned on {student_task}, whose policies are {inv.task_name}'s")
    agent = saved.get("agent") or {}
    if (agent.get("algorithm") or {}).get("class_name") != "Distillation":
        raise CliError(f"finetune={path} is not a distillation run (its algorithm is "
                       f"{(agent.get('algorithm') or {}).get('class_name', 'PPO')}); fine-tune the student of "
                       "agent.algorithm.class_name=Distillation teacher=RUN_DIR")
    student_checkpoint = find_checkpoint(dataclasses.replace(top, checkpoint=str(path) if path.is_file() else None,
                                                             run_dir=None), run_dir)
    state = checkpoint.load(student_checkpoint)
    policy = agent.get("policy") or {}
    inv.agent.obs_groups = {**inv.agent.obs_groups, "actor": list(state["student_obs_groups"])}
    inv.agent.policy.actor_hidden_dims = tuple(int(d) for d in policy["actor_hidden_dims"])
    inv.agent.policy.activation = str(policy["activation"])
    inv.agent.policy.obs_normalization = bool(policy["obs_normalization"])
    inv.agent.policy.last_action_residual = bool(state.get("student_last_action_residual", False))
    given = any(o.key_or_group == "agent.algorithm.learning_rate" for o in inv.task_overrides)
    if inv.agent.algorithm.schedule == "adaptive" and not given:
        inv.agent.algorithm.learning_rate = FINETUNE_LEARNING_RATE
        print(f"[batonlab] fine-tune: the adaptive learning rate starts at {FINETUNE_LEARNING_RATE:g} "
              "(set agent.algorithm.learning_rate=... to start elsewhere)")
    noise_given = any(o.key_or_group == "agent.policy.init_noise_std" for o in inv.task_overrides)
    if noise_given and not inv.agent.policy.init_noise_std > 0.0:
        raise CliError(f"agent.policy.init_noise_std={inv.agent.policy.init_noise_std} must be > 0 (the fine-tune's "
                       "starting exploration noise)")
    teacher = state["teacher_cfg"].get("checkpoint")  # None: the teacher was the task's scripted expert
    return FinetuneStart(student_checkpoint, Path(teacher) if teacher and Path(teacher).is_file() else None,
                         inv.agent.policy.init_noise_std if noise_given else None)
