# SPDX-License-Identifier: BSD-3-Clause
"""The manager-based env runtime: task configs, managers and BatonEnv."""
