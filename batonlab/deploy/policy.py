# SPDX-License-Identifier: BSD-3-Clause
"""ONNX inference of the exported actor (its observation normaliser is inside the graph)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from batonlab.deploy.manifest import Manifest, ManifestError


class OnnxPolicy:
    """One observation in, one raw action out, on one CPU thread (no thread-pool wake-up jitter).

    Args:
        manifest: Names the file, its input/output tensors and their widths; all are checked.
        num_threads: onnxruntime intra-op threads; 1 is fastest for the small MLPs we deploy.
    """

    def __init__(self, manifest: Manifest, num_threads: int = 1):
        if manifest.onnx_path is None:
            raise ManifestError("the manifest has no ONNX file (it was built in memory)")
        options = ort.SessionOptions()
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(manifest.onnx_path), options, providers=["CPUExecutionProvider"])
        inputs = {i.name: i for i in self.session.get_inputs()}
        outputs = {o.name: o for o in self.session.get_outputs()}
        if manifest.input_name not in inputs or manifest.output_name not in outputs:
            raise ManifestError(
                f"{manifest.onnx_path.name}: expected input '{manifest.input_name}' and output '{manifest.output_name}', "
                f"the model has inputs {list(inputs)} and outputs {list(outputs)}"
            )
        for kind, tensor, width in (("input", inputs[manifest.input_name], manifest.obs_dim),
                                    ("output", outputs[manifest.output_name], manifest.action_dim)):
            shape = tensor.shape
            if len(shape) != 2 or (isinstance(shape[1], int) and shape[1] != width):
                raise ManifestError(f"{manifest.onnx_path.name}: {kind} '{tensor.name}' has shape {shape}, the manifest says (batch, {width})")
        self.input_name, self.output_name = manifest.input_name, manifest.output_name
        self._batch = np.zeros((1, manifest.obs_dim), dtype=np.float32)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """(obs_dim,) float32 → (action_dim,) float32 raw action."""
        self._batch[0] = obs
        return self.session.run([self.output_name], {self.input_name: self._batch})[0][0]

    def batch(self, obs: np.ndarray) -> np.ndarray:
        """(N, obs_dim) float32 → (N, action_dim) float32 raw actions (a simulated fleet, one call)."""
        return self.session.run([self.output_name], {self.input_name: obs})[0]
