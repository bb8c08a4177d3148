"""The report's plots, drawn from small summaries (never raw events) as PNG bytes.

matplotlib's object API (``Figure``) is used without pyplot: no global state,
no GUI backend, safe to call from any thread.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TIMELINE_MESSAGES = 40  # rows of the timeline plot (the first messages the node saw)
ORDER_COLORS = {"sb": "#1b9e77", "causal": "#d95f02", "total": "#7570b3", "fifo": "#e7298a",
                "none": "#666666"}


def load_matplotlib() -> None:
    """Import matplotlib (a third of a second): ``analyze`` does it in a thread while
    the JVM starts, so that the report does not wait for it."""
    for module in ("matplotlib.figure", "matplotlib.backends.backend_agg"):  # savefig's
        importlib.import_module(module)


def _figure(**kwargs: Any) -> Figure:
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _color(order: str) -> str:
    return ORDER_COLORS.get(order, "#444444")


def delay_by_ordering(cdfs: Mapping[str, Sequence[float]], what: str = "delivery delay"
                      ) -> bytes | None:
    """Distribution (CDF from 100 quantiles) per ordering."""
    if not cdfs:
        return None
    fig = _figure(figsize=(7, 4))
    ax = fig.add_subplot()
    for order in sorted(cdfs):
        qs = list(cdfs[order])
        probs = [(i + 1) / len(qs) for i in range(len(qs))]
        ax.step(qs, probs, where="post", label=order, color=_color(order))
    ax.set_xlabel(f"{what} (s)")
    ax.set_ylabel("fraction of deliveries")
    ax.set_title(f"{what} by ordering")
    ax.grid(alpha=0.3)
    ax.legend()
    if all(q >= 0 for qs in cdfs.values() for q in qs) and max(max(q) for q in cdfs.values()) > 0:
        ax.set_xscale("symlog", linthresh=1e-3)
    return _png(fig)


def latency_vs_loss(rows: Sequence[Mapping[str, Any]]) -> bytes | None:
    """p50 (solid) and p99 (dashed) latency against the loss rate, per ordering."""
    if not rows or len({r["loss"] for r in rows}) < 2:
        return None
    fig = _figure(figsize=(7, 4))
    ax = fig.add_subplot()
    for order in sorted({r["order"] for r in rows}):
        pts = sorted((r["loss"], r["p50"], r["p99"]) for r in rows if r["order"] == order)
        xs = [p[0] for p in pts]
        ax.plot(xs, [p[1] for p in pts], marker="o", color=_color(order), label=f"{order} p50")
        ax.plot(xs, [p[2] for p in pts], marker="x", linestyle="--", color=_color(order),
                label=f"{order} p99")
    ax.set_xlabel("packet loss rate")
    ax.set_ylabel("latency (s)")
    ax.set_title("end-to-end latency against loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _png(fig)


def repair_overhead(rows: Sequence[Mapping[str, Any]]) -> bytes | None:
    """Repair requests and packets per application message: against loss, else per run.

    A value that is missing (null: a run that did not trace packets, as real nodes
    do not) is left out of the plot, never drawn as 0; bars say "n/a" instead.
    """
    fig = repair_overhead_figure(rows)
    return _png(fig) if fig is not None else None


def repair_overhead_figure(rows: Sequence[Mapping[str, Any]]) -> Figure | None:
    rows = [r for r in rows if r.get("packets_per_message") is not None
            or r.get("requests_per_message") is not None]
    if not rows:
        return None
    fig = _figure(figsize=(7, 4))
    ax = fig.add_subplot()
    series = (("requests_per_message", "requests/msg", "o"),
              ("packets_per_message", "packets/msg", "^"))
    with_loss = [r for r in rows if r.get("loss") is not None]
    if len({r["loss"] for r in with_loss}) >= 2:
        for order in sorted({str(r["order"]) for r in with_loss}):
            for key, what, marker in series:
                pts = [r for r in with_loss if str(r["order"]) == order
                       and r.get(key) is not None]
                if pts:
                    ax.scatter([r["loss"] for r in pts], [r[key] for r in pts],
                               color=_color(order), label=f"{order} {what}", marker=marker)
        ax.set_xlabel("packet loss rate")
    else:
        shown = rows[:40]
        xs = list(range(len(shown)))
        for (key, what, _), shift in zip(series, (-0.2, 0.2), strict=True):
            have = [(x, r[key]) for x, r in zip(xs, shown, strict=True) if r.get(key) is not None]
            if have:
                ax.bar([x + shift for x, _ in have], [v for _, v in have], 0.4,
                       label=f"repair {what}" if key.startswith("requests") else what)
            for x, r in zip(xs, shown, strict=True):
                if r.get(key) is None:
                    ax.text(x + shift, 0, "n/a", ha="center", va="bottom", fontsize="x-small",
                            rotation=90, color="#777777")
        ax.set_xticks(xs, [str(r["run"]) for r in shown], rotation=60, fontsize="small")
        ax.set_xlabel("run")
    ax.set_ylabel("per application message")
    ax.set_title("repair overhead")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return fig


_MARKERS = {"send": ("s", "#1f77b4"), "recv": ("o", "#ff7f0e"), "deliver": ("D", "#2ca02c"),
            "dup": ("x", "#7f7f7f"), "retransmit": ("^", "#9467bd")}
# The node's requests name ranges, not one message: drawn as vertical lines.
REQUESTS = {"nack": "#d62728", "sync_req": "#8c564b"}


def timeline(rows: Sequence[Mapping[str, Any]], node: str, run: str) -> bytes | None:
    """One node's message events over time: a row per message, recv-to-deliver as a bar,
    the node's NACKs and sync requests as vertical lines."""
    requests = [r for r in rows if r.get("event") in REQUESTS and not r.get("mid")]
    rows = [r for r in rows if r.get("mid") and r.get("event") in _MARKERS]
    if not rows:
        return None
    groups = {r.get("group") for r in rows}

    def label(r: Mapping[str, Any]) -> str:
        return f"{r.get('group')}/{r['mid']}" if len(groups) > 1 else str(r["mid"])

    labels: list[str] = []
    for r in rows:
        if label(r) not in labels:
            labels.append(label(r))
    labels = labels[:TIMELINE_MESSAGES]
    rows = [r for r in rows if label(r) in labels]
    y = {m: i for i, m in enumerate(labels)}
    fig = _figure(figsize=(8, max(3.0, 0.22 * len(labels) + 1)))
    ax = fig.add_subplot()
    recv = {label(r): r["t"] for r in rows if r["event"] == "recv"}
    for r in rows:
        if r["event"] == "deliver" and label(r) in recv:
            ax.plot([recv[label(r)], r["t"]], [y[label(r)]] * 2, color="#bbbbbb", zorder=1)
    for event, (marker, color) in _MARKERS.items():
        pts = [r for r in rows if r["event"] == event]
        if pts:
            ax.scatter([r["t"] for r in pts], [y[label(r)] for r in pts], marker=marker,
                       color=color, label=event, zorder=2, s=22)
    last = max(r["t"] for r in rows)
    for event, color in REQUESTS.items():
        times = [r["t"] for r in requests if r["event"] == event and r["t"] <= last]
        for k, t in enumerate(times):
            ax.axvline(t, color=color, linestyle=":", linewidth=0.8, zorder=0,
                       label=event if k == 0 else None)
    ax.set_yticks(range(len(labels)), labels, fontsize="x-small")
    ax.invert_yaxis()
    ax.set_xlabel("t (s)")
    ax.set_title(f"message timeline at node {node} (run {run})")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig)


def throughput(rows: Sequence[Mapping[str, Any]], width: float, max_runs: int = 6
               ) -> bytes | None:
    if not rows:
        return None
    fig = _figure(figsize=(7, 3.5))
    ax = fig.add_subplot()
    runs = sorted({r["run"] for r in rows})[:max_runs]
    for run in runs:
        pts = [r for r in rows if r["run"] == run]
        ax.step([r["t_start"] for r in pts], [r["deliveries"] / width for r in pts],
                where="post", label=str(run))
    ax.set_xlabel("t (s)")
    ax.set_ylabel("deliveries / s")
    ax.set_ylim(bottom=0)
    ax.set_title(f"throughput (buckets of {width:g}s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _png(fig)
