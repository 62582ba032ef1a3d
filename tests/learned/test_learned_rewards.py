# SPDX-License-Identifier: BSD-3-Clause
"""Preference potentials (scripted and through the VLM API), potential shaping, count bonuses over an
LLM-written progress function, and the reward search on a local Ray, all on arm_reach_sparse."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from batonlab.cli.main import main
from batonlab.env.env import BatonEnv
from batonlab.learned import stand_in_writer
from batonlab.learned.chat_client import ChatClient, ChatClientCfg
from batonlab.learned.features import read_features
from batonlab.learned.preference import (
    ImageProgressOracle,
    ScriptedLabeller,
    VlmLabeller,
    collect_states,
    fit_potential,
    PotentialFileError,
    load_potential,
    random_pairs,
    save_potential,
)
from batonlab.learned.stand_in_server import StandInServer
from batonlab.tasks import make_task_cfg

TASK = "arm_reach_sparse"


def sparse_env(num_envs: int = 32, seed: int = 0, params: dict | None = None) -> BatonEnv:
    """arm_reach_sparse; `params` {(reward term, key): value} switch learned terms on."""
    cfg = make_task_cfg(TASK)
    cfg.num_envs, cfg.seed = num_envs, seed
    for (term, key), value in (params or {}).items():
        cfg.rewards[term].params[key] = value
    return BatonEnv(cfg)


@pytest.fixture(scope="module")
def scripted_potential(tmp_path_factory):
    """Φ fitted on 32 envs x 150 random-action steps with exact scripted labels; (path, fit result, samples)."""
    env = sparse_env()
    samples = collect_states(env, lambda e: e.true_progress(), "policy", steps=150, every=3, render=False)
    pairs = random_pairs(len(samples.features), 3000, torch.Generator().manual_seed(0))
    result = fit_potential(samples, pairs, ScriptedLabeller().label(samples, pairs), epochs=300)
    path = save_potential(tmp_path_factory.mktemp("potential") / "phi.pt", result.model, env, "policy", {"task": TASK})
    env.close()
    return path, result, samples


def test_scripted_potential_orders_states_by_true_progress(scripted_potential):
    path, result, samples = scripted_potential
    assert result.heldout_accuracy > 0.88, result.heldout_accuracy
    model, header = load_potential(path)
    held_out = sparse_env(seed=7)  # states of other episodes than the fit's
    other = collect_states(held_out, lambda e: e.true_progress(), "policy", steps=60, every=3, render=False)
    with torch.no_grad():
        rho = spearmanr(model(other.features).numpy(), other.progress.numpy()).statistic
    print(f"Spearman(Φ, true progress) on held-out states: {rho:.3f}")
    assert rho > 0.85
    assert header["group"] == "policy" and ("ee_target", 3) in [tuple(f) for f in header["fields"]]


def test_potential_shaping_is_gamma_phi_next_minus_phi(scripted_potential):
    path, _, _ = scripted_potential
    env = sparse_env(num_envs=16, params={("potential", "potential"): str(path), ("potential", "gamma"): 0.9})
    term = env.reward_manager.terms["potential"]
    model, _ = load_potential(path)
    env.reset()
    for _ in range(30):  # 4 s episodes of 200 steps: no reset within; each step pays (γΦ(s′) − Φ(s)) exactly
        before = model(read_features(env, "policy")).detach()
        sums = env.reward_manager.episode_sums["potential"].clone()  # accumulates weight * value * dt
        env.step(env.uniform((16, env.num_actions), -1, 1))
        after = model(read_features(env, "policy")).detach()
        torch.testing.assert_close(term.prev, after)
        paid = env.reward_manager.episode_sums["potential"] - sums
        torch.testing.assert_close(paid, 0.9 * after - before, atol=1e-5, rtol=1e-4)
    # After a reset, Φ(s) is the new episode's first state.
    env.reset()
    torch.testing.assert_close(term.prev, model(read_features(env, "policy")).detach())
    env.close()


def test_potential_file_errors_are_clear(tmp_path, scripted_potential):
    path, _, _ = scripted_potential
    with pytest.raises(PotentialFileError, match="fit-potential"):
        load_potential(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="not a readable potential file"):
        load_potential(tmp_path / "junk.pt")
    torch.save({"format": "batonlab.potential", "version": 99}, tmp_path / "future.pt")
    with pytest.raises(ValueError, match="version 99"):
        load_potential(tmp_path / "future.pt")
    # A potential fitted on arm_reach's fields does not fit arm_lift's policy group.
    from batonlab.env.cfg import RewardTermCfg
    from batonlab.rewards.learned import PotentialShaping

    cfg = make_task_cfg("arm_lift")
    cfg.num_envs = 2
    cfg.rewards["potential"] = RewardTermCfg(func=PotentialShaping, params={"potential": str(path)})
    env = BatonEnv(cfg)  # Φ reads observation terms, which the env builds after its reward terms
    with pytest.raises(ValueError, match="fitted on group 'policy' fields"):
        env.reset()
    env.close()


def test_vlm_labels_through_the_api_fit_a_potential(tmp_path):
    """The whole VLM path for real: frames → PNG → HTTP → stand-in server (answers from the frames' true
    progress) → parsed labels → Bradley–Terry fit; failed and malformed answers are dropped and counted."""
    env = sparse_env(num_envs=32)
    samples = collect_states(env, lambda e: e.true_progress(), "policy", steps=200, every=4, rendered_per_sample=16)
    assert samples.frames.shape == (800, 64, 64, 3) and samples.frames.dtype == np.uint8
    oracle = ImageProgressOracle()
    oracle.register(samples.frames, samples.progress)
    pairs = random_pairs(len(samples.features), 800, torch.Generator().manual_seed(1))
    with StandInServer(preference_oracle=oracle) as server:
        client = ChatClient(ChatClientCfg(base_url=server.base_url, model=server.model, cache_dir=str(tmp_path / "cache"),
                                          max_retries=2, backoff_s=0.01, max_concurrency=4))
        server.malformed_next(5)
        server.fail_next(2, status=503)  # retried: still answered (2 retries: both failures may hit one request)
        labels = VlmLabeller(client, "reach the target").label(samples, pairs)
        stats = client.stats
        assert stats["malformed"] == 5 and int(torch.isnan(labels).sum()) == 5
        truth = ScriptedLabeller().label(samples, pairs)
        known = ~torch.isnan(labels)
        # Ties in true progress (two states at exactly the same distance) are the only possible disagreement.
        assert (labels[known] == truth[known]).float().mean() > 0.99
        requests = server.requests
        again = VlmLabeller(client, "reach the target").label(samples, pairs)  # every parsed answer is cached
        assert server.requests - requests == 5  # only the 5 malformed ones are asked again
        assert int(torch.isnan(again).sum()) == 0
    result = fit_potential(samples, pairs, labels, epochs=300)
    assert result.dropped == 5 and result.heldout_accuracy > 0.8
    env.close()
    other = collect_states(sparse_env(seed=5), lambda e: e.true_progress(), "policy", steps=120, every=2, render=False)
    with torch.no_grad():
        rho = spearmanr(result.model(other.features).numpy(), other.progress.numpy()).statistic
    print(f"VLM-label potential: Spearman(Φ, true progress) on held-out states {rho:.3f}")
    assert rho > 0.8


def test_vlm_failures_never_crash_and_give_a_clear_error(tmp_path):
    env = sparse_env(num_envs=4)
    samples = collect_states(env, lambda e: e.true_progress(), "policy", steps=20, every=5, rendered_per_sample=4)
    pairs = random_pairs(len(samples.features), 12, torch.Generator().manual_seed(0))
    client = ChatClient(ChatClientCfg(base_url="http://127.0.0.1:9/v1", model="nobody", max_retries=1, backoff_s=0.01,
                                      timeout_s=0.5))
    labels = VlmLabeller(client, "reach").label(samples, pairs)  # nothing listens on port 9
    assert torch.isnan(labels).all() and client.stats["failures"] == 12
    with pytest.raises(ValueError, match="only 0 usable preference labels"):
        fit_potential(samples, pairs, labels)
    env.close()


def test_fit_potential_cli_with_the_stand_in_vlm(tmp_path, capsys):
    out = tmp_path / "phi.pt"
    code = main(["reward", "fit-potential", f"task={TASK}", "labeller=stand-in", "pairs=600", f"out={out}"])
    assert code == 0
    _, header = load_potential(out)
    assert header["info"]["labeller"] == "stand-in" and header["info"]["client_stats"]["answered"] == 600
    assert header["info"]["spearman_vs_true_progress"] > 0.8
    assert main(["reward", "fit-potential", f"task={TASK}", "labeller=oracle"]) == 2
    assert "expected scripted, vlm or stand-in" in capsys.readouterr().err


def test_count_bonus_pays_beta_over_sqrt_visits(tmp_path):
    function = tmp_path / "progress.py"
    function.write_text(stand_in_writer.write([{"role": "user", "content": 'def progress(obs) obs["ee_pos"] obs["ee_target"]'}],
                                              {"seed": 1000}).split("```python\n")[1].split("```")[0])
    env = sparse_env(num_envs=16, params={("count_bonus", "function"): str(function), ("count_bonus", "beta"): 2.0})
    term = env.reward_manager.terms["count_bonus"]
    env.reset()
    total = 0
    for _ in range(5):
        before = term.counts.clone()
        sums = env.reward_manager.episode_sums["count_bonus"].clone()
        env.step(env.uniform((16, env.num_actions), -1, 1))
        bins = (term.last_progress * 20).long().clamp(max=19)
        total += 16
        assert term.counts.sum() == total
        expected_counts = before + torch.bincount(bins, minlength=20)
        torch.testing.assert_close(term.counts, expected_counts)
        paid = (env.reward_manager.episode_sums["count_bonus"] - sums) / env.step_dt
        torch.testing.assert_close(paid, 2.0 / expected_counts[bins].sqrt(), rtol=1e-4, atol=1e-6)
    truth = env.true_progress()
    torch.testing.assert_close(term.last_progress, truth, atol=1e-5, rtol=1e-4)  # same formula as the task's truth
    term.close()
    env.close()


def test_a_failing_progress_function_stops_training_unless_told_to_turn_the_bonus_off(tmp_path, capsys):
    from batonlab.learned.errors import LearnedRewardError

    function = tmp_path / "progress.py"
    function.write_text('def progress(obs):\n    return obs["ee_pos"][:, 0] / 0.0\n')  # inf: non-finite
    env = sparse_env(num_envs=8, params={("count_bonus", "function"): str(function)})
    env.reset()
    with pytest.raises(LearnedRewardError, match="not finite.*turn_off_on_failure=true"):
        env.step(env.uniform((8, env.num_actions), -1, 1))
    env.reward_manager.terms["count_bonus"].close()
    env.close()
    env = sparse_env(num_envs=8, params={("count_bonus", "function"): str(function),
                                         ("count_bonus", "turn_off_on_failure"): True})
    env.reset()
    for _ in range(3):
        _, reward, *_ = env.step(env.uniform((8, env.num_actions), -1, 1))
        assert torch.isfinite(reward).all()
    term = env.reward_manager.terms["count_bonus"]
    assert term.failed is not None and "not finite" in term.failed
    assert "ProgressCountBonus turned off" in capsys.readouterr().err
    env.close()


def test_write_progress_cli_corrects_a_rejected_answer(tmp_path, capsys):
    out = tmp_path / "fn.py"
    assert main(["reward", "write-progress", f"task={TASK}", "llm=stand-in", f"out={out}"]) == 0
    err = capsys.readouterr().err
    assert "answer 1 rejected: generated code rejected: line 1 imports 'numpy'" in err
    assert "import" not in out.read_text() and "def progress(obs)" in out.read_text()
    assert main(["reward", "write-progress", f"task={TASK}", "llm=stand-in", "colour=blue"]) == 2
    assert "unknown option 'colour'" in capsys.readouterr().err


@pytest.mark.slow
def test_reward_search_two_rounds_two_samples_on_local_ray(tmp_path):
    """2 rounds x 2 samples, tiny budget, local Ray, the stand-in LLM: each round's prompts, trials, report."""
    from batonlab.cli.reward_search import TrialSetup, _Trial
    from batonlab.cli.learned_common import fields_and_sample, task_brief
    from batonlab.learned.search import SearchCfg, run_search

    prompts = []

    def writer(messages, body):
        prompts.append(messages[1]["content"])
        return stand_in_writer.write(messages, body)

    description, source = task_brief(TASK)
    fields, sample = fields_and_sample(TASK, "policy")
    trial = _Trial(TrialSetup(TASK, "policy", num_envs=32, train_iterations=3, eval_episodes=8))
    with StandInServer(text_oracle=writer) as server:
        client = ChatClient(ChatClientCfg(base_url=server.base_url, model=server.model))
        results = run_search(SearchCfg(iterations=2, samples=2, num_cpus=2), client, description, source, fields, sample,
                             trial, tmp_path)
    assert [(r.iteration, r.sample) for r in results] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(r.status == "trained" for r in results), [(r.status, r.error) for r in results]
    for r in results:
        assert (tmp_path / f"iter{r.iteration:02d}" / f"sample{r.sample:02d}" / "model_3.pt").is_file()
        assert set(r.components) == {"distance", "near", "precise"} and len(r.train_success) == 3
        assert 0.0 <= r.success <= 1.0 and r.env_steps == 3 * 24 * 32
    # Round 2's prompts carry the reflection on round 1; round 1's do not.
    first, second = prompts[0], prompts[-1]
    assert "Results of the last round" not in first and "Results of the last round" in second
    assert "near: mean" in second
    report = json.loads((tmp_path / "results.json").read_text())
    assert len(report["trials"]) == 4 and report["best"] is not None
    assert "## Round 1" in (tmp_path / "report.md").read_text() and (tmp_path / "search.png").stat().st_size > 1000
