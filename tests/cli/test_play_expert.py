# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab play play.expert=true`: the task's scripted expert played like a trained policy (no run), its metrics
where a user finds them; a task without an expert, and bags of a hierarchy, refused in one line."""

from __future__ import annotations

import json

from batonlab.cli.main import main


def test_the_scripted_expert_plays_without_a_run(tmp_path, capsys):
    code = main(["play", "task=wl_baton_scripted", "play.expert=true", "play.num_episodes=2", "play.video=false",
                 "seed=0", f"log_root={tmp_path}", "progress=false"])
    out = capsys.readouterr().out
    assert code == 0, out
    metrics = json.loads((tmp_path / "wl_baton" / "expert" / "play" / "metrics.json").read_text())
    assert metrics["checkpoint"] == "expert" and metrics["num_episodes"] == 2
    assert metrics["success_rate"] == 1.0  # seed 0's two episodes (the expert takes 92 of 96 over seeds 0-5)
    assert "from expert" in out


def test_no_expert_or_bags_of_a_hierarchy_are_one_line_refusals(tmp_path, capsys):
    for args, message in [
        (["task=arm_reach", "play.expert=true"], "task 'arm_reach' has no scripted expert"),
        (["task=wl_baton_scripted", "play.expert=true", f"run_dir={tmp_path}"], "drop run_dir= / checkpoint="),
        (["task=wl_baton_scripted", "play.expert=true", f"record={tmp_path}/bags"],
         "cannot record wl_baton_scripted: its action term 'commands' (ScriptedWholeBodyAction) drives no joints"),
    ]:
        code = main(["play", *args, "play.num_episodes=2", "play.video=false", f"log_root={tmp_path}/logs",
                     "progress=false"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and message in err, (args, err)
    assert not (tmp_path / "logs").exists() and not (tmp_path / "bags").exists()
