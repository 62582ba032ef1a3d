# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab reward fit-potential task=NAME ...`: preference labels on rendered states → a potential Φ.

    batonlab reward fit-potential task=arm_reach_sparse labeller=vlm llm_base_url=http://127.0.0.1:11434/v1 llm_model=llava
    batonlab reward fit-potential task=arm_reach_sparse labeller=scripted          # the task's true progress decides
    batonlab train task=arm_reach_sparse env.rewards.potential.params.potential=logs/potential/arm_reach_sparse.pt

States come from rollouts of random actions, or of a trained policy (`run_dir=...`: the next phase of
an iterated fit). `labeller=vlm` asks the VLM about pairs of rendered frames; `labeller=stand-in` runs
the same path through the local stand-in server, which answers from the true progress of the frames it
is shown; `labeller=scripted` compares true progress directly (no rendering, no HTTP).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from batonlab.cli.common import CliError
from batonlab.cli.learned_common import llm_client, option, parse_subcommand, task_brief


@dataclass
class PotentialOptions:
    """The `key=value` options of `batonlab reward fit-potential`."""
    task: str | None = option(None, "registered task (must define TaskCfg.progress for labeller=scripted/stand-in)")
    labeller: str = option("scripted", "scripted, vlm (an OpenAI-compatible VLM server) or stand-in")
    group: str = option("policy", "observation group Φ reads")
    fields: list[str] | None = option(None, "only these fields of the group, e.g. [ee_pos,ee_target] (default: all)")
    num_envs: int = option(32, "envs of the state-collecting rollouts")
    steps: int = option(200, "control steps of the rollouts")
    every: int = option(4, "keep states every this many steps")
    rendered: int = option(16, "envs rendered (and kept) per kept step, for labeller=vlm/stand-in")
    pairs: int = option(1000, "labelled pairs")
    epochs: int = option(300, "full-batch Adam epochs of the Bradley–Terry fit")
    temperature: float = option(0.0, "labeller=scripted: Bradley–Terry noise of the labels (0: exact)")
    run_dir: str | None = option(None, "collect states with this run's policy instead of random actions")
    seed: int = option(0, "seed")
    out: str | None = option(None, "potential file (default logs/potential/<task>.pt)")
    llm_base_url: str | None = option(None, "VLM server, e.g. http://127.0.0.1:8000/v1 (default BATONLAB_LLM_BASE_URL)")
    llm_model: str | None = option(None, "VLM model name (default BATONLAB_LLM_MODEL)")
    llm_cache: str | None = option(None, "on-disk answer cache folder")


def run(args: list[str]) -> int:
    """`batonlab reward fit-potential`: fit and save a potential Φ; returns the exit code."""
    options = parse_subcommand(args, PotentialOptions(), "fit-potential", __doc__, needs_task=True)
    if options is None:
        return 0
    if options.labeller not in ("scripted", "vlm", "stand-in"):
        raise CliError(f"labeller={options.labeller}: expected scripted, vlm or stand-in")
    result, out = fit(options)
    print(f"[batonlab] potential: {result.num_pairs} labelled pairs ({result.dropped} without a usable answer); "
          f"agreement with the labels: train {result.train_accuracy:.3f}, held-out {result.heldout_accuracy:.3f}; wrote {out}")
    return 0


def fit(options: PotentialOptions):
    """Collect and label states, fit Φ and save it; returns the fit result and the file written."""
    import torch

    from batonlab.learned.preference import (
        ImageProgressOracle, ScriptedLabeller, VlmLabeller, collect_states, fit_potential, random_pairs, save_potential)

    torch.manual_seed(options.seed)
    env, policy = _rollout_env(options)
    if env.progress_term is None and options.labeller != "vlm":
        raise CliError(f"task {options.task} defines no true progress (TaskCfg.progress): use labeller=vlm")
    from batonlab.learned.features import field_specs

    try:
        field_specs(env, options.group, options.fields)
    except KeyError as err:
        raise CliError(f"reward fit-potential: {err.args[0]}") from None
    render = options.labeller != "scripted"
    print(f"[batonlab] collecting states: {options.num_envs} envs x {options.steps} steps"
          + (f", {options.rendered} rendered every {options.every} steps" if render else ""), file=sys.stderr)
    samples = collect_states(env, lambda e: e.true_progress() if e.progress_term is not None else torch.zeros(e.num_envs),
                             options.group, options.steps, policy=policy, every=options.every,
                             rendered_per_sample=options.rendered, render=render, fields=options.fields)
    generator = torch.Generator().manual_seed(options.seed)
    pairs = random_pairs(len(samples.features), options.pairs, generator)
    description, _ = task_brief(options.task)
    if options.labeller == "scripted":
        labels, stats = ScriptedLabeller(options.temperature, options.seed).label(samples, pairs), {}
    else:
        oracle = None
        if options.labeller == "stand-in":
            oracle = ImageProgressOracle()
            oracle.register(samples.frames, samples.progress)
        llm = "stand-in" if options.labeller == "stand-in" else "api"
        with llm_client(llm, options.llm_base_url, options.llm_model, options.llm_cache, preference_oracle=oracle) as client:
            labels = VlmLabeller(client, description).label(samples, pairs)
            stats = dict(client.stats)
        print(f"[batonlab] VLM requests: {stats}", file=sys.stderr)
    result = fit_potential(samples, pairs, labels, epochs=options.epochs, seed=options.seed)
    truth = samples.progress
    with torch.no_grad():
        phi = result.model(samples.features)
    info = {"task": options.task, "labeller": options.labeller, "pairs": result.num_pairs, "dropped": result.dropped,
            "heldout_accuracy": result.heldout_accuracy, "states": len(truth),
            "spearman_vs_true_progress": _spearman(phi, truth) if env.progress_term is not None else None,
            "client_stats": stats}
    out = Path(options.out or Path("logs") / "potential" / f"{options.task}.pt")
    save_potential(out, result.model, env, options.group, info, options.fields)
    env.close()
    return result, out


def _rollout_env(options: PotentialOptions):
    """(env, policy or None): a fresh training env with random actions, or a run's policy and env."""
    from batonlab.env.env import BatonEnv
    from batonlab.tasks import make_task_cfg

    if options.run_dir is None:
        cfg = make_task_cfg(options.task)
        cfg.num_envs, cfg.seed = options.num_envs, options.seed
        return BatonEnv(cfg), None
    from batonlab.cli.common import build_invocation
    from batonlab.cli.policy_loading import load_trained

    inv = build_invocation([f"task={options.task}", f"run_dir={options.run_dir}", f"env.num_envs={options.num_envs}",
                            f"seed={options.seed}"])
    env, runner, _, ckpt = load_trained(inv)
    print(f"[batonlab] collecting states with the policy of {ckpt}", file=sys.stderr)
    return env, runner.inference_policy()


def _spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a.numpy(), b.numpy()).statistic)
