#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Set up batonlab on a fresh Debian/Ubuntu machine: system GL libraries for offscreen rendering,
# a virtualenv in .venv with the pinned CPU torch, batonlab (editable), the test tools, ROS 2 Jazzy's
# rclpy + messages from PyPI and colcon (for deploy_ros).
# Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need_apt=()
for pkg in libegl1 libgl1 libegl-mesa0 libgl1-mesa-dri libosmesa6; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=".venv/bin/python -m pip"
$PIP install -q --upgrade pip
# torch first and pinned: an unpinned torch would pull a multi-GB CUDA build.
$PIP install -q "torch==2.13.0"
echo "torch==2.13.0" > .venv/constraints.txt
# warp: the mujoco_warp backend, which CI tests on warp's CPU device.
# setuptools' editable install always prints a notice box about folders named like the package
# (tasks/ is mapped to batonlab.tasks); it is advice, not a problem, so it is not shown.
PYTHONWARNINGS="ignore::UserWarning" $PIP install -q -c .venv/constraints.txt -e ".[train,test,ros,warp,learned]"
# colcon builds and tests the deploy_ros ament package (rclpy and messages come from the `ros` extra).
$PIP install -q -c .venv/constraints.txt "colcon-core>=0.17" "colcon-ros>=0.5" "colcon-test-result>=0.3"
echo "batonlab set up in .venv (activate with: . .venv/bin/activate)"
