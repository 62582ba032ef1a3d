# SPDX-License-Identifier: BSD-3-Clause
"""The wheel-legged robot end to end over ROS 2: the trained wl_balance policy in `policy_node`, the
floating-base `sim_robot_node` as the robot (IMU, joint states, odometry, position legs, velocity
wheels, the held arm), `batonlab deploy --sim`'s wiring; the policy balances as in `play` on the same
seeds, and the bag policy_node records replays (re-evaluation exact, open-loop drift vs odometry).
"""

from __future__ import annotations

import numpy as np
import pytest

from batonlab.deploy import load_manifest
from batonlab.logs.bag_reader import open_bag
from batonlab.logs.replay import reevaluate_policy
from batonlab.tasks.replay import replay_open_loop_for

SEEDS = range(1000, 1003)


@pytest.mark.slow
def test_wl_balance_over_ros2_balances_as_in_play_and_its_bag_replays(wl_balance_policy, tmp_path):
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from batonlab.cli.deploy import run_sim_to_sim
    from ros.nodes import new_domain_id
    from ros.training import LOCKSTEP_ACTION_DELAY, play_on_seeds

    export = wl_balance_policy.export_dir
    manifest = load_manifest(export)
    summary = run_sim_to_sim(export, "wl_balance", seed=SEEDS[0], num_episodes=len(SEEDS), domain_id=new_domain_id(),
                             results_file=tmp_path / "results.json", timeout_s=400, log_dir=tmp_path / "logs",
                             policy_params={"record": True, "record_dir": str(tmp_path / "bags"),
                                            "record_seed": SEEDS[0]})
    assert summary is not None, "sim_robot_node wrote no results"
    episodes = summary["episodes"]
    assert [e["seed"] for e in episodes] == list(SEEDS) and all(e["commands_received"] > 0 for e in episodes)
    ros_survived = np.array([not e["terminated"] for e in episodes])
    play = play_on_seeds("wl_balance", wl_balance_policy.policy, SEEDS, action_delay=LOCKSTEP_ACTION_DELAY)
    print(f"\n[sim2sim wl_balance] survival over ROS 2 {ros_survived.mean():.3f}, play {1 - play.terminated.mean():.3f}; "
          f"lengths ros {[e['length'] for e in episodes]} play {play.lengths.tolist()}")
    assert (~play.terminated).all(), "the trained policy must balance in play for the comparison to mean anything"
    assert ros_survived.all(), "the robot fell over ROS 2 where it balances in play"

    (bag,) = (tmp_path / "bags").iterdir()
    log = open_bag(bag)
    assert log.metadata["task"] == "wl_balance" and log.odom is not None and log.imu is not None
    # The command vector: policy joints (legs, wheels) then the held arm.
    assert log.command_joint_names == [*manifest.joint_names, *manifest.held_joints.names]
    assert "run" in log.policy_steps.safety_state
    policy = reevaluate_policy(log)
    assert policy.max_abs_diff < 1e-5, "the logged observations must reproduce the logged actions"
    replay = replay_open_loop_for(log)
    assert replay.has_base and np.isfinite(replay.base_drift).all()
    print(f"[sim2sim wl_balance] bag: re-evaluation max diff {policy.max_abs_diff:.1e}; open-loop base drift "
          f"final {replay.final_base_drift:.3f} m, max {replay.max_base_drift:.3f} m over {len(replay.segments)} segments")
