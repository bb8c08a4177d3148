"""Small modules with one concern (the team's style rule): no Python module of the
product (src/: m2mc, m2mc_chat, m2mc_pipeline) is over 600 lines. The group package
was split by concern to get there (docs/architecture.md, "The group package"), the
API by mode and the fuzz targets by layer; this keeps it so."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
LIMIT = 600


def test_no_module_is_over_600_lines() -> None:
    sizes = {str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines())
             for p in sorted(SRC.rglob("*.py"))}
    assert len([name for name in sizes if name.startswith("m2mc/group/")]) > 20
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}
