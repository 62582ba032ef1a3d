# SPDX-License-Identifier: BSD-3-Clause
"""batonlab: sim-to-real robot learning on batched MuJoCo, rsl-rl, ONNX and ROS 2."""

import os as _os

# Offscreen rendering needs no display; MuJoCo reads this when it is first imported.
_os.environ.setdefault("MUJOCO_GL", "egl")

__version__ = "0.1.0"
