"""No class is assembled from mixins of several modules (issue 36, part 1; an AST check).

The house rule: when a class grows, split it into objects with narrow typed ports
(``typing.Protocol``), never into mixin files of one class. A class *assembled from
mixins* is one whose base classes, followed transitively among the classes defined in
``src/``, come from more than one module other than its own: ``class Node(Receive,
Send)`` with ``Receive`` and ``Send`` in two files is one class spread over three.
Inheriting from one class of another module is ordinary inheritance and passes.

Bases that do not count: classes of the standard library or of third parties, and
classes of ``src/`` that are protocols (``typing.Protocol`` among their bases: a port,
not behaviour), enums, exceptions (however derived), dataclasses, named tuples and
typed dicts (shapes of data), and abstract base classes (``ABC`` or ``ABCMeta``).

What breaks the rule today is listed with the reason in ``KNOWN_MIXIN_CLASSES``; an
entry that no longer applies fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGES = ("m2mc", "m2mc_chat", "m2mc_pipeline")

# "module:Class" -> why, until the class is made of objects with ports instead.
KNOWN_MIXIN_CLASSES: dict[str, str] = {
}

ENUMS = frozenset({"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"})
DATA_SHAPES = frozenset({"NamedTuple", "TypedDict"})


# ------------------------------------------------------------------ reading
@dataclass(eq=False)  # one per class definition: compared and hashed by identity
class ClassInfo:
    module: str
    name: str
    bases: list[str]  # dotted names, as far as the module's imports resolve them
    decorators: list[str]
    metaclass: str | None


@dataclass
class ModuleInfo:
    name: str
    names: dict[str, str] = field(default_factory=dict)  # local name -> dotted target
    classes: dict[str, ClassInfo] = field(default_factory=dict)


def _dotted(node: ast.expr, names: Mapping[str, str]) -> str | None:
    """``a.b.C`` or ``C[T]`` as a dotted name, its first part resolved through
    ``names``; None for what is not a name (a call, say)."""
    if isinstance(node, ast.Subscript):
        return _dotted(node.value, names)
    if isinstance(node, ast.Call):
        return _dotted(node.func, names)
    if isinstance(node, ast.Name):
        return names.get(node.id, f"builtins.{node.id}")
    if isinstance(node, ast.Attribute):
        left = _dotted(node.value, names)
        return None if left is None else f"{left}.{node.attr}"
    return None


def read_module(name: str, source: str, *, package: bool = False) -> ModuleInfo:
    """The classes of one module (``package``: it is an ``__init__``) and what its
    names stand for."""
    tree = ast.parse(source)
    info = ModuleInfo(name)
    here = name if package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    info.names[alias.asname] = alias.name
                else:
                    top = alias.name.partition(".")[0]
                    info.names[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                anchor = parts[:len(parts) + 1 - node.level]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                info.names[alias.asname or alias.name] = f"{base}.{alias.name}"
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            info.names[node.name] = f"{name}.{node.name}"
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = [d for d in (_dotted(b, info.names) for b in node.bases) if d]
            decorators = [d for d in (_dotted(x, info.names) for x in node.decorator_list) if d]
            meta = next((_dotted(k.value, info.names) for k in node.keywords
                         if k.arg == "metaclass"), None)
            info.classes[node.name] = ClassInfo(name, node.name, bases, decorators, meta)
    return info


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def source_modules() -> dict[str, ModuleInfo]:
    return {_module_name(path): read_module(_module_name(path), path.read_text(encoding="utf-8"),
                                            package=path.name == "__init__.py")
            for package in PACKAGES for path in sorted((SRC / package).rglob("*.py"))}


# ------------------------------------------------------------------ checking
class Classes:
    """The classes of a set of modules, their bases resolved across the modules."""

    def __init__(self, modules: Mapping[str, ModuleInfo]) -> None:
        self.modules = modules
        self._kinds: dict[ClassInfo, str | None] = {}

    def find(self, dotted: str, seen: frozenset[str] = frozenset()) -> ClassInfo | str:
        """The class a dotted name stands for: ours (re-exports followed), or the
        dotted name of a class from elsewhere."""
        module, _, name = dotted.rpartition(".")
        info = self.modules.get(module)
        if info is None or dotted in seen:
            return dotted
        if name in info.classes:
            return info.classes[name]
        target = info.names.get(name)
        return dotted if target is None else self.find(target, seen | {dotted})

    def bases(self, cls: ClassInfo) -> list[ClassInfo | str]:
        return [self.find(base) for base in cls.bases]

    def kind(self, cls: ClassInfo) -> str | None:
        """Why ``cls`` is not a mixin when it is a base (None: it is one)."""
        if cls not in self._kinds:
            self._kinds[cls] = self._kind(cls)
        return self._kinds[cls]

    def _kind(self, cls: ClassInfo) -> str | None:
        if any(d.rpartition(".")[2] == "dataclass" for d in cls.decorators):
            return "dataclass"
        if cls.metaclass is not None and cls.metaclass.rpartition(".")[2] == "ABCMeta":
            return "abstract"
        for base in self.bases(cls):
            if isinstance(base, ClassInfo):
                inherited = self.kind(base)
                if inherited in ("enum", "exception"):
                    return inherited
                continue
            last = base.rpartition(".")[2]
            if last == "Protocol":
                return "protocol"
            if last in ENUMS:
                return "enum"
            if last in DATA_SHAPES:
                return "data"
            if last == "ABC":
                return "abstract"
            builtin = getattr(builtins, last, None) if base.startswith("builtins.") else None
            if (isinstance(builtin, type) and issubclass(builtin, BaseException)) or \
                    last.endswith(("Error", "Exception", "Warning")):
                return "exception"
        return None

    def ancestors(self, cls: ClassInfo) -> set[ClassInfo]:
        """Every class of these modules that ``cls`` derives from, however indirectly."""
        found: set[ClassInfo] = set()
        todo = [cls]
        while todo:
            for base in self.bases(todo.pop()):
                if isinstance(base, ClassInfo) and base not in found:
                    found.add(base)
                    todo.append(base)
        return found - {cls}

    def mixin_modules(self, cls: ClassInfo) -> set[str]:
        """The modules other than its own that ``cls``'s counted ancestors come from."""
        return {a.module for a in self.ancestors(cls) if self.kind(a) is None} - {cls.module}

    def offenders(self) -> dict[str, set[str]]:
        """"module:Class" -> the modules its mixins come from, for every class of more
        than one other module."""
        found: dict[str, set[str]] = {}
        for info in self.modules.values():
            for cls in info.classes.values():
                modules = self.mixin_modules(cls)
                if len(modules) > 1:
                    found[f"{cls.module}:{cls.name}"] = modules
        return found


