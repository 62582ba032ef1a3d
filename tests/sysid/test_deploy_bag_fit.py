# SPDX-License-Identifier: BSD-3-Clause
"""A bag that `policy_node` recorded over real DDS from a sim robot running the changed simulator (`deploy --sim
--sim-fit`) is fitted back as `play record=` bags are: each group within 10 % (one value per group for the arm's
joints, `shared=true`: test_bag_fit fits them per joint), the delay exactly, the held-out replay error ≥ 5× lower."""

from __future__ import annotations

import numpy as np
import pytest

from batonlab.cli import sysid as sysid_cli
from batonlab.robots.fitted import read_fit, write_fit
from ros.exports import arm_reach_manifest, make_export
from sysid.test_bag_fit import assert_recovered, truth_overlay


def test_a_policy_node_bag_of_the_changed_sim_robot_is_fitted_back(tmp_path):
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from batonlab.cli.deploy import run_sim_to_sim
    from ros.nodes import new_domain_id

    truth = write_fit(tmp_path / "truth.yaml", truth_overlay())
    rng = np.random.default_rng(0)  # a random linear policy: it moves every joint, and each episode differently
    export_dir = make_export(tmp_path / "export", arm_reach_manifest(), weight=rng.normal(0.0, 0.5, (24, 6)),
                             bias=rng.normal(0.0, 0.3, 6))
    record = {"record": True, "record_dir": str(tmp_path / "bag"), "record_seed": 0}
    summary = run_sim_to_sim(export_dir, "arm_reach", num_episodes=2, domain_id=new_domain_id(), timeout_s=300,
                             log_dir=tmp_path, policy_params=record, sim_fit=str(truth))
    assert summary["num_episodes"] == 2
    (bag,) = (tmp_path / "bag").iterdir()
    out = tmp_path / "fit"
    assert sysid_cli.run([str(bag), "params=armature,damping,frictionloss,delay", f"out={out}", "max_iters=6",
                          "max_delay_s=0.04", "holdout_every=2", "shared=true", "report=false"]) == 0
    fit = read_fit(out / "fit.yaml")
    assert (fit.source["fit_segments"], fit.source["held_out_segments"]) == (1, 1)  # the sim robot's warm-up left out
    assert_recovered(fit.values, fit.command_delay_s)
    before, after = (fit.source["rmse_rad"]["validation"][k] for k in ("before", "after"))
    assert before / after >= 5.0, (before, after)
