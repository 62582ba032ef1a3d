# SPDX-License-Identifier: BSD-3-Clause
"""Bad files and options of replay, import-isaaclab, deploy, robot= and learned rewards: one line
`batonlab <command>: ...` on stderr, exit code 2, and no output folder left behind."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from batonlab.cli.main import main
from batonlab.deploy.recording import BagRecorder
from deploy.test_isaaclab_import import io_descriptors, write_inputs
from robot_files import write_urdf_arm
from ros.exports import make_export

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
"""A PNG signature and junk: a binary file under a text file's name."""

ARM = ["shoulder_yaw", "shoulder_pitch", "elbow_pitch", "forearm_roll", "wrist_pitch", "wrist_roll"]

SPARSE = ["train", "task=arm_reach_sparse", "env.num_envs=1", "max_iterations=1", "eval_episodes=0", "progress=false"]
"""A training whose learned reward terms are switched on by the case's override."""


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> SimpleNamespace:
    """The bad (and good) inputs of every case, built once."""
    root = tmp_path_factory.mktemp("bad_inputs")
    f = SimpleNamespace(root=root, png=root / "image.yaml", png_py=root / "image.py", file=root / "a_file")
    f.png.write_bytes(PNG)
    f.png_py.write_bytes(PNG)
    f.file.write_text("not a folder\n")
    f.arm = write_urdf_arm(root / "arm")
    f.bad_xml = write_urdf_arm(root / "bad_xml")
    urdf = root / "bad_xml" / "test_arm_description" / "urdf" / "test_arm.urdf"
    urdf.write_text(urdf.read_text()[:-30])  # cut inside the closing tags
    f.png_model = write_urdf_arm(root / "png_model")
    (root / "png_model" / "test_arm_description" / "urdf" / "test_arm.urdf").write_bytes(PNG)
    f.bag = root / "bag"
    recorder = BagRecorder(f.bag, {"task": "arm_reach", "source": "test"}, ARM)
    for k in range(10):
        recorder.joint_state(k * 20_000_000, np.full(6, 0.01 * k), np.zeros(6))
    assert recorder.close()["recording_ok"]
    f.io, f.policy, f.quad = write_inputs(root / "isaaclab", io_descriptors())
    f.export = make_export(root / "export")
    f.junk_pt = root / "junk.pt"
    f.junk_pt.write_bytes(b"PK\x03\x04 cut short")
    f.no_frames = root / "no_frames.npz"
    np.savez(f.no_frames, images=np.zeros((3, 8, 8, 3), np.uint8))
    for name, source in {"imports": "import os\ndef progress(obs):\n    return obs['ee_pos'][:, 0]\n",
                         "dunder": "def progress(obs):\n    return obs.__class__\n",
                         "not_python": "progress = (\n",
                         "wrong_shape": "def progress(obs):\n    return obs['ee_pos']\n",
                         "endless": "def progress(obs):\n    while True:\n        pass\n"}.items():
        setattr(f, name, root / f"{name}.py")
        getattr(f, name).write_text(source)
    return f


def _replay(f, *extra):
    return ["replay", str(f.bag), *map(str, extra)]


def _import(f, out, robot=None):
    return ["import-isaaclab", str(f.io), str(f.policy), "--robot", str(robot or f.quad), str(out)]


def _count_bonus(function, *extra):
    return [*SPARSE, f"env.rewards.count_bonus.params.function={function}", *extra]


def _progress(encoder, demo):
    return [*SPARSE, f"env.rewards.progress.params.encoder={encoder}", f"env.rewards.progress.params.demo={demo}"]


