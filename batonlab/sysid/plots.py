# SPDX-License-Identifier: BSD-3-Clause
"""The picture of a fit: a held-out stretch's logged joint positions against the replay before and after."""

from __future__ import annotations

from pathlib import Path

from batonlab.sysid.fit import FitResult, replayed_positions


def plot_replay(path: Path, result: FitResult) -> Path:
    """Write a PNG of the first held-out stretch, one panel per joint: logged, nominal and fitted replays."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    segment = result.validation[:1]
    (t, logged, before), = replayed_positions(segment, result.initial, result.initial.as_vector(), delay_s=0.0)
    (_, _, after), = replayed_positions(segment, result.fitted, result.fitted.as_vector(),
                                        delay_s=result.command_delay_s)
    joints = segment[0].joints
    fig, axes = plt.subplots(len(joints), 1, figsize=(8, 1.6 * len(joints)), sharex=True, squeeze=False)
    for j, (ax, joint) in enumerate(zip(axes[:, 0], joints)):
        ax.plot(t, logged[:, j], "k-", lw=1.5, label="logged")
        ax.plot(t, before[:, j], "r--", lw=1, label="nominal model, no delay")
        ax.plot(t, after[:, j], "b-", lw=1, label="fitted model")
        ax.set_ylabel(f"{joint}\n[rad]", fontsize=8)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[0, 0].set_title(f"held-out stretch {Path(segment[0].bag).name}#{segment[0].index}: "
                         f"RMSE {result.rmse_rad['validation'][0]:.2e} -> {result.rmse_rad['validation'][1]:.2e} rad "
                         "(all held-out stretches)", fontsize=9)
    axes[-1, 0].set_xlabel("time [s]")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
