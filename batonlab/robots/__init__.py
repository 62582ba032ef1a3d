# SPDX-License-Identifier: BSD-3-Clause
"""Robot models: MJCF loading, attachment with MjSpec, and the constants derived from the files."""