def test_the_mixin_check_catches_what_it_is_for() -> None:
    sources = {
        "pkg": "from .a import A as A\n",
        "pkg.a": "class A:\n    pass\nclass Port(Protocol): ...\n",
        "pkg.b": ("from typing import Protocol\n"
                  "from pkg import A\n"  # a re-export, followed
                  "class B(A):\n    pass\n"
                  "class Port2(Protocol): ...\n"
                  "class BError(Exception): ...\n"),
        "pkg.c": ("import enum\nfrom abc import ABC\nfrom dataclasses import dataclass\n"
                  "class C:\n    pass\n"
                  "class Kind(enum.IntEnum):\n    X = 1\n"
                  "class Oops(ValueError): ...\n"
                  "class Abstract(ABC): ...\n"
                  "@dataclass(frozen=True)\nclass Data: ...\n"),
        "pkg.d": ("import pkg.c\nfrom pkg.b import B, BError, Port2\n"
                  "from pkg.c import Abstract, Data, Kind, Oops\nfrom pkg.a import Port\n"
                  "class Assembled(B, pkg.c.C):\n    pass\n"  # b, a (through B) and c
                  "class Chained(B):\n    pass\n"  # b and a, through one base
                  "class Single(pkg.c.C):\n    pass\n"  # one other module: inheritance
                  "class Allowed(pkg.c.C, Port, Port2, Abstract, Data):\n    pass\n"
                  "class MoreErrors(Oops, BError):\n    pass\n"
                  "class Local(pkg.c.C):\n    pass\n"
                  "class Twice(Local, B):\n    pass\n"),  # its own module does not count
    }
    modules = {name: read_module(name, text, package=name == "pkg")
               for name, text in sources.items()}
    found = Classes(modules).offenders()
    assert found == {"pkg.d:Assembled": {"pkg.a", "pkg.b", "pkg.c"},
                     "pkg.d:Chained": {"pkg.a", "pkg.b"},
                     "pkg.d:Twice": {"pkg.a", "pkg.b", "pkg.c"}}


def _describe(found: Mapping[str, set[str]], keys: Iterator[str]) -> str:
    return "\n".join(f"  {key}: bases from {', '.join(sorted(found[key]))}" for key in keys)


def test_no_class_is_assembled_from_mixins_of_several_modules() -> None:
    classes = Classes(source_modules())
    channel = classes.find("m2mc.transport.multicast.MulticastChannel")
    assert isinstance(channel, ClassInfo)  # the check reads the source and its imports
    assert {(a.module, a.name) for a in classes.ancestors(channel)} == {
        ("m2mc.transport.channel", "Channel")}
    found = classes.offenders()
    new = sorted(found.keys() - KNOWN_MIXIN_CLASSES.keys())
    assert not new, ("classes assembled from mixins of several modules (make the parts "
                     "objects with typed ports; docs/architecture.md):\n"
                     + _describe(found, iter(new)))
    gone = sorted(KNOWN_MIXIN_CLASSES.keys() - found.keys())
    assert not gone, f"no longer assembled from mixins (delete from KNOWN_MIXIN_CLASSES): {gone}"
