# SPDX-License-Identifier: BSD-3-Clause
"""batonlab: sim-to-real robot learning on batched MuJoCo, rsl-rl, ONNX and ROS 2."""

# Offscreen rendering picks EGL or OSMesa itself, whatever the import order (batonlab.sim.render).

__version__ = "0.1.0"
