"""report.html: one self-contained page (plots embedded as base64 PNG, no network).

The page holds the verification verdict with examples, the runs, the
metrics tables, the comparison of orderings and the plots. Everything comes
from the summaries the pipeline already computed.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f3f3f3} td.l,th.l{text-align:left}
.verdict{font-size:1.4em;padding:.5em 1em;border-radius:6px;display:inline-block}
.ok{background:#e3f6e3;color:#135e13} .bad{background:#fbe3e3;color:#8a1111}
code,pre{font-size:.85em;background:#f7f7f7} pre{padding:.4em;white-space:pre-wrap;margin:0}
img{max-width:100%;border:1px solid #eee;margin:.5em 0} .muted{color:#777}
"""


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _cell(value: Any) -> str:
    if value is None:
        return '<td class="muted">-</td>'
    if isinstance(value, float):
        return f"<td>{value:.6g}</td>"
    if isinstance(value, int | bool):
        return f"<td>{value}</td>"
    if isinstance(value, dict | list):
        return f'<td class="l"><code>{_esc(json.dumps(value))}</code></td>'
    return f'<td class="l">{_esc(value)}</td>'


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
          limit: int = 60) -> str:
    if not rows:
        return '<p class="muted">no data</p>'
    cols = list(columns) if columns else list(rows[0].keys())
    head = "".join(f'<th class="l">{_esc(c)}</th>' for c in cols)
    body = "".join("<tr>" + "".join(_cell(r.get(c)) for c in cols) + "</tr>"
                   for r in rows[:limit])
    more = (f'<p class="muted">{len(rows) - limit} more rows in the Parquet tables</p>'
            if len(rows) > limit else "")
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def _img(png: bytes | None, alt: str) -> str:
    if png is None:
        return f'<p class="muted">{_esc(alt)}: not enough data for this plot</p>'
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{_esc(alt)}" src="data:image/png;base64,{data}">'


def _checks(verify: Mapping[str, Any]) -> str:
    rows = []
    for name, result in verify["checks"].items():
        examples = "".join(f"<pre>{_esc(json.dumps(e, sort_keys=True))}</pre>"
                           for e in result["examples"])
        cls = "ok" if result["violations"] == 0 else "bad"
        rows.append(f'<tr><td class="l">{_esc(name)}</td><td class="{cls}">'
                    f'{result["violations"]}</td><td class="l">{examples or "-"}</td></tr>')
    return ('<table><tr><th class="l">check</th><th>violations</th>'
            '<th class="l">examples</th></tr>' + "".join(rows) + "</table>")


def _rows(section: Any) -> list[dict[str, Any]]:
    if isinstance(section, dict):
        return list(section.get("rows") or [])
    return list(section or [])


def _packets_note(rows: Sequence[Mapping[str, Any]]) -> str:
    """Say which runs have no packet figures (real nodes do not trace packets)."""
    missing = [str(r.get("run")) for r in rows if not r.get("packets")]
    if not missing:
        return ""
    shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10
                                       else "")
    return ('<p class="muted">Packet figures (packets, bytes and msgs-per-op per message) are '
            f"unavailable for {len(missing)} of {len(rows)} runs ({_esc(shown)}): their traces "
            "hold no <code>packet_out</code> event. Real nodes do not trace packets; the "
            "simulator does with <code>[trace] packets = true</code>.</p>")


def render(verify: Mapping[str, Any], metrics: Mapping[str, Any],
           plots: Mapping[str, bytes | None], title: str = "m2mc trace analysis") -> str:
    valid = verify["valid"]
    verdict = ('<div class="verdict ok">VALID: every check passed</div>' if valid else
               '<div class="verdict bad">VIOLATIONS FOUND</div>')
    counts = verify.get("counts", {})
    cmp = metrics.get("comparison", {})
    side = cmp.get("delay_side_by_side", {})
    side_rows = [{"scenario": sc, "order": o, **q} for sc, per in side.items()
                 for o, q in per.items()]
    delay = metrics.get("delivery_delay", {})
    latency = metrics.get("latency", {})
    repair = metrics.get("repair", {})
    overhead_rows = metrics.get("overhead", {}).get("by_run", [])
    parts = [
        f"<h1>{_esc(title)}</h1>", verdict,
        f'<p>{counts.get("events", 0)} events, {counts.get("messages", 0)} messages, '
        f'{counts.get("nodes", 0)} nodes, {len(metrics.get("runs", []))} runs; '
        f'{counts.get("malformed", 0)} malformed rows skipped.</p>',
        "<h2>Verification (docs/interfaces.md §5)</h2>", _checks(verify),
        "<h2>Runs</h2>",
        table(metrics.get("runs", []), ["run", "scenario", "seed", "loss", "orders", "events",
                                        "nodes", "messages", "dir"]),
        "<h2>Delivery delay (receive to deliver)</h2>",
        _img(plots.get("delay_by_ordering"), "delivery delay by ordering"),
        table(delay.get("by_order", [])),
        "<h3>Same scenario (and swept parameters), each ordering</h3>",
        table(side_rows, ["scenario", "order", "count", "p50", "p90", "p99", "max"]),
        "<h3>By group</h3>", table(_rows(delay.get("by_group"))),
        "<h2>End-to-end latency (send to deliver)</h2>",
        _img(plots.get("latency_by_ordering"), "latency by ordering"),
        table(latency.get("by_order", [])),
        _img(plots.get("latency_vs_loss"), "latency against loss"),
        table(cmp.get("latency_vs_loss", [])),
        "<h2>Throughput</h2>", _img(plots.get("throughput"), "throughput"),
        table(metrics.get("throughput", {}).get("by_run", [])),
        "<h2>Overhead and repair</h2>", _img(plots.get("repair_overhead"), "repair overhead"),
        _packets_note(overhead_rows),
        table(overhead_rows,
              ["run", "messages", "packets", "packet_bytes", "packets_per_message",
               "bytes_per_message", "msgs_per_op", "requests", "suppressed", "retransmits",
               "sync_resps", "sync_resps_suppressed", "drops", "dups"]),
        "<h3>Time to repair and catch up</h3>",
        table([{"what": "repair (first NACK covering a message to its arrival)",
                **repair.get("repair_time", {}), "unrepaired": repair.get("unrepaired")},
               {"what": "catch-up (sync_req after a join or restart to the last delivery of "
                        "a message sent before it)", **repair.get("catchup_time", {})}],
              ["what", "count", "mean", "p50", "p90", "p99", "max", "unrepaired",
               "episodes"]),
        "<h2>Out-of-sequence store occupancy</h2>",
        table(metrics.get("osms_occupancy", {}).get("by_order", [])),
        "<h2>Message timeline</h2>",
        _img(plots.get("timeline"), "message timeline"),
        '<p class="muted">Definitions: docs/pipeline.md. Tables: the Parquet files under '
        "tables/.</p>",
    ]
    return ("<!doctype html><html><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(parts) + "</body></html>\n")


def write(path: Path, verify: Mapping[str, Any], metrics: Mapping[str, Any],
          plots: Mapping[str, bytes | None]) -> Path:
    path.write_text(render(verify, metrics, plots), encoding="utf-8")
    return path
