# SPDX-License-Identifier: BSD-3-Clause
"""Typed training config and its one translation into rsl-rl's dict (rsl-rl-lib 5.5).

rsl-rl's dict schema changes between major versions (actor/critic split, required obs_groups);
this file is the only place that knows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ALGORITHMS = {
    "PPO": "PPO",
    "P3O": "batonlab.rl.constrained:P3O",
    "PPOLagrangian": "batonlab.rl.constrained:PPOLagrangian",
    "Distillation": "batonlab.rl.executed_distillation:ExecutedActionDistillation",
}
"""`AlgorithmCfg.class_name` → the class rsl-rl builds (rsl-rl's PPO or Distillation, or batonlab's constrained PPO)."""

RESIDUAL_MODEL = "batonlab.rl.residual_model:LastActionResidualModel"
"""The actor's or student's class with `PolicyCfg.last_action_residual`."""


@dataclass
class PolicyCfg:
    """Actor and critic MLPs."""

    actor_hidden_dims: tuple[int, ...] = (256, 128, 64)
    critic_hidden_dims: tuple[int, ...] = (256, 128, 64)
    activation: str = "elu"
    init_noise_std: float = 1.0
    """Initial std of the Gaussian action distribution [action units]."""
    obs_normalization: bool = True
    """Empirical observation normalisation; its statistics are saved in checkpoints and the ONNX file."""
    last_action_residual: bool = False
    """The actor (Distillation: the student) outputs its `last_action` observation plus the MLP's output
    (`batonlab.rl.residual_model`): for imitating experts that servo their targets a step at a time."""


@dataclass
class ConstraintCfg:
    """Settings of the constrained algorithms (P3O, PPOLagrangian); plain PPO ignores them.

    Costs and limits are per control step (see `CostTermCfg.limit`), so the violation the penalty
    and the multipliers see is `mean cost per step of the rollout - limit` [cost units].
    """

    cost_value_loss_coef: float = 1.0
    """Weight of the cost critic's value loss (squared error, not clipped, summed over costs) in the total loss."""
    penalty_coef: float = 10.0
    """P3O's kappa: weight of the penalty max(0, L_C + mean cost - limit) [1/cost units]."""
    multiplier_init: float = 0.0
    """PPOLagrangian: initial Lagrange multiplier of every cost [dimensionless]."""
    multiplier_lr: float = 1.0
    """PPOLagrangian "gradient" rule: multiplier step per unit of (mean cost per step - limit) and iteration."""
    multiplier_update: Literal["gradient", "pid"] = "gradient"
    """PPOLagrangian: plain gradient ascent on the multipliers, or the PID Lagrangian of Stooke et al. 2020."""
    pid_kp: float = 5.0
    """PID rule: proportional gain [multiplier per unit of (mean cost per step - limit)]."""
    pid_ki: float = 1.0
    """PID rule: integral gain [multiplier per unit of violation summed over iterations]; with kp = kd = 0
    it is the "gradient" rule with `multiplier_lr = pid_ki`."""
    pid_kd: float = 0.0
    """PID rule: derivative gain on the rise of the mean cost since the previous iteration [multiplier per cost unit]."""
    multiplier_max: float = 20.0
    """Upper bound of every multiplier [dimensionless] (the policy loss is divided by 1 + sum of multipliers)."""


@dataclass
class DistillationCfg:
    """Settings of Distillation (a student imitating a teacher's actions); the other algorithms ignore them.

    The student acts (DAgger-style: the states are the student's own), the teacher labels every
    state with its mean action, and the student regresses onto those labels.
    """

    gradient_length: int = 4
    """Rollout steps whose behaviour losses are summed into one gradient step; it must divide
    `num_learning_epochs × num_steps_per_env` (rsl-rl backpropagates whole chunks only)."""
    loss_type: Literal["mse", "huber"] = "mse"
    """Behaviour loss between the student's and the teacher's mean actions."""
    student_noise_std: float = 0.1
    """Fixed std of the Gaussian noise on the student's actions in rollouts [action units]; not learned.
    It visits states around the student's own, which the teacher then labels."""
    teacher_action_prob: float = 0.0
    """DAgger's β at the first iteration: the probability that an env executes the teacher's action
    instead of the student's at a control step (0: the student always acts)."""
    teacher_action_iterations: int = 0
    """Iterations over which β falls linearly to 0 (0 with β > 0: β stays constant)."""


@dataclass
class TeacherCfg:
    """The teacher of a Distillation run: the actor of an earlier RL run, rebuilt with that run's settings.

    `batonlab train ... teacher=RUN_DIR` fills it from the teacher run's `config.yaml` (the architecture)
    and newest readable checkpoint (the weights). A distillation checkpoint keeps it, so resuming,
    `play` and `export` rebuild the teacher without `teacher=`.
    """

    checkpoint: str | None = None
    """The teacher's `model_*.pt`, whose actor (with its normaliser) is loaded; None outside distillation
    and for an expert teacher."""
    expert: bool = False
    """The teacher is the task's scripted expert (`teacher=expert`, `TaskCfg.expert`), read from the privileged
    observation group `expert` (`batonlab.rl.expert_teacher`), not a trained actor."""
    obs_groups: list[str] = field(default_factory=lambda: ["policy"])
    """Observation groups of the teacher's actor, in its order (privileged groups allowed)."""
    hidden_dims: tuple[int, ...] = (256, 128, 64)
    activation: str = "elu"
    obs_normalization: bool = True


