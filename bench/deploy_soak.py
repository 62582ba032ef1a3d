# SPDX-License-Identifier: BSD-3-Clause
"""Deploy soak: policy_node against the simulated robot for minutes, with every core busy.

    python bench/deploy_soak.py [EXPORT_DIR] [--minutes 10] [--load N] [--freeze-every 60] [--out soak.json]

policy_node runs on the steady clock at the policy's rate (arm_reach: 50 Hz, default stale timeout
40 ms) against sim_robot_node in real time (joint states at the 200 Hz physics rate), over Fast DDS
on 127.0.0.1, while N busy processes (default: one per core) load the machine. It prints:

- spurious stops (target 0): stops that the robot does not explain, i.e. its joint states had no gap
  of at least 80 % of the stale timeout in the second before the stop (gaps from the DDS source
  stamps of what the simulator published);
- loop overruns of policy_node (steps more than half a period late, or computing for longer than a
  period) and its tick gaps;
- the stop latency when inputs really stop: every `--freeze-every` seconds the simulator process is
  frozen (SIGSTOP), so its joint states stop; latency = (policy_node's stop transition) − (the last
  joint state published), beyond the node's own scheduling delay of that step, in control periods
  (target ≤ 3). The simulator is then resumed and the node reset and restarted;
- at the end, the e-stop: how far the tool point drops while the stopped arm is held, and after.

Without EXPORT_DIR an untrained arm_reach actor is exported (`bench/deploy_latency.py`), which is enough
to exercise the loop: the soak is about timing and safety, not about reaching.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from deploy_latency import untrained_export  # noqa: E402  (the same untrained arm_reach export)


class Monitor:
    """The bench's own ROS node: what the simulator published, what policy_node reported."""

    def __init__(self, domain_id: int):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PointStamped
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Bool, String
        from std_srvs.srv import Trigger

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node("soak_monitor", context=self.context)
        self.lock = threading.Lock()
        self.joint_stamps: list[float] = []
        """DDS source stamps of the simulator's joint states (its system clock) [s]."""
        self.states: list[tuple[float, dict]] = []
        """(source stamp [s], report) of policy_node's state reports."""
        self.diagnostics: dict[str, str] = {}
        self.ee: list[tuple[float, np.ndarray]] = []
        best_effort = QoSProfile(depth=50, reliability=ReliabilityPolicy.BEST_EFFORT)
        latched = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(JointState, "joint_states", self._on_joint_states, best_effort)
        self.node.create_subscription(String, "/policy_node/state", self._on_state, latched)
        self.node.create_subscription(DiagnosticArray, "diagnostics", self._on_diagnostics, 10)
        self.node.create_subscription(PointStamped, "sensors/ee_pos_b", self._on_ee, best_effort)
        self.pub_estop = self.node.create_publisher(Bool, "estop", 10)
        self._Bool, self._Trigger = Bool, Trigger
        self.reset_client = self.node.create_client(Trigger, "/policy_node/reset")
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except Exception:
            pass

    def _on_joint_states(self, msg, info) -> None:
        with self.lock:
            self.joint_stamps.append(info["source_timestamp"] * 1e-9)

    def _on_state(self, msg, info) -> None:
        with self.lock:
            self.states.append((info["source_timestamp"] * 1e-9, json.loads(msg.data)))

    def _on_diagnostics(self, msg) -> None:
        for status in msg.status:
            if status.name.startswith("policy_node") and not status.name.endswith(": inputs"):
                with self.lock:
                    self.diagnostics = {kv.key: kv.value for kv in status.values}

    def _on_ee(self, msg, info) -> None:
        with self.lock:
            self.ee.append((time.time(), np.array([msg.point.x, msg.point.y, msg.point.z])))

    def wait_for(self, state: str, after: int, timeout_s: float) -> tuple[float, dict] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                for entry in self.states[after:]:
                    if entry[1]["state"] == state:
                        return entry
            time.sleep(0.01)
        return None

    def reset(self) -> None:
        if self.reset_client.wait_for_service(timeout_sec=5.0):
            future = self.reset_client.call_async(self._Trigger.Request())
            deadline = time.monotonic() + 5.0
            while not future.done() and time.monotonic() < deadline:
                time.sleep(0.01)

    def largest_gap(self, before: float, window_s: float = 1.0) -> float:
        """The robot's longest silence in the `window_s` before `before`, the one still going on included [s]."""
        with self.lock:
            stamps = np.array(self.joint_stamps)
        stamps = stamps[(stamps > before - window_s) & (stamps <= before)]
        return float(np.diff(np.append(stamps, before)).max()) if len(stamps) else float("inf")

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.context.try_shutdown()


