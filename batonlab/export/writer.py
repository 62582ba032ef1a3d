# SPDX-License-Identifier: BSD-3-Clause
"""The export folder: `policy.onnx`, carrying the manifest's key fields as metadata, and `manifest.json`
naming the file's sha256. The one writer of export folders (`batonlab export`, tests and benches)."""

from __future__ import annotations

import json
from pathlib import Path

import onnx

from batonlab.deploy.manifest import MANIFEST_FILE, Manifest, sha256_file


def write_export(out_dir: str | Path, model: onnx.ModelProto, manifest: Manifest) -> tuple[Path, Path]:
    """Write `model` with `manifest.onnx_metadata()` attached, then the manifest with the file's hash.

    Args:
        out_dir: Export folder (created if needed); the ONNX file is named `manifest.policy.file`.
        model: The policy graph: input `manifest.input_name`, output `manifest.output_name`.
        manifest: The contract (its sha256, if any, is replaced by the written file's).

    Returns:
        The paths of the ONNX file and of the manifest.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    onnx_path, manifest_path = out_dir / manifest.policy.file, out_dir / MANIFEST_FILE
    onnx.helper.set_model_props(model, manifest.onnx_metadata())
    onnx.save(model, str(onnx_path))
    manifest = manifest.with_sha256(sha256_file(onnx_path))
    manifest_path.write_text(json.dumps(manifest.to_json(), indent=2) + "\n")
    return onnx_path, manifest_path
