"""The delivery-delay study's slice (docs/study/), shared by test_study.py (on local) and
test_cluster.py (on a standalone cluster): docs/study/study.toml's 10-node grid cut to
one value of each factor (loss 0.1, reply rate 0.6, a fifth of the nodes walking) and
one seed, under every ordering, three simulations; and the checks of the page that
bench/study.py writes from a sweep's output."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from m2mc_pipeline import study

STUDY = Path(__file__).resolve().parents[2] / "docs" / "study"
SLICE = {study.LOSS: [0.1], study.REPLY: [0.6], study.MOBILE: [0.2]}


def write_slice(where: Path) -> Path:
    """The study's 10-node grid, one value per factor, seed 1, every ordering."""
    doc = tomllib.loads((STUDY / "study.toml").read_text())
    grid = next(g for g in doc["grid"] if g[study.SIZE] == [10])
    part = {k: SLICE.get(k, v) for k, v in grid.items() if k != "seeds"}
    assert part[study.ORDER] == list(study.ORDERS)
    sliced = {"scenarios": [str(STUDY / s) for s in doc["scenarios"]], "seeds": [1],
              "timeout": 300, "grid": [part]}
    path = where / "slice.toml"
    path.write_text(tomli_w.dumps(sliced))
    return path


def scenario() -> dict[str, Any]:
    return tomllib.loads((STUDY / "scenario.toml").read_text())


def page_of(out: Path, docs: Path) -> tuple[study.Study, str]:
    data = study.load(out, scenario())
    page = study.Page(command="python bench/study.py", sweep_file="slice.toml",
                      runtime="test", machine="test")
    written = study.write(data, docs, page, scenario())
    assert all(p.is_file() for p in written)
    return data, (docs / "README.md").read_text()


def check_page(data: study.Study, text: str, docs: Path) -> None:
    assert data.valid and data.tasks == 3 and data.failed == 0
    rows = data.rows()
    assert [r["order"] for r in rows] == list(study.ORDERS)
    for r in rows:
        assert (r["group size"], r["loss"], r["reply rate"], r["mobile share"]) == \
            (10, 0.1, 0.6, 0.2)
        assert r["runs"] == 1 and r["seeds"] == "1" and r["deliveries"] > 100
        assert r["delay_mean"] is not None and r["delay_mean"] >= 0
        assert r["delay_p50"] <= r["delay_p90"] <= r["delay_p99"] <= r["delay_max"]
    lines = (docs / "cells.csv").read_text().splitlines()
    assert len(lines) == 1 + len(rows) and lines[0].startswith("order,group size,loss")
    assert len((docs / "runs.csv").read_text().splitlines()) == 1 + len(rows)
    # Every figure the page shows is a PNG beside it, named with the command that made it.
    shown = [part.split(")")[0] for part in text.split("](")[1:] if ".png)" in part]
    assert shown, text
    for name in shown:
        assert (docs / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert text.count("Produced by `python bench/study.py`") == len(shown)
    assert "```sh\npython bench/study.py\n```" in text
    assert "no violation in any run" in text
