# SPDX-License-Identifier: BSD-3-Clause
"""Reward terms and reward models (installed as `batonlab.rewards`).

Import terms from their modules (`from batonlab.rewards import tracking`) so that a reader can jump
to the definition.
"""
