# SPDX-License-Identifier: BSD-3-Clause
"""The `batonlab` command line (hydra): list, train, play, export."""
