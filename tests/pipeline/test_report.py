"""The report's handling of missing figures (no Spark): a run without packet tracing
has null packet figures, which the repair-overhead plot leaves out (never draws as 0)
and the report names."""

from __future__ import annotations

from typing import Any

from m2mc_pipeline import plots, report


def _points(fig: Any) -> dict[str, list[tuple[float, float]]]:
    ax = fig.axes[0]
    return {str(c.get_label()): sorted((float(x), float(y)) for x, y in c.get_offsets())
            for c in ax.collections}


def test_missing_packet_figures_are_not_drawn_as_zero_against_loss() -> None:
    rows = [{"run": "sim", "loss": 0.2, "order": "sb", "requests_per_message": 0.5,
             "packets_per_message": 3.0},
            {"run": "real", "loss": 0.0, "order": "sb", "requests_per_message": 0.1,
             "packets_per_message": None}]
    fig = plots.repair_overhead_figure(rows)
    assert fig is not None
    pts = _points(fig)
    assert pts["sb requests/msg"] == [(0.0, 0.1), (0.2, 0.5)]
    assert pts["sb packets/msg"] == [(0.2, 3.0)]  # the real run has no point, not (0.0, 0)
    assert plots.repair_overhead(rows) is not None


def test_missing_packet_figures_are_not_drawn_as_zero_per_run() -> None:
    rows = [{"run": "a", "loss": None, "order": "sb", "requests_per_message": 0.5,
             "packets_per_message": None},
            {"run": "b", "loss": None, "order": "sb", "requests_per_message": 0.25,
             "packets_per_message": 2.0}]
    fig = plots.repair_overhead_figure(rows)
    assert fig is not None
    ax = fig.axes[0]
    bars = {str(c.get_label()): [(p.get_x() + p.get_width() / 2, p.get_height())
                                 for p in c.patches] for c in ax.containers}
    assert [h for _, h in bars["repair requests/msg"]] == [0.5, 0.25]
    assert bars["packets/msg"] == [(1.2, 2.0)]  # run b only
    assert [t.get_text() for t in ax.texts] == ["n/a"]  # run a's packets


def test_report_names_the_runs_without_packet_figures() -> None:
    verify = {"valid": True, "checks": {}, "counts": {"events": 1}}
    metrics = {"overhead": {"by_run": [{"run": "demo-real", "packets": 0},
                                       {"run": "sim-1", "packets": 12}]}}
    html = report.render(verify, metrics, {})
    assert "unavailable for 1 of 2 runs (demo-real)" in html
    metrics["overhead"]["by_run"][0]["packets"] = 3
    assert "unavailable" not in report.render(verify, metrics, {})
