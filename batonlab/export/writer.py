# SPDX-License-Identifier: BSD-3-Clause
"""The export folder: `policy.onnx`, carrying the manifest's key fields as metadata, and `manifest.json`
naming the file's sha256. The one writer of export folders (`batonlab export`, tests and benches)."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import onnx

from batonlab.deploy.levels import LOWER_FOLDER
from batonlab.deploy.manifest import MANIFEST_FILE, SIM_TO_SIM_FOLDER, Manifest, sha256_file
from batonlab.robots.bundle import ROBOT_FOLDER, RobotBundle
from batonlab.utils import files


def write_export(out_dir: str | Path, model: onnx.ModelProto, manifest: Manifest, robot: RobotBundle | None = None,
                 lower: Path | None = None) -> tuple[Path, Path]:
    """Write `model` with `manifest.onnx_metadata()` attached, then the manifest with the file's hash, and a
    copy of the robot's files in `robot/` (`ROBOT_FOLDER`), which the manifest names relative to the folder.

    The folder is built beside `out_dir` and swapped in whole (`files.replace_folder`): a reader, or an
    export interrupted at any moment, finds the previous export or the new one, never a mix.

    Args:
        out_dir: Export folder (created if needed); the ONNX file is named `manifest.policy.file`.
        model: The policy graph: input `manifest.input_name`, output `manifest.output_name`.
        manifest: The contract (its sha256, if any, is replaced by the written file's).
        robot: The robot description of a task over any robot and the files it loads (None: the task's own).
        lower: The lower level's export folder, for the upper level of a hierarchy: copied, as it is, into the folder
            its command layer names (`LOWER_FOLDER`).

    Returns:
        The paths of the ONNX file and of the manifest.

    Raises:
        FileExistsError / NotADirectoryError: see `check_export_folder`.
    """
    out_dir = Path(out_dir)
    check_export_folder(out_dir)
    files.remove_stale_temporaries(out_dir.parent, f".{out_dir.name}.*.tmp")
    onnx.helper.set_model_props(model, manifest.onnx_metadata())

    def build(folder: Path) -> tuple[Path, Path]:
        onnx_path, manifest_path = folder / manifest.policy.file, folder / MANIFEST_FILE
        onnx_path.write_bytes(model.SerializeToString())
        signed = manifest.with_sha256(sha256_file(onnx_path))
        manifest_path.write_text(json.dumps(signed.to_json(), indent=2) + "\n")
        if robot is not None:
            robot.copy_to(folder / ROBOT_FOLDER)
        if lower is not None:
            shutil.copytree(lower, folder / LOWER_FOLDER, ignore=shutil.ignore_patterns(SIM_TO_SIM_FOLDER, ".*"))
        return onnx_path, manifest_path

    return files.replace_folder(out_dir, build)


def check_export_folder(out_dir: str | Path) -> None:
    """`out_dir` can take an export: it does not exist, or it is a folder holding an export (a manifest, ONNX
    files, the robot's copy, a lower level's export), deploy --sim's output on it, and nothing else.

    Raises:
        NotADirectoryError: `out_dir` is a file.
        FileExistsError: `out_dir` holds files that no export wrote (they would be replaced).
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "it is a file; an export goes into a folder that does not exist yet "
                                 "or holds an earlier export", str(out_dir))
    if not out_dir.is_dir():
        return
    foreign = sorted(p.name for p in out_dir.iterdir()
                     if p.name not in (MANIFEST_FILE, ROBOT_FOLDER, SIM_TO_SIM_FOLDER, LOWER_FOLDER) and p.suffix != ".onnx")
    if foreign:
        raise FileExistsError(errno.EEXIST, f"it holds files no export wrote ({', '.join(foreign[:5])}); export into "
                              "a new folder or an export folder", str(out_dir))
