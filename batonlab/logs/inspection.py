# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab bag info` and `batonlab bag export --csv`: what is in a bag, and its topics as CSV files
(every topic, `/odom` included: nav_msgs/Odometry becomes `pose.pose.position.x`, … columns)."""

from __future__ import annotations

import csv
import dataclasses
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from batonlab.logs.bag_reader import RawBag, to_arrays

_METADATA_KEYS = ("source", "task", "robot", "seed", "episode", "manifest_sha256", "checkpoint", "export_dir")


def bag_info(raw: RawBag) -> dict[str, Any]:
    """Topics (type, count, rate), duration, metadata and warnings, as plain values."""
    log = to_arrays(raw)
    files = sorted(p for p in Path(raw.path).glob("*") if p.suffix in (".mcap", ".db3")) if raw.path.is_dir() else [raw.path]
    return {
        "path": str(raw.path),
        "storage": raw.storage,
        "files": [p.name for p in files],
        "size_bytes": sum(p.stat().st_size for p in files),
        "start_ns": log.start_ns,
        "duration_s": log.duration_s,
        "messages": sum(i.count for i in log.topics.values()),
        "topics": {t: {"type": i.msgtype, "count": i.count, "rate_hz": i.rate_hz, "first_s": i.first_s, "last_s": i.last_s}
                   for t, i in sorted(log.topics.items())},
        "metadata": {k: log.metadata[k] for k in _METADATA_KEYS if log.metadata.get(k) is not None},
        "odometry": None if log.odom is None else {
            "frame_id": log.odom.frame_id, "child_frame_id": log.odom.child_frame_id, "samples": int(log.odom.t.size),
            "distance_m": float(np.nansum(np.linalg.norm(np.diff(log.odom.position[:, :2], axis=0), axis=1))),
        },
        "truncated": log.truncated,
        "warnings": list(log.warnings),
    }


def format_info(info: dict[str, Any]) -> str:
    """`bag_info` as the text `batonlab bag info` prints."""
    lines = [
        f"bag:       {info['path']} ({info['storage']}, {', '.join(info['files'])}, {info['size_bytes'] / 1e3:.1f} kB)",
        f"duration:  {info['duration_s']:.3f} s from t0 = {info['start_ns'] * 1e-9:.9f} s",
        f"messages:  {info['messages']}",
    ]
    if info["metadata"]:
        lines.append("metadata:  " + ", ".join(f"{k}={v}" for k, v in info["metadata"].items()))
    else:
        lines.append("metadata:  none (not written by batonlab)")
    lines.append("topics:")
    width = max((len(t) for t in info["topics"]), default=10)
    for topic, t in info["topics"].items():
        lines.append(f"  {topic:<{width}}  {t['type']:<34} {t['count']:>7} msgs  {t['rate_hz']:8.2f} Hz")
    if info.get("odometry"):
        odom = info["odometry"]
        lines.append(f"odometry:  {odom['samples']} poses of '{odom['child_frame_id'] or '?'}' in '{odom['frame_id']}', "
                     f"{odom['distance_m']:.2f} m travelled in the plane")
    if info["warnings"]:
        lines.append("warnings:" + (" (truncated bag)" if info["truncated"] else ""))
        lines += [f"  - {w}" for w in info["warnings"]]
    return "\n".join(lines)


def export_csv(raw: RawBag, out_dir: str | Path) -> list[Path]:
    """One CSV per topic (`/joint_states` → `joint_states.csv`): log time, then the flattened fields.

    Arrays become one column per element; JointState columns are named by joint
    (`position.shoulder_yaw`); stamps are seconds; nested lists of messages are JSON.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    start = raw.messages[0].log_ns if raw.messages else 0
    rows: dict[str, list[dict]] = defaultdict(list)
    for m in raw.messages:
        row = {"log_time_ns": m.log_ns, "t": (m.log_ns - start) * 1e-9}
        _flatten(m.msg, "", row)
        rows[m.topic].append(row)
    paths = []
    for topic, topic_rows in rows.items():
        columns: dict[str, None] = {}
        for row in topic_rows:
            columns.update(dict.fromkeys(row))
        path = out / (topic.strip("/").replace("/", "_") + ".csv")
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(columns), restval="")
            writer.writeheader()
            writer.writerows(topic_rows)
        paths.append(path)
    return paths


def _flatten(value, prefix: str, row: dict) -> None:
    if dataclasses.is_dataclass(value):
        fields = [f.name for f in dataclasses.fields(value) if f.name != "__msgtype__"]
        if getattr(value, "__msgtype__", "") == "builtin_interfaces/msg/Time":
            row[prefix.rstrip(".")] = value.sec + value.nanosec * 1e-9
            return
        names = getattr(value, "name", None) if getattr(value, "__msgtype__", "") == "sensor_msgs/msg/JointState" else None
        for name in fields:
            child = getattr(value, name)
            if names is not None and name == "name":
                continue
            if names is not None and isinstance(child, np.ndarray) and len(child) == len(names):
                for joint, v in zip(names, child):
                    row[f"{prefix}{name}.{joint}"] = float(v)
                continue
            _flatten(child, f"{prefix}{name}.", row)
        return
    key = prefix.rstrip(".")
    if isinstance(value, np.ndarray):
        if value.ndim == 1 and value.size <= 4096:
            for i, v in enumerate(value.tolist()):
                row[f"{key}.{i}"] = v
        else:
            row[key] = json.dumps(value.tolist())
    elif isinstance(value, list):
        row[key] = json.dumps([_plain(v) for v in value])
    else:
        row[key] = value


def _plain(value):
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name != "__msgtype__"}
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value