@dataclass
class AlgorithmCfg:
    """PPO hyper-parameters (rsl-rl names) and the choice of algorithm."""

    class_name: Literal["PPO", "P3O", "PPOLagrangian", "Distillation"] = "PPO"
    """rsl-rl's PPO, or a constrained PPO that learns to keep the task's `costs` under their limits:
    P3O (Zhang et al. 2022, exact penalty) or PPOLagrangian (Lagrange multipliers, gradient or PID);
    or rsl-rl's Distillation of a deployable student from a teacher (`RunnerCfg.teacher`)."""
    learning_rate: float = 1e-3
    """Adam step size (PPO: initial value of the adaptive schedule; Distillation: fixed)."""
    num_learning_epochs: int = 5
    """Passes over each rollout (PPO and Distillation)."""
    num_mini_batches: int = 4
    clip_param: float = 0.2
    gamma: float = 0.99
    lam: float = 0.95
    value_loss_coef: float = 1.0
    entropy_coef: float = 0.005
    max_grad_norm: float = 1.0
    schedule: str = "adaptive"
    desired_kl: float = 0.01
    use_clipped_value_loss: bool = True
    constraint: ConstraintCfg = field(default_factory=ConstraintCfg)
    """Settings of P3O and PPOLagrangian."""
    distillation: DistillationCfg = field(default_factory=DistillationCfg)
    """Settings of Distillation."""

    @property
    def is_constrained(self) -> bool:
        """Whether the algorithm learns from the env's constraint costs."""
        return self.class_name in ("P3O", "PPOLagrangian")

    @property
    def is_distillation(self) -> bool:
        """Whether a student imitates a teacher (no rewards learned from, no critic)."""
        return self.class_name == "Distillation"


@dataclass
class RunnerCfg:
    """On-policy runner settings."""

    experiment_name: str = "default"
    """Runs are written under `logs/<experiment_name>/<timestamp>/`."""
    num_steps_per_env: int = 24
    """Env steps per env and iteration (rollout length)."""
    max_iterations: int = 300
    """Total learning iterations of the run (a resumed run continues up to this number)."""
    save_interval: int = 50
    """Iterations between checkpoints; the last iteration is always saved."""
    obs_groups: dict[str, list[str]] = field(default_factory=lambda: {"actor": ["policy"], "critic": ["policy"]})
    """Which observation groups feed the actor and the critic. Distillation's student reads
    `obs_groups["student"]` if given, else the actor's groups that are not privileged."""
    policy: PolicyCfg = field(default_factory=PolicyCfg)
    """The actor and critic (PPO), or the student (Distillation: the actor's settings)."""
    algorithm: AlgorithmCfg = field(default_factory=AlgorithmCfg)
    teacher: TeacherCfg = field(default_factory=TeacherCfg)
    """Distillation's teacher; the other algorithms ignore it."""
    critic_warmup_iterations: int = 0
    """Iterations at the start of a run in which only the critic learns and the actor is held (RL only):
    a fine-tuned student is not moved by the advantages of a critic that has not yet seen it act."""
    learner_threads: int = 0
    """torch threads of the update on a CPU learner (0: one per CPU core). On the CPU the rollout runs
    torch on one thread, which leaves the cores to the physics threads; the update has them to itself."""


