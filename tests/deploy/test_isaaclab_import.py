# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab import-isaaclab`: an Isaac Lab quadruped velocity policy (IO descriptors + policy.onnx) becomes an
export that passes `batonlab deploy` and that the robot-side runtime runs exactly as Isaac Lab's managers would.

The IO-descriptor file is written here from Isaac Lab's documented format (the "IO Descriptors 101"
tutorial and its example isaac_velocity_flat_anymal_d_v0_IO_descriptors.yaml): a Go2-like 12-joint
quadruped in Isaac Lab's joint order (hips, thighs, calves), explicit actuators (zero drive gains in
the file), a policy group of base_ang_vel, projected_gravity, generated_commands, joint_pos_rel,
joint_vel_rel and last_action. The policy is a random ONNX MLP with Isaac Lab's fixed batch of one.
Expected actions come from onnxruntime on an observation assembled here with Isaac Lab's formulas.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper, save

from batonlab.cli.main import main
from batonlab.deploy import DeployRuntime, SafetyCfg, State, load_manifest

LEGS = ("FL", "FR", "RL", "RR")
ISAACLAB_JOINTS = [f"{leg}_{part}_joint" for part in ("hip", "thigh", "calf") for leg in LEGS]
"""Isaac Lab's (breadth-first) joint order: every hip, then every thigh, then every calf."""
MODEL_JOINTS = [f"{leg}_{part}_joint" for leg in LEGS for part in ("hip", "thigh", "calf")]
"""The model file's (depth-first) order, in which the robot publishes joint states."""


def _f32(value: float) -> float:
    """A number as Isaac Lab writes it: a float32 tensor value printed as a double."""
    return float(np.float32(value))


def _default(joint: str) -> float:
    leg, part = joint.split("_")[:2]
    if part == "hip":
        return 0.1 if leg.endswith("L") else -0.1
    return {"thigh": 0.8 if leg.startswith("F") else 1.0, "calf": -1.5}[part]


RANGES = {"hip": (-1.0472, 1.0472), "thigh": (-1.5708, 3.4907), "calf": (-2.7227, -0.83776)}
"""Joint limits by part [rad]."""
DEFAULT = {j: _f32(_default(j)) for j in ISAACLAB_JOINTS}
KP, KD = 20.0, 0.5
ACTION_SCALE = 0.25
OBS_SCALES = {"base_ang_vel": 0.25, "joint_vel_rel": 0.05}
JOINT_VEL_CLIP = [-100.0, 100.0]

ROBOT_YAML = """\
name: quad12
model: quad12.xml
base: floating
actuators:
  - joints: [".*_hip_joint", ".*_thigh_joint"]
    control: position
    stiffness: 20.0
    damping: 0.5
    velocity_limit: 30.1
    armature: 0.01
  - joints: [".*_calf_joint"]
    control: position
    stiffness: 20.0
    damping: 0.5
    effort_limit: 45.43
    velocity_limit: 15.7
    armature: 0.01
default_joint_pos: {".*L_hip_joint": 0.1, ".*R_hip_joint": -0.1, "F._thigh_joint": 0.8, "R._thigh_joint": 1.0,
                    ".*_calf_joint": -1.5}
imu_site: imu
"""
"""The robot description: gains as in Isaac Lab's Go2 actuators; hip and thigh effort limits from the model file."""


