# SPDX-License-Identifier: BSD-3-Clause
"""Deploy latency: one control step in-process, and the 200 Hz policy_node loop over ROS 2 loopback.

    python bench/deploy_latency.py [EXPORT_DIR] [--steps 5000] [--seconds 10] [--record-seconds 10] [--no-ros] [--no-record]

1. In-process: `DeployRuntime.step` with fresh inputs every step (observation assembly + ONNX
   inference + safety filter), p50/p99 over `--steps` steps. Target: p99 < 1 ms. Without
   EXPORT_DIR this runs for an arm_reach and a wl_velocity export (IMU inputs, projected gravity,
   position legs + velocity wheels + the held arm: 13 command joints).
2. ROS 2: policy_node in a child process at 200 Hz (`control_rate_hz:=200`), a robot process
   publishing joint states, tool point and target at 200 Hz, and this process subscribing to the
   joint commands over Fast DDS on 127.0.0.1. The period between consecutive commands is the loop
   period as a controller would see it; jitter = |period − 5 ms|. Target: jitter p99 < 2 ms.
3. Recording: the in-process loop at 200 Hz (sleeping to each period, as the node's timer does)
   with and without a `BagRecorder` taking a 20-joint joint-state stream, the policy's sensors and
   task commands (the input callbacks), and every policy step and joint command (the control step,
   as policy_node records them); blocks of 200 ticks alternate between the two so that machine load
   affects both alike. Target: recording adds < 5 % to the control step's p99.

Without EXPORT_DIR untrained actors are exported (`batonlab.export`): the same networks as trained
ones (arm_reach 24 → 128 → 128 → 64 → 6, wl_velocity 33 → 256 → 128 → 64 → 6; ELU, observation
normaliser), which cost the same to run. Parts 2 and 3 use the arm_reach export.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RATE_HZ = 200.0


def untrained_export(out_dir: Path, task: str = "arm_reach") -> Path:
    """`task` with a freshly initialised actor, exported by `batonlab export`'s own `export`."""
    from batonlab.env.env import BatonEnv
    from batonlab.export.onnx import export
    from batonlab.rl.runner import BatonRunner
    from batonlab.rl.vecenv import RslRlVecEnv
    from batonlab.tasks import make_agent_cfg, make_task_cfg

    cfg = make_task_cfg(task, play=True)
    cfg.num_envs = 1
    env = BatonEnv(cfg)
    runner = BatonRunner(RslRlVecEnv(env), make_agent_cfg(task), log_dir=None)
    export(env, runner.inference_policy(), out_dir, task)
    env.close()
    return out_dir


def percentiles(values_s: np.ndarray) -> str:
    us = np.asarray(values_s) * 1e6
    return f"p50 {np.percentile(us, 50):8.1f} us   p99 {np.percentile(us, 99):8.1f} us   max {us.max():8.1f} us"


def bench_in_process(export_dir: Path, steps: int) -> None:
    from batonlab.deploy import DeployRuntime, SafetyCfg, State, load_manifest

    manifest = load_manifest(export_dir)
    fingers = [n for n in ("finger_left", "finger_right") if n in manifest.default_joint_pos]
    runtime = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0),
                            ignored_joints=[f for f in fingers if f not in manifest.held_joints.names])
    names = list(dict.fromkeys([*runtime.ctx.joints, *fingers]))  # as a robot sends them: every joint, one message
    q0 = np.array([manifest.default_joint_pos[n] for n in names])
    at_rest = {name: spec.at_rest() for name, spec in manifest.sensors.items()}
    rng = np.random.default_rng(0)
    step_times, obs_times, policy_times = [], [], []
    dt = manifest.control_dt
    for k in range(steps + 100):
        now = k * dt
        q = q0 + 0.01 * rng.standard_normal(len(names))
        start = time.perf_counter()
        runtime.set_joint_state(names, q, np.zeros(len(names)), now)
        for name, slot in runtime.vectors.items():
            runtime.set_vector(name, at_rest.get(name, 0.3) + 0.01 * rng.standard_normal(slot.dim), now)
        result = runtime.step(now)
        elapsed = time.perf_counter() - start
        # Warm-up (excluded): the runtime first measures how regularly the inputs arrive, then runs.
        assert k < 100 or result.state is State.RUN, result.reason
        if k >= 100:
            step_times.append(elapsed)
            t0 = time.perf_counter()
            obs = runtime.control.observation.compute(runtime.inputs)
            t1 = time.perf_counter()
            runtime.control.policy(obs)
            t2 = time.perf_counter()
            obs_times.append(t1 - t0)
            policy_times.append(t2 - t1)
    step = np.array(step_times)
    print(f"{manifest.task}: in-process control step (inputs + obs + ONNX + safety), {steps} steps, "
          f"{len(names)} joints in, {len(runtime.joint_names)} commanded ({', '.join(sorted(set(runtime.command_kinds)))}):")
    print(f"  step        {percentiles(step)}   target p99 < 1000 us: {'met' if np.percentile(step, 99) < 1e-3 else 'MISSED'}")
    print(f"  obs only    {percentiles(np.array(obs_times))}")
    print(f"  ONNX only   {percentiles(np.array(policy_times))}")


