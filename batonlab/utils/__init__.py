# SPDX-License-Identifier: BSD-3-Clause
"""Small helpers shared by the engine."""