def quadruped_mjcf() -> str:
    """A 12-joint quadruped on a floating base, primitives only; hips and thighs carry their effort limit; an IMU
    site on the base and one on a jointless body (a URDF fixed joint's child) on it."""
    legs = []
    for leg in LEGS:
        x, y = (0.19 if leg[0] == "F" else -0.19), (0.05 if leg[1] == "L" else -0.05)
        side = 1.0 if leg[1] == "L" else -1.0
        r = {part: f"{lo} {hi}" for part, (lo, hi) in RANGES.items()}
        legs.append(f"""
      <body name="{leg}_hip" pos="{x} {y} 0">
        <joint name="{leg}_hip_joint" axis="1 0 0" range="{r['hip']}" actuatorfrcrange="-23.7 23.7"/>
        <geom type="capsule" size="0.04" fromto="0 0 0 0 {0.08 * side} 0" mass="0.7"/>
        <body name="{leg}_thigh" pos="0 {0.08 * side} 0">
          <joint name="{leg}_thigh_joint" axis="0 1 0" range="{r['thigh']}" actuatorfrcrange="-23.7 23.7"/>
          <geom type="capsule" size="0.025" fromto="0 0 0 0 0 -0.21" mass="1.0"/>
          <body name="{leg}_calf" pos="0 0 -0.21">
            <joint name="{leg}_calf_joint" axis="0 1 0" range="{r['calf']}"/>
            <geom type="capsule" size="0.02" fromto="0 0 0 0 0 -0.21" mass="0.2"/>
          </body>
        </body>
      </body>""")
    return f"""<mujoco model="quad12">
  <compiler angle="radian"/>
  <worldbody>
    <body name="base" pos="0 0 0.4">
      <freejoint name="root"/>
      <geom type="box" size="0.19 0.05 0.05" mass="6"/>
      <site name="imu" pos="0 0 0.02"/>
      <body name="imu_link" pos="0.05 0 0.03">
        <site name="imu_chip" pos="0 0.01 0"/>
      </body>{''.join(legs)}
    </body>
  </worldbody>
</mujoco>
"""


# The Isaac Lab side: IO descriptors and a policy.


def obs_term(name: str, width: int, observation_type: str, description: str, scale=None, clip=None, history: int = 0,
             **fields) -> dict:
    """One observation term as `ObservationManager.get_IO_descriptors` writes it."""
    extras = {"description": description, "modifiers": None}
    if observation_type == "RootState":
        extras["axes"] = ["X", "Y", "Z"]
    return {"dtype": "torch.float32", "extras": extras,
            "full_path": f"isaaclab.envs.mdp.observations.{name}", "mdp_type": "Observation", "name": name,
            "observation_type": observation_type,
            "overloads": {"clip": clip, "flatten_history_dim": True, "history_length": history, "scale": scale},
            "shape": [width], **fields}


def io_descriptors(lin_vel: bool = False, history: int = 0) -> dict:
    """The IO descriptors of a flat-terrain velocity policy for the quadruped.

    Args:
        lin_vel: Observe base_lin_vel first (Isaac Lab's standard velocity tasks do).
        history: history_length of base_ang_vel and generated_commands.
    """
    n = len(ISAACLAB_JOINTS)
    terms = [
        obs_term("base_ang_vel", 3, "RootState", "Root angular velocity in the asset's root frame.",
                 scale=OBS_SCALES["base_ang_vel"], history=history),
        obs_term("projected_gravity", 3, "RootState", "Gravity projection on the asset's root frame."),
        obs_term("generated_commands", 3, "Command", "The generated command from command term in the command manager "
                 "with the given name.", history=history),
        obs_term("joint_pos_rel", n, "JointState", "The joint positions of the asset w.r.t. the default joint positions.",
                 joint_names=list(ISAACLAB_JOINTS), joint_pos_offsets=[DEFAULT[j] for j in ISAACLAB_JOINTS]),
        obs_term("joint_vel_rel", n, "JointState", "The joint velocities of the asset w.r.t. the default joint "
                 "velocities.", scale=OBS_SCALES["joint_vel_rel"], clip=list(JOINT_VEL_CLIP),
                 joint_names=list(ISAACLAB_JOINTS), joint_vel_offsets=[0.0] * n),
        obs_term("last_action", n, "Action", "The last input action to the environment."),
    ]
    if lin_vel:
        terms.insert(0, obs_term("base_lin_vel", 3, "RootState", "Root linear velocity in the asset's root frame."))
    return {
        "actions": [{
            "action_type": "JointAction", "clip": None, "dtype": "torch.float32",
            "extras": {"description": "Joint action term that applies the processed actions to the articulation's "
                                      "joints as position commands."},
            "full_path": "isaaclab.envs.mdp.actions.joint_actions.JointPositionAction",
            "joint_names": list(ISAACLAB_JOINTS), "mdp_type": "Action", "name": "joint_position_action",
            "offset": [DEFAULT[j] for j in ISAACLAB_JOINTS], "scale": ACTION_SCALE, "shape": [n],
        }],
        "articulations": {"robot": {
            "default_joint_armature": [0.01] * n, "default_joint_damping": [0.0] * n,
            "default_joint_friction": [0.0] * n, "default_joint_pos": [DEFAULT[j] for j in ISAACLAB_JOINTS],
            "default_joint_pos_limits": [[_f32(v) for v in RANGES[j.split("_")[1]]] for j in ISAACLAB_JOINTS],
            "default_joint_stiffness": [0.0] * n, "default_joint_vel": [0.0] * n, "joint_names": list(ISAACLAB_JOINTS),
        }},
        "observations": {"policy": terms},
        "scene": {"decimation": 4, "dt": 0.02, "physics_dt": 0.005},
    }