ROBOT_SCRIPT = r"""
import sys, time, rclpy
from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import JointState
from geometry_msgs.msg import PointStamped
names = sys.argv[1].split(','); q = [float(v) for v in sys.argv[2].split(',')]
rclpy.init()
node = rclpy.create_node('bench_robot')
pub_js = node.create_publisher(JointState, 'joint_states', 10)
pubs = [node.create_publisher(PointStamped, t, 10) for t in ('sensors/ee_pos_b', 'commands/ee_target')]
def tick():
    msg = JointState(name=names, position=q, velocity=[0.0] * len(q))
    msg.header.stamp = node.get_clock().now().to_msg()
    pub_js.publish(msg)
    for p in pubs:
        pt = PointStamped(); pt.point.x, pt.point.z = 0.4, 0.3; p.publish(pt)
node.create_timer(1.0 / float(sys.argv[3]), tick, clock=Clock(clock_type=ClockType.STEADY_TIME))
try:
    rclpy.spin(node)
except BaseException:
    pass
"""


def loopback_environment(domain_id: int) -> dict[str, str]:
    """Child-process environment: own domain, Fast DDS on 127.0.0.1 only, deploy_ros and batonlab importable."""
    profile = str(REPO / "deploy_ros" / "config" / "fastdds_loopback.xml")
    path = os.pathsep.join(p for p in (str(REPO / "deploy_ros"), str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, ROS_DOMAIN_ID=str(domain_id), FASTDDS_DEFAULT_PROFILES_FILE=profile,
                FASTRTPS_DEFAULT_PROFILES_FILE=profile, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONPATH=path,
                PYTHONUNBUFFERED="1")


def bench_ros(export_dir: Path, seconds: float, domain_id: int) -> None:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Float64MultiArray

    from batonlab.deploy import load_manifest

    manifest = load_manifest(export_dir)
    fingers = [n for n in ("finger_left", "finger_right") if n in manifest.default_joint_pos]
    names = [*manifest.joint_names, *fingers]
    q0 = [manifest.default_joint_pos[n] for n in names]
    env = loopback_environment(domain_id)
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE",
                                           "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    params = {"manifest": str(export_dir), "control_rate_hz": RATE_HZ, "ramp_time_s": 0.0, "command_topic": "joint_commands",
              "ignored_joints": json.dumps(fingers or [""]), "stale_timeout_s": 0.05, "diagnostics_rate_hz": 1.0}
    node_cmd = [sys.executable, "-m", "deploy_ros.policy_node", "--ros-args"]
    for name, value in params.items():
        node_cmd += ["-p", f"{name}:={value}"]
    with tempfile.TemporaryDirectory() as tmp:
        log = open(Path(tmp) / "policy_node.log", "w")
        policy = subprocess.Popen(node_cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        robot = subprocess.Popen([sys.executable, "-c", ROBOT_SCRIPT, ",".join(names), ",".join(map(str, q0)), str(RATE_HZ)],
                                 env=env)
        rclpy.init()
        node = rclpy.create_node("bench_listener")
        arrivals: list[float] = []
        node.create_subscription(Float64MultiArray, "joint_commands", lambda msg: arrivals.append(time.perf_counter()), 100)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        try:
            deadline = time.monotonic() + 120.0
            while len(arrivals) < 50 and time.monotonic() < deadline:  # start-up, discovery, soft start
                executor.spin_once(timeout_sec=0.1)
            if len(arrivals) < 50:
                raise RuntimeError(f"policy_node sent no commands; its log:\n{Path(log.name).read_text()}")
            arrivals.clear()
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                executor.spin_once(timeout_sec=0.01)
        finally:
            executor.shutdown()
            node.destroy_node()
            rclpy.try_shutdown()
            for process in (robot, policy):
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
            log.close()
    periods = np.diff(np.array(arrivals))
    jitter = np.abs(periods - 1.0 / RATE_HZ)
    print(f"ROS 2 loopback, policy_node at {RATE_HZ:.0f} Hz, {len(periods)} periods over {seconds:.0f} s "
          f"(commands received at {len(periods) / seconds:.1f} Hz):")
    print(f"  period      {percentiles(periods)}")
    print(f"  jitter      {percentiles(jitter)}   target p99 < 2000 us: {'met' if np.percentile(jitter, 99) < 2e-3 else 'MISSED'}")


def bench_recording(export_dir: Path, seconds: float, num_joints: int = 20) -> None:
    from batonlab.deploy import DeployRuntime, SafetyCfg, State, load_manifest
    from batonlab.deploy.recording import BagRecorder

    manifest = load_manifest(export_dir)
    # A 20-joint robot: the policy's joints plus joints it ignores (fingers, then auxiliary joints).
    extra = [n for n in ("finger_left", "finger_right") if n in manifest.default_joint_pos]
    extra += [f"aux_{i}" for i in range(num_joints - len(manifest.joint_names) - len(extra))]
    runtime = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0), ignored_joints=extra)
    names = (*manifest.joint_names, *extra)
    q0 = np.array([manifest.default_joint_pos.get(n, 0.0) for n in names])
    rng = np.random.default_rng(0)
    period = 1.0 / RATE_HZ
    block = 200
    blocks = max(2, int(seconds * RATE_HZ / block)) * 2
    steps = {False: [], True: []}
    ticks = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        recorder = BagRecorder(Path(tmp) / "bag", {"task": manifest.task, "source": "bench"}, names,
                               command_joint_names=manifest.joint_names)
        next_tick, tick = time.perf_counter(), 0
        for b in range(blocks + 1):
            recording = b % 2 == 1
            for _ in range(block):
                next_tick += period
                time.sleep(max(0.0, next_tick - time.perf_counter()))
                tick += 1
                now, stamp = tick * period, tick * 5_000_000
                q = q0 + 0.01 * rng.standard_normal(len(names))
                qd = 0.1 * rng.standard_normal(len(names))
                # The input callbacks (joint states, sensors, task commands) …
                start = time.perf_counter()
                runtime.set_joint_state(names, q, qd, now)
                if recording:
                    recorder.joint_state(stamp, q, qd, qd, names=names, header_ns=stamp)
                for name, slot in runtime.vectors.items():
                    value = 0.3 + 0.01 * rng.standard_normal(slot.dim)
                    runtime.set_vector(name, value, now)
                    if recording:
                        (recorder.sensor if slot.kind == "sensor" else recorder.task_command)(name, stamp, value)
                # … then the control step: obs, ONNX, safety, and what policy_node records of it.
                step_start = time.perf_counter()
                result = runtime.step(now)
                if recording:
                    recorder.joint_command(stamp, result.command)
                    recorder.policy_step(stamp, result.tick, runtime.control.observation.obs, result.raw_action, result.command,
                                         result.state.value, result.reason, input_ns=stamp,
                                         compute_time_s=time.perf_counter() - step_start)
                end = time.perf_counter()
                assert b == 0 or result.state is State.RUN, result.reason
                if b > 0:  # the first block warms up (and the runtime measures the input rate)
                    steps[recording].append(end - step_start)
                    ticks[recording].append(end - start)
        status = recorder.close()
        size = sum(f.stat().st_size for f in (Path(tmp) / "bag").iterdir())
    print(f"recording at {RATE_HZ:.0f} Hz ({num_joints}-joint joint_states, sensors, task commands, policy steps, joint commands; "
          f"{len(steps[True])} ticks each, alternating blocks of {block}):")
    for label, data in (("control step", steps), ("inputs+step", ticks)):
        off, on = np.array(data[False]), np.array(data[True])
        overhead = np.percentile(on, 99) / np.percentile(off, 99) - 1.0
        print(f"  {label:12s} off  {percentiles(off)}")
        print(f"  {label:12s} on   {percentiles(on)}   p99 overhead {overhead * 100:+.1f} %"
              + (f"   target < 5 %: {'met' if overhead < 0.05 else 'MISSED'}" if label == "control step" else ""))
    print(f"  bag: {status['recording_written']} messages, {status['recording_dropped']} dropped, {size / 1e6:.1f} MB, "
          f"ok={status['recording_ok']} (written by a separate process: batonlab.deploy.bag_writer)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export", nargs="?", type=Path, help="export folder (default: arm_reach with an untrained actor)")
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--domain-id", type=int, default=77)
    parser.add_argument("--record-seconds", type=float, default=20.0, help="duration of each recording condition")
    parser.add_argument("--no-ros", action="store_true")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        export_dir = args.export or untrained_export(Path(tmp) / "exported")
        print(f"policy: {export_dir}")
        bench_in_process(export_dir, args.steps)
        if args.export is None:
            bench_in_process(untrained_export(Path(tmp) / "wl_velocity", "wl_velocity"), args.steps)
        if not args.no_record:
            bench_recording(export_dir, args.record_seconds)
        if not args.no_ros:
            bench_ros(export_dir, args.seconds, args.domain_id)


if __name__ == "__main__":
    main()
