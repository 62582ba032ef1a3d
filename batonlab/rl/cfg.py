# SPDX-License-Identifier: BSD-3-Clause
"""Typed training config and its one translation into rsl-rl's dict (rsl-rl-lib 5.5).

rsl-rl's dict schema changes between major versions (actor/critic split, required obs_groups);
this file is the only place that knows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass
class AlgorithmCfg:
    """PPO hyper-parameters (rsl-rl names)."""

    learning_rate: float = 1e-3
    num_learning_epochs: int = 5
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
    """Which observation groups feed the actor and the critic."""
    policy: PolicyCfg = field(default_factory=PolicyCfg)
    algorithm: AlgorithmCfg = field(default_factory=AlgorithmCfg)


def to_rsl_rl_dict(cfg: RunnerCfg, multi_gpu: dict | None = None) -> dict:
    """The train_cfg dict that rsl-rl-lib 5.5's PPO.construct_algorithm expects.

    Args:
        cfg: The typed runner config.
        multi_gpu: rsl-rl's `{"global_rank", "local_rank", "world_size"}` under torchrun, else None.
    """
    policy = cfg.policy
    return {
        "num_steps_per_env": cfg.num_steps_per_env,
        "save_interval": cfg.save_interval,
        "obs_groups": {k: list(v) for k, v in cfg.obs_groups.items()},
        "multi_gpu": multi_gpu,
        "check_for_nan": True,
        "algorithm": {"class_name": "PPO", **vars(cfg.algorithm)},
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": list(policy.actor_hidden_dims),
            "activation": policy.activation,
            "obs_normalization": policy.obs_normalization,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": policy.init_noise_std, "std_type": "scalar"},
        },
        "critic": {
            "class_name": "MLPModel",
            "hidden_dims": list(policy.critic_hidden_dims),
            "activation": policy.activation,
            "obs_normalization": policy.obs_normalization,
        },
    }
