# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab reward search task=NAME ...`: LLM-written reward functions trained and refined in rounds on Ray.

    batonlab reward search task=arm_reach_sparse iterations=3 samples=4 train_iterations=40 llm=api \\
        llm_base_url=http://127.0.0.1:8000/v1 llm_model=Qwen2.5-7B-Instruct
    batonlab reward search task=arm_reach_sparse llm=stand-in        # no model server: the template writer

Each trial replaces the task's rewards with one generated function (`GeneratedReward`), trains from
scratch for `train_iterations` PPO iterations in its own run folder (checkpoint kept), and is judged by
the task's success term on `eval_episodes` play episodes. Writes `out/report.md`, `out/search.png`,
`out/results.json`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from batonlab.cli.common import CliError
from batonlab.cli.learned_common import fields_and_sample, llm_client, option, parse_subcommand, task_brief


@dataclass
class SearchOptions:
    """The `key=value` options of `batonlab reward search`."""
    task: str | None = option(None, "registered task (its success term judges the trials)")
    iterations: int = option(2, "rounds of sampling, training and reflection")
    samples: int = option(2, "reward functions sampled per round")
    train_iterations: int = option(20, "PPO iterations per trial")
    num_envs: int = option(256, "envs per trial")
    eval_episodes: int = option(64, "play episodes that judge a trial")
    group: str = option("policy", "observation group whose fields the reward function reads")
    seed: int = option(0, "seed of the search (samples and trainings)")
    out: str | None = option(None, "output folder (default logs/reward_search/<task>)")
    llm: str = option("api", "api (OpenAI-compatible server) or stand-in (local template writer)")
    llm_base_url: str | None = option(None, "e.g. http://127.0.0.1:8000/v1 (default BATONLAB_LLM_BASE_URL)")
    llm_model: str | None = option(None, "model name (default BATONLAB_LLM_MODEL)")
    llm_cache: str | None = option(None, "on-disk answer cache folder")
    ray_address: str | None = option(None, "Ray cluster address (default: a local Ray)")
    num_cpus: int | None = option(None, "CPUs of the local Ray (default: all)")
    cpus_per_trial: float = option(1.0, "CPUs Ray reserves per trial")


@dataclass
class TrialSetup:
    """What a Ray worker needs besides the trial spec (sent once per trial, pickled)."""

    task: str
    group: str
    num_envs: int
    train_iterations: int
    eval_episodes: int


def run(args: list[str]) -> int:
    """`batonlab reward search`: run the LLM reward search and write its results; returns the exit code."""
    options = parse_subcommand(args, SearchOptions(), "search", __doc__, needs_task=True)
    if options is None:
        return 0
    for key in ("iterations", "samples", "train_iterations", "num_envs", "eval_episodes"):
        if getattr(options, key) < 1:
            raise CliError(f"{key}={getattr(options, key)}: expected an integer >= 1")
    from batonlab.learned.search import SearchCfg, run_search

    description, source = task_brief(options.task)
    fields, sample_obs = fields_and_sample(options.task, options.group)
    out = Path(options.out or Path("logs") / "reward_search" / options.task)
    setup = TrialSetup(options.task, options.group, options.num_envs, options.train_iterations, options.eval_episodes)
    cfg = SearchCfg(iterations=options.iterations, samples=options.samples, seed=options.seed,
                    ray_address=options.ray_address, num_cpus=options.num_cpus, cpus_per_trial=options.cpus_per_trial)
    with llm_client(options.llm, options.llm_base_url, options.llm_model, options.llm_cache) as client:
        results = run_search(cfg, client, description, source, fields, sample_obs, _Trial(setup), out,
                             log=lambda line: print(line, file=sys.stderr))
        print(f"[batonlab] LLM requests: {client.stats}", file=sys.stderr)
    trained = [r for r in results if r.status == "trained"]
    print(f"[batonlab] reward search: {len(trained)}/{len(results)} trials trained; report: {out / 'report.md'}")
    return 0 if trained else 1


class _Trial:
    """The Ray task: train one generated reward and judge it (a picklable callable)."""

    def __init__(self, setup: TrialSetup):
        self.setup = setup

    def __call__(self, spec):
        return train_trial(self.setup, spec)


def train_trial(setup: TrialSetup, spec):
    """Train `spec.source_path`'s reward from scratch, save the checkpoint, evaluate with play's settings."""
    import torch

    from batonlab.env.cfg import RewardTermCfg
    from batonlab.env.env import BatonEnv
    from batonlab.learned.sandbox import SandboxError
    from batonlab.learned.search import TrialResult
    from batonlab.rewards.learned import GeneratedReward
    from batonlab.rl.evaluate import evaluate
    from batonlab.rl.runner import BatonRunner
    from batonlab.rl.vecenv import RslRlVecEnv
    from batonlab.tasks import make_agent_cfg, make_task_cfg

    torch.set_num_threads(1)
    torch.manual_seed(spec.seed)
    result = TrialResult(spec.iteration, spec.sample, "trained", source_path=spec.source_path, run_dir=spec.run_dir)
    cfg = make_task_cfg(setup.task)
    cfg.num_envs, cfg.seed = setup.num_envs, spec.seed
    cfg.rewards = {"generated": RewardTermCfg(func=GeneratedReward, params={"function": spec.source_path, "group": setup.group})}
    agent = make_agent_cfg(setup.task)
    agent.save_interval = setup.train_iterations
    env = play_env = None
    try:
        env = BatonEnv(cfg)
        term = env.reward_manager.terms["generated"]
        runner = BatonRunner(RslRlVecEnv(env), agent, log_dir=None)
        history: list[dict[str, dict[str, float]]] = []

        def record(_runner, stats):
            result.train_success.append(float(stats.get("Episode/success_rate", 0.0)))
            history.append(term.component_stats())

        runner.learn(setup.train_iterations, progress=False, on_iteration=record)
        result.checkpoint = str(runner.save(Path(spec.run_dir) / f"model_{setup.train_iterations}.pt"))
        result.env_steps = setup.train_iterations * agent.num_steps_per_env * cfg.num_envs
        for name in history[-1] if history else {}:
            means = [h[name]["mean"] for h in history if name in h]
            result.components[name] = {"mean": sum(means) / len(means), "std": history[-1][name]["std"],
                                       "first": means[0], "last": means[-1]}
        play_cfg = make_task_cfg(setup.task, play=True)
        play_cfg.num_envs, play_cfg.seed = setup.eval_episodes, 10_000 + spec.seed
        play_env = BatonEnv(play_cfg)
        result.success = float(evaluate(play_env, runner.inference_policy(), progress=False).success_rate)
    except (SandboxError, ValueError, RuntimeError) as err:
        result.status, result.error = "failed", f"{type(err).__name__}: {err}"
    finally:
        for e in (env, play_env):
            if e is not None:
                term = e.reward_manager.terms.get("generated")
                if term is not None:
                    term.close()
                e.close()
    return result