def mlp_onnx(obs_dim: int, action_dim: int, seed: int = 0, hidden: int = 32, blind: slice = slice(0)) -> object:
    """A random ELU MLP `obs` (1, obs_dim) → `actions` (1, action_dim), as Isaac Lab's exporter names and shapes it;
    the inputs in `blind` have zero weights."""
    rng = np.random.default_rng(seed)
    weights = [rng.normal(0.0, 0.4, (obs_dim, hidden)), rng.normal(0.0, 0.1, hidden),
               rng.normal(0.0, 0.5 / np.sqrt(hidden), (hidden, action_dim)), rng.normal(0.0, 0.05, action_dim)]
    weights[0][blind] = 0.0
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W1"], ["h1"]), helper.make_node("Add", ["h1", "b1"], ["h2"]),
         helper.make_node("Elu", ["h2"], ["h3"]), helper.make_node("MatMul", ["h3", "W2"], ["h4"]),
         helper.make_node("Add", ["h4", "b2"], ["actions"])],
        "isaaclab_policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, obs_dim])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, action_dim])],
        [numpy_helper.from_array(w.astype(np.float32), name) for w, name in zip(weights, ("W1", "b1", "W2", "b2"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def obs_dim_of(descriptors: dict) -> int:
    return sum(t["shape"][0] * max(1, t["overloads"]["history_length"]) for t in descriptors["observations"]["policy"])


def write_inputs(folder: Path, descriptors: dict, obs_dim: int | None = None, blind: slice = slice(0),
                 robot_yaml: str = ROBOT_YAML) -> tuple[Path, Path, Path]:
    """(IO-descriptor YAML, policy.onnx, robot description) in `folder`; the policy takes `obs_dim` inputs."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "quad12.xml").write_text(quadruped_mjcf())
    (folder / "quad12.yaml").write_text(robot_yaml)
    io_path = folder / "quad12_velocity_IO_descriptors.yaml"
    io_path.write_text(yaml.safe_dump(descriptors, sort_keys=True))
    policy = folder / "policy.onnx"
    save(mlp_onnx(obs_dim or obs_dim_of(descriptors), len(ISAACLAB_JOINTS), blind=blind), str(policy))
    return io_path, policy, folder / "quad12.yaml"


def run_cli(*args, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def import_cli(folder: Path, descriptors: dict, capsys, obs_dim: int | None = None, robot_yaml: str = ROBOT_YAML
               ) -> tuple[int, str, str, Path]:
    io_path, policy, robot = write_inputs(folder, descriptors, obs_dim, robot_yaml=robot_yaml)
    out_dir = folder / "exported"
    code, out, err = run_cli("import-isaaclab", io_path, policy, "--robot", robot, out_dir, capsys=capsys)
    return code, out, err, out_dir


# What Isaac Lab's observation manager computes, written out.


def quat_rotate_inverse(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """v expressed in the frame of the unit quaternion q (w, x, y, z): q* ⊗ v ⊗ q."""
    def mul(a, b):
        aw, ax, ay, az = a
        bw, bx, by, bz = b
        return np.array([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                         aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw])
    conj = q * np.array([1.0, -1.0, -1.0, -1.0])
    return mul(mul(conj, np.concatenate([[0.0], v])), q)[1:]


class IsaacLabObservation:
    """The policy group of `descriptors` as Isaac Lab's `ObservationManager.compute_group` builds it:
    value → clip → scale → history (oldest first; the first frame fills the buffer)."""

    def __init__(self, descriptors: dict):
        self.terms = descriptors["observations"]["policy"]
        self.history = {t["name"]: deque(maxlen=t["overloads"]["history_length"]) for t in self.terms
                        if t["overloads"]["history_length"] > 0}

    def __call__(self, state: dict, last_action: np.ndarray) -> np.ndarray:
        q = np.array([state["q"][j] for j in ISAACLAB_JOINTS])
        qd = np.array([state["qd"][j] for j in ISAACLAB_JOINTS])
        values = {
            "base_lin_vel": state.get("lin_vel"), "base_ang_vel": state["gyro"],
            "projected_gravity": quat_rotate_inverse(state["quat"], np.array([0.0, 0.0, -1.0])),
            "generated_commands": state["cmd"], "joint_pos_rel": q - np.array([DEFAULT[j] for j in ISAACLAB_JOINTS]),
            "joint_vel_rel": qd, "last_action": last_action,
        }
        parts = []
        for term in self.terms:
            value = np.asarray(values[term["name"]], dtype=np.float64)
            overloads = term["overloads"]
            if overloads["clip"]:
                value = np.clip(value, *overloads["clip"])
            if overloads["scale"] is not None:
                value = value * overloads["scale"]
            if term["name"] in self.history:
                buffer = self.history[term["name"]]
                if not buffer:
                    buffer.extend([value] * buffer.maxlen)
                buffer.append(value)
                value = np.concatenate(list(buffer))
            parts.append(value)
        return np.concatenate(parts).astype(np.float32)


def robot_state(rng: np.random.Generator, lin_vel: bool) -> dict:
    """A robot near its default pose: a tilted, turning base and a velocity command."""
    axis = rng.normal(size=3)
    angle = rng.uniform(0.05, 0.3)
    quat = np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis / np.linalg.norm(axis)])
    state = {"q": {j: DEFAULT[j] + rng.uniform(-0.03, 0.03) for j in MODEL_JOINTS},
             "qd": {j: rng.uniform(-2.0, 2.0) for j in MODEL_JOINTS},
             "quat": quat, "gyro": rng.uniform(-1.0, 1.0, 3), "cmd": rng.uniform(-1.0, 1.0, 3)}
    if lin_vel:
        state["lin_vel"] = rng.uniform(-1.0, 1.0, 3)
    return state


# Tests.


def test_an_isaaclab_velocity_policy_imports_and_passes_the_deploy_check(tmp_path, capsys):
    code, out, err, out_dir = import_cli(tmp_path, io_descriptors(), capsys)
    assert code == 0, err
    assert "45 observations" in out and "12 actions at 50 Hz" in out
    manifest = load_manifest(out_dir)
    assert list(manifest.joint_names) == ISAACLAB_JOINTS, "the policy's joint order is Isaac Lab's"
    np.testing.assert_array_equal(manifest.default_pos, [DEFAULT[j] for j in ISAACLAB_JOINTS])
    np.testing.assert_array_equal(manifest.kp, KP)
    np.testing.assert_array_equal(manifest.kd, KD)
    assert manifest.torque_limits.tolist() == [23.7] * 8 + [45.43] * 4, "model file (hip, thigh), description (calf)"
    assert manifest.pos_limits[8].tolist() == [_f32(v) for v in RANGES["calf"]]
    assert manifest.control.physics_dt == 0.005 and manifest.control.decimation == 4
    assert manifest.action_scale.tolist() == [ACTION_SCALE] * 12 and manifest.actions[0].use_default_offset
    assert [(t.name, t.func) for t in manifest.obs_terms] == [
        ("base_ang_vel", "batonlab.observations.sensors:sensor"), ("projected_gravity", "batonlab.observations.sensors:projected_gravity"),
        ("generated_commands", "batonlab.observations.commands:generated_command"), ("joint_pos_rel", "batonlab.observations.proprioception:joint_pos_rel"),
        ("joint_vel_rel", "batonlab.observations.proprioception:joint_vel"), ("last_action", "batonlab.observations.proprioception:last_action")]
    # The IMU site sits 2 cm above the root body, axes aligned: it reads the root body's quantities.
    assert {n: (s.source, s.frame, s.body, s.pos, s.quat) for n, s in manifest.sensors.items()} == {
        "imu_gyro": ("imu.angular_velocity", "imu", "base", (0.0, 0.0, 0.02), (1.0, 0.0, 0.0, 0.0)),
        "imu_quat": ("imu.orientation", "imu", "base", (0.0, 0.0, 0.02), (1.0, 0.0, 0.0, 0.0))}
    command = manifest.commands["generated_commands"]
    assert command.fields == ("lin_vel_x", "lin_vel_y", "ang_vel_z") and command.default == (0.0, 0.0, 0.0)
    # The graph is Isaac Lab's; the file carries the manifest's contract as metadata.
    obs = np.random.default_rng(1).normal(size=(1, 45)).astype(np.float32)
    ours = ort.InferenceSession(str(out_dir / "policy.onnx")).run(None, {"obs": obs})[0]
    theirs = ort.InferenceSession(str(tmp_path / "policy.onnx")).run(None, {"obs": obs})[0]
    np.testing.assert_array_equal(ours, theirs)

    code, out, err = run_cli("deploy", out_dir, capsys=capsys)
    assert code == 0, err
    assert "dry run" in out and "state run" in out and "consistent" in out


@pytest.mark.parametrize("variant", ["flat", "lin_vel_and_history"])
def test_the_runtime_computes_the_action_onnxruntime_gives_on_the_isaaclab_observation(tmp_path, capsys, variant):
    lin_vel = variant == "lin_vel_and_history"
    descriptors = io_descriptors(lin_vel=lin_vel, history=3 if lin_vel else 0)
    code, _, err, out_dir = import_cli(tmp_path, descriptors, capsys)
    assert code == 0, err
    manifest = load_manifest(out_dir)
    if lin_vel:
        assert manifest.sensors["base_lin_vel"].source == "topic" and manifest.obs_dim == 48 + 2 * 3 + 2 * 3
    runtime = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, input_rate_samples=0, max_joint_velocity=1e3))
    policy = ort.InferenceSession(str(tmp_path / "policy.onnx"))
    isaaclab_obs = IsaacLabObservation(descriptors)
    rng = np.random.default_rng(3)
    last_action = np.zeros(12, dtype=np.float32)
    for tick in range(4):
        now = tick * manifest.control_dt
        state = robot_state(rng, lin_vel)
        runtime.set_joint_state(MODEL_JOINTS, [state["q"][j] for j in MODEL_JOINTS], [state["qd"][j] for j in MODEL_JOINTS],
                                now)
        runtime.set_vector("imu_quat", state["quat"], now)
        runtime.set_vector("imu_gyro", state["gyro"], now)
        runtime.set_vector("generated_commands", state["cmd"], now)
        if lin_vel:
            runtime.set_vector("base_lin_vel", state["lin_vel"], now)
        result = runtime.step(now)
        assert result.state is State.RUN, result.reason
        expected = policy.run(None, {"obs": isaaclab_obs(state, last_action)[None]})[0][0]
        np.testing.assert_allclose(result.raw_action, expected, atol=1e-5, rtol=0)
        # Isaac Lab's JointPositionAction: default + scale · action (no clip); far from every safety limit here.
        np.testing.assert_allclose(result.command, manifest.default_pos + ACTION_SCALE * expected, atol=1e-6)
        last_action = expected


def test_an_action_clip_bounds_the_targets_as_isaaclab_clamps_its_processed_actions(tmp_path, capsys):
    """Isaac Lab clamps `offset + scale · action` to the clip, so the clip becomes the joints' control range."""
    from batonlab.deploy.actions import ActionProcessor

    descriptors = io_descriptors()
    clip = [[_f32(DEFAULT[j] - 0.1 * (k + 1)), _f32(DEFAULT[j] + 0.05 * (k + 1))] for k, j in enumerate(ISAACLAB_JOINTS)]
    descriptors["actions"][0]["clip"] = clip
    code, _, err, out_dir = import_cli(tmp_path, descriptors, capsys)
    assert code == 0, err
    manifest = load_manifest(out_dir)
    assert manifest.ctrl_range.tolist() == clip and manifest.actions[0].clip is None
    processor = ActionProcessor(manifest)
    np.testing.assert_array_equal(processor(np.full(12, 10.0, dtype=np.float32)), [high for _, high in clip])
    np.testing.assert_array_equal(processor(np.full(12, -10.0, dtype=np.float32)), [low for low, _ in clip])
    inside = np.full(12, 0.1, dtype=np.float32)
    np.testing.assert_allclose(processor(inside), manifest.default_pos + ACTION_SCALE * inside)


def _mutate(path: tuple, value):
    def apply(data: dict) -> dict:
        data = copy.deepcopy(data)
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return data
    return apply


def _policy_terms(edit):
    def apply(data: dict) -> dict:
        data = copy.deepcopy(data)
        edit(data["observations"]["policy"])
        return data
    return apply


def _rename_joint(data: dict) -> dict:
    text = yaml.safe_dump(data).replace("FL_hip_joint", "FL_hip_motor")
    return yaml.safe_load(text)


def _obs_term_index(name: str) -> int:
    return [t["name"] for t in io_descriptors()["observations"]["policy"]].index(name)


BAD_FILES = {
    "unknown_term": (_policy_terms(lambda terms: terms.insert(3, obs_term("height_scan", 187, "RayCaster", "Height scan."))),
                     ["observation term 'height_scan' (observations.policy[3])",
                      "isaaclab.envs.mdp.observations.height_scan cannot be computed on the robot",
                      "'base_ang_vel', 'base_lin_vel'"]),
    "joint_term_shape": (_mutate(("observations", "policy", _obs_term_index("joint_pos_rel"), "shape"), [11]),
                         ["observation term 'joint_pos_rel'", "has shape [11] but 12 joint_names"]),
    "vector_term_shape": (_mutate(("observations", "policy", _obs_term_index("projected_gravity"), "shape"), [4]),
                          ["observation term 'projected_gravity'", "has shape [4], the term is 3 values wide"]),
    "action_shape": (_mutate(("actions", 0, "shape"), [13]),
                     ["action term 'joint_position_action' (actions[0]) has shape [13] but 12 joint_names"]),
    "missing_joints": (_rename_joint, ["joints ['FL_hip_motor'] of the descriptors are not joints of the robot "
                                       "description 'quad12'"]),
    "gains": (_mutate(("articulations", "robot", "default_joint_stiffness"), [25.0] * 12),
              ["gains are not those the policy was trained with", "FL_hip_joint stiffness 25 in Isaac Lab, 20 in the "
               "description"]),
    "action_offset": (_mutate(("actions", 0, "offset"), [0.3] * 12),
                      ["adds the offset", "neither zero nor its joints' default position"]),
    "action_term": (_mutate(("actions", 0, "full_path"), "isaaclab.envs.mdp.actions.joint_actions.RelativeJointPositionAction"),
                    ["'isaaclab.envs.mdp.actions.joint_actions.RelativeJointPositionAction' has no robot-side twin"]),
    "modifiers": (_mutate(("observations", "policy", 0, "extras", "modifiers"), ["isaaclab.utils.modifiers.bias"]),
                  ["observation term 'base_ang_vel'", "has modifiers"]),
    "timing": (_mutate(("scene", "dt"), 0.01), ["scene.dt 0.01 is not physics_dt × decimation"]),
    "no_scene": (lambda data: {k: v for k, v in data.items() if k != "scene"}, ["the descriptors have no 'scene' section"]),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_descriptor_file_fails_naming_the_problem(tmp_path, capsys, case):
    edit, expected = BAD_FILES[case]
    code, out, err, out_dir = import_cli(tmp_path, edit(io_descriptors()), capsys, obs_dim=45)
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for text in expected:
        assert text in err, err
    assert not out_dir.exists(), "nothing is written for a file that cannot be imported"


def _robot_yaml(old: str, new: str) -> str:
    assert old in ROBOT_YAML
    return ROBOT_YAML.replace(old, new)


def _fails_in_one_line(code: int, err: str, out_dir: Path, *expected: str) -> None:
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for text in expected:
        assert text in err, err
    assert not out_dir.exists(), "nothing is written for a policy that cannot be imported"


def test_a_description_default_pose_other_than_the_descriptors_fails_naming_each_joint(tmp_path, capsys):
    robot_yaml = _robot_yaml('"F._thigh_joint": 0.8', '"F._thigh_joint": 0.6')
    code, _, err, out_dir = import_cli(tmp_path, io_descriptors(), capsys, robot_yaml=robot_yaml)
    _fails_in_one_line(code, err, out_dir, "default_joint_pos is not the default pose the policy was trained with: "
                       "FL_thigh_joint 0.6 in the description, 0.8 in Isaac Lab; FR_thigh_joint 0.6 in the "
                       "description, 0.8 in Isaac Lab; make the description's default_joint_pos those of the "
                       "descriptors")
    assert "RL_thigh_joint" not in err


@pytest.mark.parametrize(("imu_site", "pos"), [
    ("{parent: base, pos: [0.1, 0.0, 0.05], rpy: [0.0, 0.0, 0.0]}", (0.1, 0.0, 0.05)),
    ("{parent: imu, pos: [0.01, 0.0, 0.0]}", (0.01, 0.0, 0.02)),
    ("imu_chip", (0.05, 0.01, 0.03)),
], ids=["offset_from_the_root", "offset_from_a_site", "site_of_a_welded_body"])
def test_an_imu_translated_on_the_root_body_imports_with_its_position(tmp_path, capsys, imu_site, pos):
    """A translation on the rigid root body changes neither its angular velocity nor the gravity direction."""
    code, _, err, out_dir = import_cli(tmp_path, io_descriptors(), capsys,
                                       robot_yaml=_robot_yaml("imu_site: imu", f"imu_site: {imu_site}"))
    assert code == 0, err
    for name in ("imu_gyro", "imu_quat"):
        sensor = load_manifest(out_dir).sensors[name]
        assert (sensor.frame, sensor.body, sensor.quat) == ("imu", "base", (1.0, 0.0, 0.0, 0.0))
        np.testing.assert_allclose(sensor.pos, pos, atol=1e-12)


@pytest.mark.parametrize(("imu_site", "expected"), [
    ("{parent: base, pos: [0.1, 0.0, 0.0], rpy: [0.0, 0.0, 1.5707963]}",
     "the IMU (imu_site 'base') is rotated in the root body 'base' (quat [0.707107, 0.0, 0.0, 0.707107]): "
     "['base_ang_vel', 'projected_gravity'] are in the root body's frame and the robot side does not rotate IMU "
     "readings"),
    ("FL_thigh", "the IMU (imu_site 'FL_thigh') sits on body 'FL_thigh', not on the root body 'base': "
                 "['base_ang_vel', 'projected_gravity'] are the root body's angular velocity and gravity direction"),
], ids=["rotated", "on_another_body"])
def test_an_imu_rotated_or_on_another_body_fails_saying_why(tmp_path, capsys, imu_site, expected):
    code, _, err, out_dir = import_cli(tmp_path, io_descriptors(), capsys,
                                       robot_yaml=_robot_yaml("imu_site: imu", f"imu_site: {imu_site}"))
    _fails_in_one_line(code, err, out_dir, expected)


def test_a_policy_reading_the_imu_needs_an_imu_site(tmp_path, capsys):
    robot_yaml = _robot_yaml("imu_site: imu\n", "")
    code, _, err, out_dir = import_cli(tmp_path, io_descriptors(), capsys, robot_yaml=robot_yaml)
    _fails_in_one_line(code, err, out_dir, "observation terms ['base_ang_vel', 'projected_gravity'] read the robot's "
                       "IMU, and robot description 'quad12' names no imu_site")
    no_imu = io_descriptors()
    del no_imu["observations"]["policy"][:2]  # base_ang_vel, projected_gravity
    code, _, err, _ = import_cli(tmp_path / "no_imu", no_imu, capsys, robot_yaml=robot_yaml)
    assert code == 0, "a policy that reads no IMU imports without one: " + err


def test_zero_isaaclab_gains_are_reported_with_the_description_gains_used(tmp_path, capsys):
    code, out, err, _ = import_cli(tmp_path, io_descriptors(), capsys)
    assert code == 0, err
    lines = [line for line in out.splitlines() if "zero drive gains" in line]
    assert lines == ["[batonlab] Isaac Lab reports zero drive gains (explicit actuators) for 12 joints, so nothing "
                     f"checks the gains used, the robot description's: kp 20, kd 0.5 for {ISAACLAB_JOINTS}"]
    implicit = _mutate(("articulations", "robot", "default_joint_stiffness"), [KP] * 12)(io_descriptors())
    implicit["articulations"]["robot"]["default_joint_damping"] = [KD] * 12
    code, out, err, _ = import_cli(tmp_path / "implicit", implicit, capsys)
    assert code == 0, err
    assert "zero drive gains" not in out, "gains Isaac Lab reports are checked, not reported"


def test_an_onnx_of_another_width_fails_naming_both_widths(tmp_path, capsys):
    code, _, err, out_dir = import_cli(tmp_path, io_descriptors(), capsys, obs_dim=48)
    assert code == 2
    assert "policy.onnx: input 'obs' has shape [1, 48], the descriptors' observation terms sum to 45" in err, err
    assert "(base_ang_vel 3, projected_gravity 3, generated_commands 3, joint_pos_rel 12" in err
    assert not out_dir.exists()


def test_malformed_yaml_fails_naming_the_line(tmp_path, capsys):
    io_path, policy, robot = write_inputs(tmp_path, io_descriptors())
    io_path.write_text("actions:\n  - name: joint_position_action\n    shape: [12\nscene: {decimation: 4}\n")
    code, _, err = run_cli("import-isaaclab", io_path, policy, "--robot", robot, tmp_path / "out", capsys=capsys)
    assert code == 2
    assert f"{io_path}: not valid YAML" in err and "line 4" in err, err


def test_the_importer_imports_neither_torch_nor_mujoco():
    """The importer is robot-side code: numpy, yaml and onnxruntime only (the CLI brings the robot description)."""
    code = ("import sys\nimport batonlab.deploy.isaaclab_import\n"
            "print(sorted(m for m in ('torch', 'mujoco', 'tensordict', 'rsl_rl', 'onnx') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_policy_node_publishes_the_onnxruntime_action_for_a_fixed_robot_state(tmp_path, capsys):
    """The imported folder runs in the real policy_node over loopback DDS against a robot that holds still: a
    tilted, turning base, legs off the default pose, a cmd_vel. The policy ignores its last action, so every
    command in run is default + scale · onnxruntime(observation assembled with Isaac Lab's formulas)."""
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from ros.nodes import FakeWheelLeggedRobot, NodeProcess, new_domain_id, robot_and_node

    descriptors = io_descriptors()
    io_path, policy, robot_yaml = write_inputs(tmp_path, descriptors, blind=slice(45 - 12, 45))  # last_action
    out_dir = tmp_path / "exported"
    code, _, err = run_cli("import-isaaclab", io_path, policy, "--robot", robot_yaml, out_dir, capsys=capsys)
    assert code == 0, err
    state = robot_state(np.random.default_rng(5), lin_vel=False)
    state["qd"] = dict.fromkeys(MODEL_JOINTS, 0.0)
    state["cmd"] = np.array([0.6, 0.0, -0.4])  # what a Twist (linear.x, angular.z) carries
    domain = new_domain_id()
    # Commands are recorded, never applied (no joint order for the interface): the robot holds its state.
    robot = FakeWheelLeggedRobot(domain, {"position": ("joint_commands", [])}, dict(state["q"]))
    robot.imu_orientation, robot.imu_gyro = list(state["quat"]), list(state["gyro"])
    robot.twist = (0.6, -0.4)
    node = NodeProcess("policy_node", domain, tmp_path, params={
        "manifest": str(out_dir), "ramp_time_s": 0.0, "max_joint_velocity": 1000.0})
    expected_raw = ort.InferenceSession(str(policy)).run(
        None, {"obs": IsaacLabObservation(descriptors)(state, np.zeros(12, dtype=np.float32))[None]})[0][0]
    expected = np.array([DEFAULT[j] for j in ISAACLAB_JOINTS]) + ACTION_SCALE * expected_raw.astype(np.float64)
    with robot_and_node(robot, node) as (robot, node):
        since = time.monotonic()
        deadline = since + 10.0
        while len(robot.command_array("position", since)) < 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        commands = robot.command_array("position", since)
    assert len(commands) >= 10, f"{len(commands)} commands in run"
    np.testing.assert_allclose(commands, np.tile(expected, (len(commands), 1)), atol=1e-5, rtol=0)
