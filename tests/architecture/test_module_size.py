"""Small modules with one concern (the team's style rule): no module of the group
layer is over 600 lines. The group package was split by concern to get there
(docs/architecture.md, "The group package"); this keeps it so."""

from __future__ import annotations

from pathlib import Path

GROUP = Path(__file__).resolve().parents[2] / "src" / "m2mc" / "group"
LIMIT = 600


def test_no_group_module_is_over_600_lines() -> None:
    sizes = {str(p.relative_to(GROUP)): len(p.read_text(encoding="utf-8").splitlines())
             for p in sorted(GROUP.rglob("*.py"))}
    assert len(sizes) > 20
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}
