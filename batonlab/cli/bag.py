# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab bag`: inspect and export rosbag2 bags.

    batonlab bag info BAG [--json]        topics, message counts, duration, rates, batonlab metadata
    batonlab bag export BAG --csv DIR     one CSV per topic

BAG is a bag folder (metadata.yaml + .mcap) or an .mcap file; a truncated MCAP file is read up to
the damage, and the warnings say what was lost.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from batonlab.cli.common import CliError


def run(args: list[str]) -> int:
    """`batonlab bag info|export`: print a bag's summary or write its topics as CSV; returns the exit code."""
    parser = argparse.ArgumentParser(prog="batonlab bag", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    info = sub.add_parser("info", help="topics, counts, duration, rates and metadata")
    info.add_argument("bag", type=Path)
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    export = sub.add_parser("export", help="write the topics as CSV files")
    export.add_argument("bag", type=Path)
    export.add_argument("--csv", type=Path, required=True, metavar="DIR", help="output folder (one CSV per topic)")
    ns = parser.parse_args(args)

    from batonlab.logs.bag_reader import BagError, read_bag
    from batonlab.logs.inspection import bag_info, export_csv, format_info

    try:
        raw = read_bag(ns.bag)
        if ns.action == "info":
            summary = bag_info(raw)
            print(json.dumps(summary, indent=2) if ns.json else format_info(summary))
            return 0
        paths = export_csv(raw, ns.csv)
    except BagError as err:
        raise CliError(str(err)) from None
    for warning in raw.warnings:
        print(f"[batonlab] warning: {warning}", file=sys.stderr)
    print(f"[batonlab] wrote {len(paths)} CSV files to {ns.csv}: {', '.join(p.name for p in paths)}")
    return 0
