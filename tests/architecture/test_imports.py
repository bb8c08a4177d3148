"""The import contract, read from the source (an AST check, run by ``make test``).

1. The cores are pure (docs/architecture.md, "Sans-IO cores"). Every module of
   the core packages -- ``m2mc.wire``, ``m2mc.ordering``, ``m2mc.group``,
   ``m2mc.infra`` -- and every module they import, however indirectly (so
   ``m2mc.core``, ``m2mc.errors``, ``m2mc.trace``, the pure part of ``m2mc.store``
   and the ``m2mc.security`` modules they use are held to the same rule, and the
   SQLite stores, which no core imports, are not), imports none of ``asyncio``,
   ``socket``, ``time``, ``threading``, ``selectors``, ``sqlite3`` and uses no
   module-level random generator: ``random.Random`` as a type, or built from a
   seed the caller gave, is fine; ``random.random()``, ``random.choice(...)``,
   ``from random import shuffle``, ``random.SystemRandom`` and ``random.Random()``
   without a seed (seeded by the OS) are not.
2. The layers: a package imports only from its own layer or the layers below
   (``LAYERS``), so wire < ordering < group/infra < runtime < api < cli.
3. No import cycles between modules (issue 36, part 3): in the graph of every
   import of ``src/``, those under ``if TYPE_CHECKING:`` and inside functions
   included, no strongly connected component has more than one module.
4. No import cycles between packages: in the same graph with each module taken
   as its package (``package_of``, the unit the layers are made of), no strongly
   connected component has more than one package. Rule 2 lets packages of one
   layer import each other and does not count ``TYPE_CHECKING`` imports; this rule
   closes both doors, so a package can be read with only what is below it.

What breaks a rule today is listed with the reason in ``ADAPTERS_IN_CORES``,
``KNOWN_LAYER_BREAKS`` and ``KNOWN_CYCLES`` (all three empty now); an entry that
no longer applies fails too, so the lists only shrink. For rules 1 and 2
``TYPE_CHECKING`` imports are not dependencies (they never run); imports inside
functions are. For rules 3 and 4 both are: a cycle that only type checking closes
still ties the modules together for a reader and is one function-local or
``TYPE_CHECKING`` import away from a real one.
"""

from __future__ import annotations

import ast
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGES = ("m2mc", "m2mc_chat", "m2mc_pipeline")

CORES = ("m2mc.wire", "m2mc.ordering", "m2mc.group", "m2mc.infra")
FORBIDDEN = {
    "asyncio": "an event loop is the driver's",
    "socket": "sockets are the driver's links",
    "time": "the clock is the driver's: cores take `now`",
    "threading": "a core runs on its driver's thread",
    "selectors": "waiting for I/O is the driver's",
    "sqlite3": "persistence is an effect the driver carries out (m2mc.core.Save)",
}
RANDOM_OK = frozenset({"Random"})

# Modules in core packages that are drivers or tools, not cores (not checked for
# purity, and not followed: what they import is not a core's dependency). None
# left: the simulator's stacks live in m2mc.sim, the fuzz targets beside
# m2mc.fuzz_targets. Keep it so.
ADAPTERS_IN_CORES: dict[str, str] = {}

# Lowest first; a package may import from its own layer and the layers below.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("m2mc", "m2mc.errors", "m2mc.log", "m2mc.core", "m2mc.trace", "m2mc.kinds",
     "m2mc.fastobj", "m2mc.native"),  # shared by all
    ("m2mc.wire",),
    ("m2mc.ordering",),
    ("m2mc.security", "m2mc.store"),  # what the group and infrastructure cores use
    ("m2mc.group", "m2mc.infra"),
    ("m2mc.transport", "m2mc.config"),  # channels (I/O) and the configuration
    ("m2mc.runtime", "m2mc.infra_runtime", "m2mc.sim", "m2mc.metrics"),  # the drivers
    ("m2mc.api",),  # the application API: its modes drive runtime, infra_runtime, metrics
    ("m2mc_chat", "m2mc_pipeline"),  # applications on top
    ("m2mc.cli", "m2mc.demo", "m2mc.fuzz_targets", "m2mc.fuzz_group", "m2mc.fuzz_infra",
     "m2mc.fuzzer", "m2mc.wireshark"),  # tools
)