def freeze(sim: subprocess.Popen, monitor: Monitor, period: float, frozen_stops: set[int]) -> dict:
    """Freeze the simulator until policy_node stops; the latency from its last joint state to the stop."""
    with monitor.lock:
        after = len(monitor.states)
    sim.send_signal(signal.SIGSTOP)
    stopped = monitor.wait_for("stop", after, 5.0)
    sim.send_signal(signal.SIGCONT)
    if stopped is None:
        print("[soak] freeze: policy_node did NOT stop within 5 s")
        return {"stopped": False}
    stamp, report = stopped
    with monitor.lock:
        frozen_stops.add(next(i for i, entry in enumerate(monitor.states) if entry is stopped))
        last_input = max(s for s in monitor.joint_stamps if s <= stamp)
    latency = stamp - last_input
    received_age = report["joint_states_age_s"]
    beyond = (received_age - report["tick_late_s"]) / period
    print(f"[soak] freeze: stop {received_age * 1e3:.1f} ms after the last joint state reached policy_node "
          f"({latency * 1e3:.1f} ms after the simulator sent it); own delay {report['tick_late_s'] * 1e3:.1f} ms; "
          f"{beyond:.2f} periods beyond it ({(latency - report['tick_late_s']) / period:.2f} from the send)")
    time.sleep(0.5)
    monitor.reset()
    return {"stopped": True, "reason": report["reason"], "latency_from_send_ms": latency * 1e3,
            "latency_from_reception_ms": received_age * 1e3, "own_delay_ms": report["tick_late_s"] * 1e3,
            "periods_beyond_own_delay": beyond, "periods_beyond_own_delay_from_send": (latency - report["tick_late_s"]) / period}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export", nargs="?", type=Path, help="export folder (default: an untrained arm_reach export)")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1, help="busy processes (default: one per core)")
    parser.add_argument("--freeze-every", type=float, default=60.0, help="seconds between simulator freezes")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument("--realtime-priority", type=int, default=0, help="policy_node's realtime_priority (0: normal scheduling)")
    args = parser.parse_args()

    from batonlab.cli.deploy import node_command, ros_environment, stop
    from batonlab.deploy import default_stale_timeout, load_manifest

    sys.path.insert(0, str(REPO / "tests"))
    from ros.nodes import CpuLoad, use_loopback_dds

    workdir = Path(tempfile.mkdtemp(prefix="batonlab_soak_"))
    export_dir = args.export or untrained_export(workdir / "exported")
    manifest = load_manifest(export_dir)
    period = manifest.control_dt
    timeout_s = default_stale_timeout(period)
    hold_time_s = 3.0
    domain = 100 + os.getpid() % 60
    env = ros_environment(domain)
    use_loopback_dds()
    os.environ["ROS_DOMAIN_ID"] = str(domain)

    sim_log, policy_log = open(workdir / "sim_robot_node.log", "w"), open(workdir / "policy_node.log", "w")
    # The simulated robot writes its messages synchronously, so that a DDS source stamp is the time a
    # message really left the robot (the gaps the robot is judged by).
    sim = subprocess.Popen(node_command("sim_robot_node", params={
        "task": manifest.task, "seed": 0, "num_episodes": 0, "publish_clock": False, "warmup_s": 1e9}),
        env={**env, "RMW_FASTRTPS_PUBLICATION_MODE": "SYNCHRONOUS"}, stdout=sim_log, stderr=subprocess.STDOUT)
    policy = subprocess.Popen(node_command("policy_node", params={
        "manifest": str(export_dir), "ignored_joints": ["finger_left", "finger_right"], "command_topic": "joint_commands",
        "ramp_time_s": 1.0, "auto_start": True, "stop_behavior": "hold_then_damp", "stop_hold_time_s": hold_time_s,
        # The simulated arm6 has no speed limit: under an untrained policy its joints reach 40 rad/s.
        "sensor_max_joint_speed": 100.0, "realtime_priority": args.realtime_priority}),
        env=env, stdout=policy_log, stderr=subprocess.STDOUT)
    monitor = Monitor(domain)
    figures: dict = {}
    try:
        if monitor.wait_for("run", 0, 120.0) is None:
            raise RuntimeError(f"policy_node never reached run; see {workdir}")
        print(f"[soak] policy_node at {1 / period:.0f} Hz (stale timeout {timeout_s * 1e3:.0f} ms) against sim_robot_node "
              f"({manifest.task}), {args.load} busy processes, {args.minutes:g} min; logs in {workdir}")
        freezes, spurious, explained = [], [], []
        frozen_stops: set[int] = set()
        """Indices (in monitor.states) of the stops a freeze caused."""
        with CpuLoad(args.load):
            start = time.monotonic()
            seen = len(monitor.states)
            next_freeze = start + args.freeze_every
            while time.monotonic() - start < args.minutes * 60:
                time.sleep(0.05)
                with monitor.lock:
                    new = list(enumerate(monitor.states))[seen:]
                    seen = len(monitor.states)
                for index, (stamp, report) in new:
                    if report["state"] != "stop" or index in frozen_stops:
                        continue
                    gap = monitor.largest_gap(stamp)
                    entry = {"reason": report["reason"], "robot_largest_gap_ms": gap * 1e3, "tick_late_ms": report["tick_late_s"] * 1e3}
                    (explained if gap >= 0.8 * timeout_s else spurious).append(entry)
                    print(f"[soak] {'robot-explained' if gap >= 0.8 * timeout_s else 'SPURIOUS'} stop: {entry}")
                    monitor.reset()
                if time.monotonic() >= next_freeze and monitor.states and monitor.states[-1][1]["state"] == "run":
                    next_freeze = time.monotonic() + args.freeze_every
                    freezes.append(freeze(sim, monitor, period, frozen_stops))
            elapsed = time.monotonic() - start
            time.sleep(1.5)  # the next diagnostics message
            with monitor.lock:
                diagnostics = dict(monitor.diagnostics)
                stamps = np.array(monitor.joint_stamps)
        # The e-stop on a quiet machine: how far the tool point drops while held, and after.
        with monitor.lock:
            seen = len(monitor.states)
        monitor.pub_estop.publish(monitor._Bool(data=True))
        estopped = monitor.wait_for("stop", seen, 5.0)
        t0 = time.time()
        time.sleep(hold_time_s + 2.0)
        with monitor.lock:
            ee = [(t - t0, p) for t, p in monitor.ee if t >= t0 - 0.05]
        z0 = ee[0][1][2]
        held = [z0 - p[2] for t, p in ee if t <= hold_time_s]
        after = [z0 - p[2] for t, p in ee if t > hold_time_s]
        gaps = np.diff(stamps[stamps > stamps[0] + 5.0]) * 1e3
        latencies = [f["periods_beyond_own_delay"] for f in freezes if f["stopped"]]
        from_send = [f["periods_beyond_own_delay_from_send"] for f in freezes if f["stopped"]]
        figures = {
            "minutes": elapsed / 60, "control_rate_hz": 1 / period, "stale_timeout_ms": timeout_s * 1e3, "load_processes": args.load,
            "realtime_priority": args.realtime_priority,
            "spurious_stops": len(spurious), "robot_explained_stops": len(explained), "stops": spurious + explained,
            "robot_joint_state_gap_ms": {"p50": float(np.median(gaps)), "p99": float(np.percentile(gaps, 99)), "max": float(gaps.max())},
            "loop_overruns": int(float(diagnostics.get("loop_overruns", "nan"))), "ticks": int(float(diagnostics.get("ticks", "nan"))),
            "tick_gap_ms": {k: float(diagnostics.get(f"tick_gap_{k}_ms", "nan")) for k in ("p50", "p99", "max")},
            "freezes": freezes,
            "stop_latency_periods_beyond_own_delay_max": max(latencies) if latencies else None,
            "stop_latency_periods_from_send_max": max(from_send) if from_send else None,
            "freezes_without_stop": sum(not f["stopped"] for f in freezes),
            "estop": {"stopped": estopped is not None, "tool_drop_while_held_mm": 1e3 * max(held, default=float("nan")),
                      "tool_drop_after_damp_mm": 1e3 * max(after, default=float("nan"))},
        }
    finally:
        monitor.close()
        stop(policy)
        stop(sim)
        sim_log.close()
        policy_log.close()
    print(json.dumps(figures, indent=2))
    worst = figures["stop_latency_periods_beyond_own_delay_max"]
    print(f"[soak] spurious stops {figures['spurious_stops']} (target 0); loop overruns {figures['loop_overruns']} of "
          f"{figures['ticks']} ticks; {len(freezes)} freezes, {figures['freezes_without_stop']} without a stop; stop latency "
          f"beyond the node's own delay, worst {worst if worst is None else round(worst, 2)} control periods from the "
          f"last input received (target <= 3), {figures['stop_latency_periods_from_send_max']} from its send; tool point drop "
          f"{figures['estop']['tool_drop_while_held_mm']:.1f} mm while held, {figures['estop']['tool_drop_after_damp_mm']:.1f} mm after")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
