# SPDX-License-Identifier: BSD-3-Clause
"""Export: `policy.onnx` (dynamic batch) + `manifest.json`, the contract with `batonlab.deploy`."""
