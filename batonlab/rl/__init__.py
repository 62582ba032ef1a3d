# SPDX-License-Identifier: BSD-3-Clause
"""Training glue around rsl-rl: runner config, VecEnv adapter, runner with checkpoints and logging."""