CASES = [
    # replay: options are used or refused, never ignored; nothing is replayed first.
    ("replay --task unknown", lambda f: _replay(f, "--task", "no_such_task"), "--task no_such_task: unknown task"),
    ("replay --robot missing", lambda f: _replay(f, "--robot", f.root / "missing.yaml"),
     "no such file; expected a robot"),
    ("replay --robot fixed task", lambda f: _replay(f, "--robot", f.arm), "task 'arm_reach' has a fixed robot"),
    ("replay --robot bad xml", lambda f: _replay(f, "--task", "reach", "--robot", f.bad_xml), "is not valid XML"),
    ("replay --fps 0", lambda f: _replay(f, "--fps", "0", "--video", f.root / "v.mp4"),
     "--fps 0: expected a frame rate > 0"),
    ("replay --fps -2", lambda f: _replay(f, "--fps", "-2"), "--fps -2: expected a frame rate > 0"),
    ("replay --size 0x8", lambda f: _replay(f, "--size", "0x8"), "--size 0x8: expected a height and width >= 1"),
    ("replay --report file", lambda f: _replay(f, "--report", f.file), "is a file; expected a folder"),
    ("replay --video folder", lambda f: _replay(f, "--video", f.root), "is a folder; expected a video file"),
    ("replay --policy no export", lambda f: _replay(f, "--policy", f.root),
     "no manifest.json there; expected an export"),
    # import-isaaclab: OUT first, then the robot description and the IO descriptors.
    ("import OUT is a file", lambda f: _import(f, f.file),
     "is a file; an export goes into a folder that does not exist"),
    ("import --robot png", lambda f: _import(f, f.root / "out", f.png), "is not a text file (expected a YAML mapping)"),
    ("import --robot bad xml", lambda f: _import(f, f.root / "out", f.bad_xml), "is not valid XML"),
    ("import --robot png model", lambda f: _import(f, f.root / "out", f.png_model), "is not valid XML"),
    ("import IO descriptors png", lambda f: ["import-isaaclab", str(f.png), str(f.policy), "--robot", str(f.quad),
                                            str(f.root / "out")],
     "not a text file (expected Isaac Lab's IO-descriptor"),
    # robot= of train, play and export.
    ("train robot bad xml", lambda f: ["train", "task=reach", f"robot={f.bad_xml}"],
     "is not valid XML: unclosed token"),
    ("train robot png", lambda f: ["train", "task=reach", f"robot={f.png}"],
     "is not a text file (expected a YAML mapping)"),
    ("train robot png model", lambda f: ["train", "task=reach", f"robot={f.png_model}"],
     "is not valid XML: not well-formed"),
    ("train velocity fixed base", lambda f: ["train", "task=velocity", f"robot={f.arm}"],
     "task velocity needs a floating base"),
    ("play velocity fixed base", lambda f: ["play", "task=velocity", f"robot={f.arm}"],
     "task velocity needs a floating base"),
    ("export robot png", lambda f: ["export", "task=reach", f"robot={f.png}"],
     "is not a text file (expected a YAML mapping)"),
    # deploy: the sim robot is checked before the nodes start.
    ("deploy --robot without --sim", lambda f: ["deploy", str(f.export), "--robot", str(f.arm)], "pass --sim too"),
    ("deploy --sim robot png", lambda f: ["deploy", str(f.export), "--sim", "--task", "reach", "--robot", str(f.png)],
     "is not a text file (expected a YAML mapping)"),
    # learned-reward files switched on from train.
    ("potential missing", lambda f: [*SPARSE, f"env.rewards.potential.params.potential={f.root / 'none.pt'}"],
     "does not exist (write one with: batonlab reward fit-potential)"),
    ("potential unreadable", lambda f: [*SPARSE, f"env.rewards.potential.params.potential={f.junk_pt}"],
     "is not a readable potential file"),
    ("encoder missing", lambda f: _progress(f.root / "none.pt", f.no_frames), "none.pt does not exist; train one with"),
    ("encoder corrupt", lambda f: _progress(f.junk_pt, f.no_frames), "is not a readable progress encoder file"),
    ("progress fn imports", lambda f: _count_bonus(f.imports), "line 1 imports 'os' (imports are not allowed)"),
    ("progress fn dunder", lambda f: _count_bonus(f.dunder), "private attribute '.__class__'"),
    ("progress fn not python", lambda f: _count_bonus(f.not_python), "generated code rejected: syntax error at line 1"),
    ("progress fn missing", lambda f: _count_bonus(f.root / "none.py"), "progress function file"),
    ("progress fn png", lambda f: _count_bonus(f.png_py), "is not a text file (expected a Python file"),
    ("progress fn wrong shape", lambda f: _count_bonus(f.wrong_shape),
     "expected (1,) (one value per env) (pass params"),
    ("progress fn endless", lambda f: _count_bonus(f.endless),
     "exceeded its time limit"),
]


@pytest.mark.parametrize("argv,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_leaves_no_output(argv, message, files, tmp_path, capsys):
    args = argv(files)
    if args[0] in ("train", "play", "export"):
        args.append(f"log_root={tmp_path / 'logs'}")
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"batonlab {args[0]}: ") and err.count("\n") == 1, err
    assert message in err, err
    assert not (files.root / "out").exists() and not files.file.is_dir()
    assert not any((tmp_path / "logs").glob("*/*")), "a run folder was left behind"


def test_the_demo_with_wrong_keys_is_one_line(files, tmp_path, capsys, untrained_encoder):
    code = main([*_progress(untrained_encoder, files.no_frames), f"log_root={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("batonlab train: demo ") and "has no 'frames' array (it holds ['images'])" in err, err


@pytest.fixture(scope="module")
def untrained_encoder(tmp_path_factory) -> Path:
    """An encoder file of untrained weights: enough for the demo to be read next."""
    from batonlab.learned.progress_encoder import EncoderCfg, ProgressEncoder, save_encoder

    folder = tmp_path_factory.mktemp("encoder")
    return save_encoder(folder / "encoder.pt", ProgressEncoder(EncoderCfg()), ["arm_reach"], 0)