def to_rsl_rl_dict(cfg: RunnerCfg, multi_gpu: dict | None = None, num_costs: int = 0,
                   privileged_groups: tuple[str, ...] = ()) -> dict:
    """The train_cfg dict that rsl-rl-lib 5.5's `PPO.construct_algorithm` (or `Distillation.construct_algorithm`) expects.

    For `class_name="PPO"` the algorithm entry holds rsl-rl PPO's own arguments only. A constrained
    class also gets `num_costs`, `cost_critic_cfg` (the critic's MLP settings) and `constraint_cfg`.
    Distillation gets a `student` (the actor's settings) and a `teacher` (`cfg.teacher`) instead of
    an actor and a critic.

    Args:
        cfg: The typed runner config.
        multi_gpu: rsl-rl's `{"global_rank", "local_rank", "world_size"}` under torchrun, else None.
        num_costs: Number of the env's constraint costs (used by the constrained classes only).
        privileged_groups: The env's simulator-only observation groups (Distillation's student leaves them out).

    Raises:
        ValueError: An unknown `algorithm.class_name`, or distillation settings that cannot work.
    """
    policy, algorithm = cfg.policy, cfg.algorithm
    if algorithm.class_name not in ALGORITHMS:
        raise ValueError(f"agent.algorithm.class_name={algorithm.class_name!r} is not an algorithm; "
                         f"valid names: {list(ALGORITHMS)}")
    common = {
        "num_steps_per_env": cfg.num_steps_per_env,
        "save_interval": cfg.save_interval,
        "multi_gpu": multi_gpu,
        "check_for_nan": True,
    }
    if algorithm.is_distillation:
        return {**common, **_distillation_dict(cfg, privileged_groups)}
    critic = {
        "class_name": "MLPModel",
        "hidden_dims": list(policy.critic_hidden_dims),
        "activation": policy.activation,
        "obs_normalization": policy.obs_normalization,
    }
    ppo = {k: v for k, v in vars(algorithm).items() if k not in ("class_name", "constraint", "distillation")}
    algorithm_dict = {"class_name": ALGORITHMS[algorithm.class_name], **ppo}
    if algorithm.is_constrained:
        algorithm_dict.update(num_costs=num_costs, constraint_cfg=dict(vars(algorithm.constraint)),
                              cost_critic_cfg={k: v for k, v in critic.items() if k != "class_name"})
    return {
        **common,
        # The student's groups are Distillation's; an RL run's models are the actor and the critic.
        "obs_groups": {k: list(v) for k, v in cfg.obs_groups.items() if k != "student"},
        "algorithm": algorithm_dict,
        "actor": {
            "class_name": _actor_class(policy),
            "hidden_dims": list(policy.actor_hidden_dims),
            "activation": policy.activation,
            "obs_normalization": policy.obs_normalization,
            "distribution_cfg": _gaussian(policy.init_noise_std),
        },
        "critic": critic,
    }


def student_obs_groups(cfg: RunnerCfg, privileged_groups: tuple[str, ...] = ()) -> list[str]:
    """The groups Distillation's student reads: `obs_groups["student"]`, else the actor's non-privileged groups.

    Raises:
        ValueError: No group is left for the student.
    """
    groups = cfg.obs_groups.get("student")
    if groups is None:
        groups = [g for g in cfg.obs_groups.get("actor", ["policy"]) if g not in privileged_groups]
    if not groups:
        raise ValueError(f"Distillation: the student has no observation group (actor groups {cfg.obs_groups.get('actor')} "
                         f"are all privileged); set agent.obs_groups.student")
    return list(groups)


def _distillation_dict(cfg: RunnerCfg, privileged_groups: tuple[str, ...]) -> dict:
    """The obs_groups, algorithm, student and teacher entries of a Distillation run."""
    policy, algorithm, teacher = cfg.policy, cfg.algorithm, cfg.teacher
    settings = algorithm.distillation
    chunk = algorithm.num_learning_epochs * cfg.num_steps_per_env
    if settings.gradient_length < 1 or chunk % settings.gradient_length:
        raise ValueError(f"agent.algorithm.distillation.gradient_length={settings.gradient_length} must divide "
                         f"num_learning_epochs x num_steps_per_env = {chunk} (rsl-rl would skip the remainder)")
    if settings.student_noise_std <= 0.0:
        raise ValueError(f"agent.algorithm.distillation.student_noise_std={settings.student_noise_std} must be > 0")
    if not 0.0 <= settings.teacher_action_prob <= 1.0 or settings.teacher_action_iterations < 0:
        raise ValueError(f"agent.algorithm.distillation.teacher_action_prob={settings.teacher_action_prob} must be in "
                         f"[0, 1] and teacher_action_iterations={settings.teacher_action_iterations} >= 0")
    return {
        "obs_groups": {"student": student_obs_groups(cfg, privileged_groups), "teacher": list(teacher.obs_groups)},
        "algorithm": {
            "class_name": ALGORITHMS["Distillation"],
            "num_learning_epochs": algorithm.num_learning_epochs,
            "gradient_length": settings.gradient_length,
            "learning_rate": algorithm.learning_rate,
            "max_grad_norm": algorithm.max_grad_norm,
            "loss_type": settings.loss_type,
            "teacher_action_prob": settings.teacher_action_prob,
            "teacher_action_iterations": settings.teacher_action_iterations,
        },
        "student": {
            "class_name": _actor_class(policy),
            "hidden_dims": list(policy.actor_hidden_dims),
            "activation": policy.activation,
            "obs_normalization": policy.obs_normalization,
            "distribution_cfg": {**_gaussian(settings.student_noise_std), "learn_std": False},
        },
        "teacher": {"class_name": "batonlab.rl.expert_teacher:ExpertTeacher"} if teacher.expert else {
            "class_name": "MLPModel",
            "hidden_dims": list(teacher.hidden_dims),
            "activation": teacher.activation,
            "obs_normalization": teacher.obs_normalization,
            # The teacher's actor had a distribution; its (unused) std parameter is part of the checkpoint.
            "distribution_cfg": _gaussian(1.0),
        },
    }


def _actor_class(policy: PolicyCfg) -> str:
    """rsl-rl's model class of the actor or student (its `residual_columns` are the runner's to fill in)."""
    return RESIDUAL_MODEL if policy.last_action_residual else "MLPModel"


def _gaussian(std: float) -> dict:
    return {"class_name": "GaussianDistribution", "init_std": std, "std_type": "scalar"}
