# SPDX-License-Identifier: BSD-3-Clause
"""Bad bags give clear errors; the readable part of a truncated bag is still read."""

from __future__ import annotations

import numpy as np
import pytest

from batonlab.cli.main import main
from batonlab.deploy.recording import BagRecorder
from batonlab.logs.bag_reader import BagError, open_bag
from batonlab.logs.replay import reevaluate_policy
from batonlab.tasks.replay import replay_open_loop_for

ARM = ["shoulder_yaw", "shoulder_pitch", "elbow_pitch", "forearm_roll", "wrist_pitch", "wrist_roll"]


def states_only_bag(path, ticks: int = 50, chunk_bytes: int = 1 << 20):
    """An arm_reach bag with joint states but no commands and no policy steps."""
    rec = BagRecorder(path, {"task": "arm_reach", "source": "test"}, ARM, chunk_bytes=chunk_bytes)
    for k in range(ticks):
        rec.joint_state(k * 20_000_000, np.full(6, 0.01 * k), np.zeros(6))
    assert rec.close()["recording_ok"]
    return path


@pytest.mark.parametrize("content", [b"hello, I am a text file\n", b"", b"\x89PNG\r\n\x1a\n" + bytes(100)])
def test_a_file_that_is_not_a_bag(tmp_path, capsys, content):
    path = tmp_path / "notes.mcap"
    path.write_bytes(content)
    with pytest.raises(BagError, match="not a rosbag2 bag"):
        open_bag(path)
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not a rosbag2 bag" in err and "Traceback" not in err
    assert main(["bag", "info", str(path)]) == 2


def test_folders_and_paths_that_are_not_bags(tmp_path, capsys):
    with pytest.raises(BagError, match="does not exist"):
        open_bag(tmp_path / "missing")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "readme.txt").write_text("x")
    with pytest.raises(BagError, match="expected metadata.yaml and .mcap"):
        open_bag(tmp_path / "folder")
    (tmp_path / "yaml").mkdir()
    (tmp_path / "yaml" / "metadata.yaml").write_text("just: text\n")
    with pytest.raises(BagError, match="not rosbag2 metadata"):
        open_bag(tmp_path / "yaml")
    assert main(["bag", "export", str(tmp_path / "folder"), "--csv", str(tmp_path / "csv")]) == 2
    assert "is not a rosbag2 bag" in capsys.readouterr().err


def test_a_bag_missing_a_topic(tmp_path, capsys):
    bag = states_only_bag(tmp_path / "bag")
    log = open_bag(bag)
    with pytest.raises(BagError, match=r"open-loop replay needs the topic\(s\) \['/joint_commands'\]"):
        replay_open_loop_for(log)
    with pytest.raises(BagError, match=r"policy re-evaluation needs the topic\(s\) \['/batonlab/policy_step'\]"):
        reevaluate_policy(log, tmp_path)
    assert main(["replay", str(bag), "--mode", "open_loop"]) == 2
    err = capsys.readouterr().err
    assert "/joint_commands" in err and "topics: /batonlab/metadata (1), /joint_states (50)" in err
    # Asking for everything replays what the bag allows and says what it skipped.
    assert main(["replay", str(bag), "--video", str(tmp_path / "v.mp4"), "--size", "48x64", "--fps", "5"]) == 0
    out = capsys.readouterr().out
    assert "skipped open_loop" in out and "state playback" in out and (tmp_path / "v.mp4").is_file()


def test_truncated_bag_keeps_the_complete_part(tmp_path, capsys):
    bag = states_only_bag(tmp_path / "bag", ticks=400, chunk_bytes=4096)
    (mcap_file,) = bag.glob("*.mcap")
    data = mcap_file.read_bytes()
    mcap_file.write_bytes(data[: len(data) // 2])  # metadata.yaml stays: a file cut while copying
    log = open_bag(bag)
    assert log.truncated and 150 < log.joint_states.t.size < 250
    assert any("without an MCAP footer" in w for w in log.warnings)
    np.testing.assert_allclose(log.joint_states.position[:, 0], 0.01 * np.arange(log.joint_states.t.size))
    assert main(["bag", "info", str(bag)]) == 0
    out = capsys.readouterr().out
    assert "warnings: (truncated bag)" in out and "/joint_states" in out


def test_truncated_before_the_first_complete_message(tmp_path):
    bag = states_only_bag(tmp_path / "bag", ticks=10)
    (mcap_file,) = bag.glob("*.mcap")
    mcap_file.write_bytes(mcap_file.read_bytes()[:200])
    with pytest.raises(BagError, match="nothing readable"):
        open_bag(bag)


def test_damaged_bytes_lose_only_the_damaged_messages(tmp_path):
    bag = states_only_bag(tmp_path / "bag", ticks=400, chunk_bytes=4096)
    (mcap_file,) = bag.glob("*.mcap")
    data = bytearray(mcap_file.read_bytes())
    for i in np.random.default_rng(1).integers(1000, len(data) // 2, 20):
        data[i] ^= 0xFF
    mcap_file.write_bytes(bytes(data))
    log = open_bag(bag)
    assert log.warnings and 300 < log.joint_states.t.size <= 400