# (importing module, imported package): why, until the cycle is broken. None left
# (the package cycle they closed is broken, rule 4): keep it so.
KNOWN_LAYER_BREAKS: dict[tuple[str, str], str] = {}


# ------------------------------------------------------------------ reading
@dataclass(frozen=True)
class Statement:
    """One ``import`` or ``from ... import`` statement, relative names resolved."""

    module: str  # the module after ``import`` (one per name) or after ``from``
    names: tuple[str, ...]  # what ``from ... import`` takes from it; () for ``import``
    line: int
    typing_only: bool  # under ``if TYPE_CHECKING:``


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    # (module, line) of what runs (rules 1 and 2): every module named, and every
    # ``module.name`` a ``from`` imports, which _own() narrows to this tree's modules
    imports: list[tuple[str, int]] = field(default_factory=list)
    statements: list[Statement] = field(default_factory=list)  # all of them (rule 3)


def _name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def statements(tree: ast.Module, package: str) -> list[Statement]:
    """Every import statement of ``tree``, a module of ``package`` (where a relative
    import starts), wherever it stands: at the top, in a function, under a guard."""
    typing_only = _type_checking_nodes(tree)
    found: list[Statement] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Statement(alias.name, (), node.lineno, id(node) in typing_only)
                      for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package this module is in
                parts = package.split(".")
                anchor = parts[:len(parts) + 1 - node.level]
                base = ".".join([*anchor, base] if base else anchor)
            found.append(Statement(base, tuple(alias.name for alias in node.names),
                                   node.lineno, id(node) in typing_only))
    return found


@cache
def modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for package in PACKAGES:
        root = SRC / package
        stubs = [p for p in root.rglob("*.pyi") if not p.with_suffix(".py").exists()]
        for path in sorted([*root.rglob("*.py"), *stubs]):  # a compiled module's stub too
            name = _name(path)
            module = Module(name, path, ast.parse(path.read_text(), str(path)))
            package_of = name if path.name == "__init__.py" else name.rpartition(".")[0]
            module.statements = statements(module.tree, package_of)
            for statement in module.statements:
                if statement.typing_only:
                    continue
                module.imports.append((statement.module, statement.line))
                module.imports += [(f"{statement.module}.{imported}", statement.line)
                                   for imported in statement.names]
            found[name] = module
    return found


def _own(name: str) -> list[str]:
    """The modules of this source tree that importing ``name`` runs (parents too)."""
    known = modules()
    parts = name.split(".")
    return [m for m in (".".join(parts[:k]) for k in range(1, len(parts) + 1)) if m in known]


