"""The study's plots (PNG, small): delay against one factor, share held, S_b's share.

Drawn with matplotlib's object API, as the report's plots are (m2mc_pipeline/plots.py).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from m2mc_pipeline import plots
from m2mc_pipeline.study.cells import (
    BASE,
    LABELS,
    LOSS,
    MOBILE,
    NAMES,
    ORDERS,
    REPLY,
    SIZE,
    Study,
    _fmt,
    slice_rows,
)


@dataclass(frozen=True, slots=True)
class Figure:
    """One plot of the page: mean (solid) and p99 (dashed) delay against ``vary``,
    one line per ordering, one panel per value of ``panel``; the other factors fixed."""

    name: str
    title: str
    vary: str
    panel: str
    panels: tuple[float, ...]
    fixed: Mapping[str, float]

    def draw(self, study: Study) -> bytes | None:
        fig = plots._figure(figsize=(3.6 * len(self.panels), 3.1))
        axes = fig.subplots(1, len(self.panels), sharey=True, squeeze=False)[0]
        drawn = False
        for ax, pv in zip(axes, self.panels, strict=True):
            rows = slice_rows(study, self.vary, {**self.fixed, self.panel: pv})
            for o in ORDERS:
                pts = sorted((r[LABELS[self.vary]], r["delay_mean"], r["delay_p99"])
                             for r in rows if r["order"] == o and r["delay_mean"] is not None)
                if not pts:
                    continue
                drawn = True
                xs = [p[0] for p in pts]
                ax.plot(xs, [p[1] * 1000 for p in pts], "o-", color=plots._color(o),
                        label=f"{NAMES[o]} mean", markersize=3)
                ax.plot(xs, [(p[2] or 0.0) * 1000 for p in pts], "--", color=plots._color(o),
                        label=f"{NAMES[o]} p99", linewidth=1)
            ax.set_yscale("symlog", linthresh=0.1)
            if self.vary == SIZE:
                ax.set_xscale("log")
            ax.set_title(f"{LABELS[self.panel]} {_fmt(self.panel, pv)}", fontsize=9)
            ax.set_xlabel(LABELS[self.vary], fontsize=9)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=8)
        axes[0].set_ylabel("delivery delay (ms)", fontsize=9)
        _legend(axes)
        fig.suptitle(self.title, fontsize=10, y=1.02)
        return _png(fig) if drawn else None


def _legend(axes: Sequence[Any]) -> None:
    """One legend, on the last panel that has lines."""
    for ax in reversed(list(axes)):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="best")
            return


def held_figure(study: Study, sizes: Sequence[float]) -> bytes | None:
    """Share of deliveries held back at all, against loss, per ordering."""
    fig = plots._figure(figsize=(3.6 * len(sizes), 3.1))
    axes = fig.subplots(1, len(sizes), sharey=True, squeeze=False)[0]
    drawn = False
    for ax, n in zip(axes, sizes, strict=True):
        rows = slice_rows(study, LOSS, {SIZE: n, REPLY: BASE[REPLY], MOBILE: BASE[MOBILE]})
        for o in ORDERS:
            pts = sorted((r[LABELS[LOSS]], r["held"]) for r in rows
                         if r["order"] == o and r["held"] is not None)
            if pts:
                drawn = True
                ax.plot([p[0] for p in pts], [p[1] * 100 for p in pts], "o-",
                        color=plots._color(o), label=NAMES[o], markersize=3)
        ax.set_title(f"group size {int(n)}", fontsize=9)
        ax.set_xlabel("loss", fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
    axes[0].set_ylabel("deliveries held (%)", fontsize=9)
    _legend(axes)
    fig.suptitle("share of deliveries that waited at all", fontsize=10, y=1.02)
    return _png(fig) if drawn else None


def ratio_figure(study: Study, size: float) -> bytes | None:
    """S_b's mean delay as a share of causal's and of total's, over loss x reply rate."""
    rows = [r for r in study.rows() if r[LABELS[SIZE]] == size
            and r[LABELS[MOBILE]] == BASE[MOBILE]]
    losses = sorted({r[LABELS[LOSS]] for r in rows})
    replies = sorted({r[LABELS[REPLY]] for r in rows})
    if not losses or not replies:
        return None
    index = {(r["order"], r[LABELS[LOSS]], r[LABELS[REPLY]]): r for r in rows}
    fig = plots._figure(figsize=(7.2, 3.0))
    axes = fig.subplots(1, 2, squeeze=False)[0]
    image = None
    for ax, other in zip(axes, ("causal", "total"), strict=True):
        grid = np.full((len(replies), len(losses)), np.nan)
        for i, rp in enumerate(replies):
            for j, ls in enumerate(losses):
                a, b = index.get(("sb", ls, rp)), index.get((other, ls, rp))
                if a and b and a["delay_mean"] is not None and b["delay_mean"]:
                    grid[i, j] = 100 * a["delay_mean"] / b["delay_mean"]
                    ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=7,
                            color="white" if grid[i, j] < 50 else "black")
        image = ax.imshow(grid, origin="lower", cmap="viridis", vmin=0, vmax=100,
                          aspect="auto")
        ax.set_xticks(range(len(losses)), [f"{x:g}" for x in losses], fontsize=8)
        ax.set_yticks(range(len(replies)), [f"{x:g}" for x in replies], fontsize=8)
        ax.set_xlabel("loss", fontsize=9)
        ax.set_ylabel("reply rate", fontsize=9)
        ax.set_title(f"S_b mean delay, % of {NAMES[other]}'s", fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.8)
    fig.suptitle(f"group size {int(size)}, mobile share {BASE[MOBILE]:g}", fontsize=10,
                 y=1.04)
    return _png(fig)


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=72, bbox_inches="tight")
    return buf.getvalue()


def figures(study: Study) -> list[Figure]:
    """The one-factor figures, over whatever sizes the sweep has."""
    sizes = sorted({r[LABELS[SIZE]] for r in study.rows()})
    small = tuple(s for s in sizes if s <= 100)[:3] or tuple(sizes[:1])
    return [
        Figure("delay_vs_loss", "delivery delay against loss", LOSS, SIZE, small,
               {REPLY: BASE[REPLY], MOBILE: BASE[MOBILE]}),
        Figure("delay_vs_size", "delivery delay against group size", SIZE, LOSS,
               tuple(sorted({r[LABELS[LOSS]] for r in study.rows()
                             if r[LABELS[LOSS]] in (0.0, BASE[LOSS])})),
               {REPLY: BASE[REPLY], MOBILE: BASE[MOBILE]}),
        Figure("delay_vs_reply", "delivery delay against reply rate", REPLY, SIZE, small,
               {LOSS: BASE[LOSS], MOBILE: BASE[MOBILE]}),
        Figure("delay_vs_mobility", "delivery delay against the share of walking nodes",
               MOBILE, SIZE, small, {LOSS: BASE[LOSS], REPLY: BASE[REPLY]}),
    ]
