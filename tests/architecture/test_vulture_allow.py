"""vulture_allow.py tells the truth (issue 36, part 5).

Each entry of vulture_allow.py is a name vulture cannot see used, with a comment
``# path:line: why``. This reads the file as Python and checks that every entry
has such a comment, that the cited file exists, and that the cited line holds the
name, so a citation cannot outlive the code it points at. A name is listed once:
vulture counts a name used wherever it is used, so a second entry allows nothing
more. And every entry is still needed: vulture, run on the paths of pyproject.toml
without vulture_allow.py, reports each entry's name as unused (an entry only adds
a use of its own name, so one run without all of them tells each).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"#\s*(?P<path>[^\s:]+\.py):(?P<line>\d+):\s*\S")


@dataclass(frozen=True)
class Entry:
    name: str  # the name vulture is told is used (``_.name`` entries: the attribute)
    line: int  # of the entry in vulture_allow.py
    comment: str


def entries(source: str) -> list[Entry]:
    """The entries of an allowlist: each expression statement (``name`` or
    ``_.name``) with the comment on its line."""
    comments = {token.start[0]: token.string
                for token in tokenize.generate_tokens(io.StringIO(source).readline)
                if token.type == tokenize.COMMENT}
    found = []
    for statement in ast.parse(source).body:
        if not isinstance(statement, ast.Expr) or isinstance(statement.value, ast.Constant):
            continue  # the prelude (``_: object = None``), the docstring
        value = statement.value
        name = value.attr if isinstance(value, ast.Attribute) else ast.unparse(value)
        found.append(Entry(name, statement.lineno, comments.get(statement.lineno, "")))
    return found


def problems(source: str, root: Path) -> list[str]:
    """What is untrue in an allowlist whose paths are relative to ``root``."""
    out = []
    for entry in entries(source):
        where = f"vulture_allow.py:{entry.line}: {entry.name}"
        cited = CITATION.search(entry.comment)
        if cited is None:
            out.append(f"{where}: no '# path:line: why' comment")
            continue
        path, line = root / cited["path"], int(cited["line"])
        if not path.is_file():
            out.append(f"{where}: cites {cited['path']}, which does not exist")
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        if not (1 <= line <= len(lines)
                and re.search(rf"(?<!\w){re.escape(entry.name)}(?!\w)", lines[line - 1])):
            out.append(f"{where}: {cited['path']}:{line} does not hold the name")
    twice = [name for name, n in Counter(e.name for e in entries(source)).items() if n > 1]
    out += [f"vulture_allow.py: {name} is listed more than once" for name in sorted(twice)]
    return out


def test_every_cited_line_holds_its_name() -> None:
    source = (ROOT / "vulture_allow.py").read_text(encoding="utf-8")
    assert len(entries(source)) > 50  # the check reads the entries
    found = problems(source, ROOT)
    assert not found, ("vulture_allow.py cites what is not there (lines that moved: python "
                       "tests/architecture/recite_vulture_allow.py):\n" + "\n".join(found))


def test_every_entry_is_needed() -> None:
    """An entry whose name vulture no longer reports without the allowlist is dead
    (the name got a use vulture sees, or its code is gone): delete it."""
    vulture = pytest.importorskip("vulture")
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    paths = [str(ROOT / p) for p in config["vulture"]["paths"] if p != "vulture_allow.py"]
    scan = vulture.Vulture()
    scan.scavenge(paths)
    reported = {item.name for item in
                scan.get_unused_code(min_confidence=config["vulture"]["min_confidence"])}
    source = (ROOT / "vulture_allow.py").read_text(encoding="utf-8")
    dead = [f"vulture_allow.py:{e.line}: {e.name}" for e in entries(source)
            if e.name not in reported]
    assert not dead, "vulture sees these names used: delete their entries\n" + "\n".join(dead)


def test_the_check_catches_what_it_is_for(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("class A:\n    hits: int = 0\n\ndef hook() -> None: ...\n")
    source = ("_: object = None\n\n"
              "hits  # m.py:2: a counter\n"
              "_.hook  # m.py:4: called by name\n"
              "hook  # m.py:2: the wrong line\n"
              "gone  # old.py:1: a deleted file\n"
              "bare\n"
              "_.hits  # m.py:2: twice\n")
    assert problems(source, tmp_path) == [
        "vulture_allow.py:5: hook: m.py:2 does not hold the name",
        "vulture_allow.py:6: gone: cites old.py, which does not exist",
        "vulture_allow.py:7: bare: no '# path:line: why' comment",
        "vulture_allow.py: hits is listed more than once",
        "vulture_allow.py: hook is listed more than once",
    ]
