# SPDX-License-Identifier: BSD-3-Clause
"""The fit's HTML report: the library's sections plus batonlab's held-out replay before and after."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from mujoco import sysid
from mujoco.sysid.report.sections.base import ReportSection

from batonlab.robots.assets import quiet_compiler
from batonlab.sysid.fit import FitResult
from batonlab.sysid.plots import plot_replay


class ReplayFigure(ReportSection):
    """A PNG embedded in the report (no file beside the page needed), with a caption."""

    def __init__(self, title: str, png: Path, caption: str):
        super().__init__(collapsible=True, is_open=True)
        self._title, self._png, self._caption = title, png, caption

    @property
    def title(self) -> str:
        return self._title

    @property
    def template_filename(self) -> str:
        return "plot_generic.html"

    def get_context(self) -> dict:
        data = base64.b64encode(self._png.read_bytes()).decode("ascii")
        return {"plot_div": f'<img alt="{html.escape(self._title)}" style="max-width: 100%" '
                            f'src="data:image/png;base64,{data}">', "caption": html.escape(self._caption)}


def write_report(out: Path, task: str, result: FitResult) -> tuple[Path, Path]:
    """Write `replay.png` and `report.html` (the library's report with the replay figure in it) to `out`."""
    png = plot_replay(out / "replay.png", result)
    before, after = result.rmse_rad["validation"]
    caption = (f"Logged joint positions of the first held-out stretch against an open-loop replay on the nominal "
               f"model (no delay) and on the fitted one; held-out RMSE {before:.3g} -> {after:.3g} rad.")
    with quiet_compiler():
        builder = sysid.default_report([s.sequence for s in result.train], result.initial, result.fitted,
                                       result.residual_fn, result.opt_result, title=f"batonlab sysid: {task}",
                                       generate_videos=False)
    builder.add_section(ReplayFigure("Held-out replay, before and after (batonlab)", png, caption))
    page = out / "report.html"
    builder.save(str(page))
    return png, page