def package_of(name: str) -> str:
    """The unit the layers are made of: ``m2mc.<first part>``, or a top-level package."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "m2mc" and len(parts) > 1 else parts[0]


def _in_cores(name: str) -> bool:
    return any(name == core or name.startswith(core + ".") for core in CORES)


# ------------------------------------------------------------------ purity
def core_closure() -> set[str]:
    """The core modules and every module of ours they import, however indirectly."""
    known = modules()
    todo = [name for name in known if _in_cores(name) and name not in ADAPTERS_IN_CORES]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name in ADAPTERS_IN_CORES:
            continue
        seen.add(name)
        for imported, _ in known[name].imports:
            todo.extend(_own(imported))
    return seen


def impurities(module: Module) -> Iterator[str]:
    """What in ``module`` breaks rule 1, one line each."""
    random_names: set[str] = set()  # local names of the random module
    for imported, line in module.imports:
        top = imported.partition(".")[0]
        if top in FORBIDDEN:
            yield f"{module.name}:{line}: imports {imported} ({FORBIDDEN[top]})"
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            random_names.update(a.asname or a.name for a in node.names if a.name == "random")
        elif isinstance(node, ast.ImportFrom) and node.module == "random" and not node.level:
            for alias in node.names:
                if alias.name not in RANDOM_OK:
                    yield (f"{module.name}:{node.lineno}: from random import {alias.name} "
                           "(the module-level generator; take an injected random.Random)")
    for node in ast.walk(module.tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in random_names and node.attr not in RANDOM_OK):
            yield (f"{module.name}:{node.lineno}: random.{node.attr} (the module-level "
                   "generator or the OS's; take an injected random.Random)")
        if (isinstance(node, ast.Call) and not node.args and not node.keywords
                and _is_random_class(node.func, random_names)):
            yield (f"{module.name}:{node.lineno}: random.Random() without a seed is seeded "
                   "by the OS; take the generator (or a seed) from the caller")


def _is_random_class(func: ast.expr, random_names: set[str]) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "Random"
            and isinstance(func.value, ast.Name) and func.value.id in random_names)


def test_the_cores_and_what_they_import_are_pure() -> None:
    closure = core_closure()
    assert {"m2mc.wire.m2mp", "m2mc.group.manager", "m2mc.infra.member",
            "m2mc.ordering.sb", "m2mc.core", "m2mc.store"} <= closure  # the check sees them
    assert "m2mc.store.sqlite" not in closure  # persistence: the driver's (m2mc.core.Save)
    problems = [p for name in sorted(closure) for p in impurities(modules()[name])]
    assert not problems, "impure core modules:\n" + "\n".join(problems)


def test_the_purity_check_catches_what_it_is_for() -> None:
    source = (
        "import random, time\n"
        "from asyncio import sleep\n"
        "from random import Random, choice\n"
        "rng = random.Random(7)\n"
        "seeded_by_the_os = random.Random()\n"
        "x = random.random()\n"
        "def f(r: random.Random) -> None:\n"
        "    import socket\n")
    module = Module("m2mc.wire.example", SRC / "example.py", ast.parse(source),
                    [("random", 1), ("time", 1), ("asyncio", 2), ("random", 3),
                     ("random.Random", 3), ("random.choice", 3), ("socket", 8)])
    found = "\n".join(impurities(module))
    for expected in (":1: imports time", ":2: imports asyncio", ":8: imports socket",
                     ":3: from random import choice", ":5: random.Random() without a seed",
                     ":6: random.random"):
        assert expected in found
    assert ":4:" not in found and ":7:" not in found  # a seeded generator, a type


def test_adapters_listed_in_core_packages_exist() -> None:
    missing = [name for name in ADAPTERS_IN_CORES if name not in modules()]
    assert not missing, f"ADAPTERS_IN_CORES names modules that are gone: {missing}"


# ------------------------------------------------------------------ layers
def _layer(package: str) -> int | None:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    return None


def layer_breaks() -> dict[tuple[str, str], list[str]]:
    """(module, package it imports from a higher layer) -> where, for every break."""
    breaks: dict[tuple[str, str], list[str]] = {}
    known = modules()
    for name, module in known.items():
        own = _layer(package_of(name))
        for imported, line in module.imports:
            if not _own(imported):
                continue
            target = package_of(_own(imported)[-1])
            theirs = _layer(target)
            if own is None or theirs is None or theirs <= own:
                continue
            breaks.setdefault((name, target), []).append(f"{name}:{line} imports {imported}")
    return breaks


def test_every_package_has_a_layer() -> None:
    unplaced = sorted({package_of(name) for name in modules()
                       if _layer(package_of(name)) is None})
    assert not unplaced, f"add these packages to LAYERS: {unplaced}"


def test_no_package_imports_from_a_layer_above_its_own() -> None:
    breaks = layer_breaks()
    new = {key: where for key, where in breaks.items() if key not in KNOWN_LAYER_BREAKS}
    assert not new, "imports from a higher layer:\n" + "\n".join(
        line for where in new.values() for line in where)
    gone = sorted(set(KNOWN_LAYER_BREAKS) - set(breaks))
    assert not gone, f"fixed (delete these from KNOWN_LAYER_BREAKS): {gone}"


# ------------------------------------------------------------------ cycles
# Each strongly connected component of the module import graph (rule 3) that has
# more than one module, until it is broken. The list may only shrink: a cycle not
# here fails, and so does an entry that no longer matches a cycle (delete it, or,
# if the cycle only lost modules, write what is left).
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset()  # none left (issue 36): keep it so


def edges(statement: Statement, known: Container[str]) -> set[str]:
    """The modules of this tree a statement depends on: the module it names and,
    for ``from a import b``, ``a.b`` when that is a module (else ``a``, whose
    namespace holds ``b``). Parent packages are not edges: a package's
    ``__init__`` runs first, but a module needs only what it names."""
    if not statement.names:
        return {statement.module} if statement.module in known else set()
    named = [f"{statement.module}.{imported}" for imported in statement.names]
    found = {name for name in named if name in known}
    if len(found) < len(named) and statement.module in known:
        found.add(statement.module)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of this tree it imports (rule 3: every import counts)."""
    known = modules()
    return {name: {target for statement in module.statements
                   for target in edges(statement, known)} - {name}
            for name, module in known.items()}


