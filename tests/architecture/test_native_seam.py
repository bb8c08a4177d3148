"""One native seam (docs/architecture.md, "Compiled code: one package"): the compiled
module is loaded, and chosen against the Python, only inside ``m2mc.native``. Anywhere
else in ``src/``, code imports the chosen functions from ``m2mc.native`` and never
touches the compiled module, its loader, or ``M2MC_PURE`` itself."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
NATIVE = SRC / "m2mc" / "native"
# What only m2mc.native may name: the compiled module, the loader and its module object.
PRIVATE = ("_speedups", "m2mc.native.loader", "M2MC_PURE", "M2MC_NATIVE_PATH")


def reaches_past_the_seam(source: str) -> list[str]:
    """What in ``source`` (a module outside m2mc.native) reaches for the compiled code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            names = [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        elif isinstance(node, ast.Attribute) and node.attr == "NATIVE":
            names = ["NATIVE"]
        bad = [name for name in names if name in ("NATIVE", "m2mc.native.NATIVE")
               or any(p in name for p in PRIVATE)]
        if bad:
            found.append(f"{node.lineno}: {bad[0]}")
    return found


def test_only_m2mc_native_loads_or_chooses_the_compiled_code() -> None:
    offenders = {str(path.relative_to(SRC)): found
                 for path in sorted(SRC.rglob("*.py")) if NATIVE not in path.parents
                 if (found := reaches_past_the_seam(path.read_text(encoding="utf-8")))}
    assert offenders == {}


def test_the_seam_check_sees_each_way_past_it() -> None:
    source = ("from m2mc.native import NATIVE\n"
              "from m2mc.native.loader import STATUS\n"
              "from m2mc.native import _speedups\n"
              "import m2mc.native as n\n"
              "x = n.NATIVE\n"
              "pure = os.environ.get('M2MC_PURE')\n"
              "from m2mc.native import fragment_list, bind_records\n")
    assert [line.split(":")[0] for line in reaches_past_the_seam(source)] == [
        "1", "2", "3", "5", "6"]