def cycles(graph: Mapping[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of ``graph`` with more than one node: a
    node's component is itself and what it reaches that reaches it back."""
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for target in graph.get(todo.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        reach[start] = seen
    components = {frozenset({start} | {other for other in reach[start]
                                       if start in reach[other]}) for start in graph}
    return {component for component in components if len(component) > 1}


def _cycle_imports(cycle: frozenset[str]) -> list[str]:
    """Where the modules of ``cycle`` import each other, one line each."""
    known = modules()
    return [f"  {name}:{statement.line} imports {target}"
            + (" (TYPE_CHECKING)" if statement.typing_only else "")
            for name in sorted(cycle)
            for statement in sorted(known[name].statements, key=lambda s: s.line)
            for target in sorted(edges(statement, known) & cycle) if target != name]


def test_the_cycle_rule_sees_every_kind_of_import() -> None:
    source = ("from typing import TYPE_CHECKING\n"
              "from . import b\n"
              "from .c import Thing\n"
              "import pkg.d\n"
              "if TYPE_CHECKING:\n"
              "    from pkg.e import Other\n"
              "def f() -> None:\n"
              "    from pkg import f, not_a_module\n")
    found = statements(ast.parse(source), "pkg")
    known = {"pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d", "pkg.e", "pkg.f"}
    assert set().union(*(edges(s, known) for s in found)) == {
        "pkg.b", "pkg.c", "pkg.d", "pkg.e", "pkg.f", "pkg"}
    assert [s.line for s in found if s.typing_only] == [6]


def test_the_cycle_rule_finds_components_not_pairs() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"},
             "f": {"g"}, "g": {"f"}}
    assert cycles(graph) == {frozenset("abc"), frozenset("fg")}  # e only imports itself


def test_no_new_import_cycles_and_no_stale_entries() -> None:
    found = cycles(import_graph())
    new = sorted(found - KNOWN_CYCLES, key=sorted)
    assert not new, "import cycles not in KNOWN_CYCLES (break them; a listed cycle that " \
        "grew is new too):\n" + "\n".join(
            f"{sorted(cycle)}\n" + "\n".join(_cycle_imports(cycle)) for cycle in new)
    gone = sorted(KNOWN_CYCLES - found, key=sorted)
    assert not gone, "these KNOWN_CYCLES entries no longer match a cycle (delete them, " \
        "or write the cycle that is left):\n" + "\n".join(str(sorted(c)) for c in gone)


def package_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Package -> the other packages its modules import (rule 4), from ``graph``."""
    packages: dict[str, set[str]] = {}
    for name, targets in graph.items():
        own = package_of(name)
        packages.setdefault(own, set()).update(package_of(t) for t in targets)
    return {package: targets - {package} for package, targets in packages.items()}


def test_the_package_rule_lumps_modules_into_their_packages() -> None:
    graph = {"m2mc.a.x": {"m2mc.b.y"}, "m2mc.b.y": set(), "m2mc.b.z": {"m2mc.a"},
             "m2mc.a": set(), "m2mc.c": {"m2mc.c.w"}, "m2mc.c.w": set()}
    assert package_graph(graph) == {"m2mc.a": {"m2mc.b"}, "m2mc.b": {"m2mc.a"}, "m2mc.c": set()}
    assert cycles(package_graph(graph)) == {frozenset({"m2mc.a", "m2mc.b"})}  # no module cycle


def test_no_import_cycles_between_packages() -> None:
    graph = import_graph()
    found = cycles(package_graph(graph))
    known = modules()
    where = [f"  {name}:{statement.line} imports {target}"
             + (" (TYPE_CHECKING)" if statement.typing_only else "")
             for cycle in found for name in sorted(known) if package_of(name) in cycle
             for statement in sorted(known[name].statements, key=lambda s: s.line)
             for target in sorted(edges(statement, known))
             if package_of(target) in cycle and package_of(target) != package_of(name)]
    assert not found, "import cycles between packages (move what both sides share " \
        "below them, or the module that closes the cycle to the layer it serves):\n" + \
        "\n".join(str(sorted(cycle)) for cycle in found) + "\n" + "\n".join(where)
