"""The map is the territory: docs/seeds.md, docs/glossary.md and docs/interfaces.md
cannot go stale unnoticed.

- Every ``seeds/00N <section>`` citation anywhere in src/, tests/, docs/, bench/,
  examples/ and README.md names a section that docs/seeds.md lists (so a reader can
  follow it from the repository alone), and every seed has its table there.
- Every module or test path those pages name exists (modules move: name them by
  their current path, and this test says when one moved).
- A row the map says is built names the modules and tests that carry it; a section
  not built on purpose points at docs/decisions.md, and every decision it names is a
  heading there.
- Nothing cites the project's outside contract page: each such citation goes to
  docs/interfaces.md, whose section numbers are the old ones, and every
  ``interfaces.md §N`` names a section that exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from seedrefs import SEEDS, citations, parse_refs

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SCANNED = ("src", "tests", "docs", "bench", "examples", "README.md")
SUFFIXES = {".py", ".md", ".toml", ".txt", ".lua", ".sh", ".cfg", ".ini"}
HERE = Path(__file__).resolve().parent
PAGES = ("seeds.md", "glossary.md", "interfaces.md")


def scanned_files() -> list[Path]:
    out = []
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            out.append(path)
            continue
        for f in sorted(path.rglob("*")):
            if (f.is_file() and f.suffix in SUFFIXES and HERE not in f.parents
                    and "__pycache__" not in f.parts and not f.name.startswith(".")):
                out.append(f)
    return out


FILES = {f: f.read_text(encoding="utf-8", errors="replace") for f in scanned_files()}


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ------------------------------------------------------------------ docs/seeds.md
_SEED_HEADING = re.compile(r"^## seeds/(00[0-4])\b", re.M)


def map_rows() -> list[tuple[str, list[str]]]:
    """(seed, cells) for every table row under a ``## seeds/00N`` heading."""
    rows: list[tuple[str, list[str]]] = []
    seed = None
    for line in (DOCS / "seeds.md").read_text(encoding="utf-8").splitlines():
        heading = _SEED_HEADING.match(line)
        if heading:
            seed = heading[1]
            continue
        if line.startswith("## "):
            seed = None
        if seed is None or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in {"section", ""} or set(cells[0]) <= {"-", ":"}:
            continue
        rows.append((seed, cells))
    return rows


def map_sections() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {seed: set() for seed in _SEED_HEADING.findall(
        (DOCS / "seeds.md").read_text(encoding="utf-8"))}
    for seed, cells in map_rows():
        out[seed].update(part.strip() for part in cells[0].split(","))
    return out


def test_every_seed_has_its_table() -> None:
    sections = map_sections()
    assert sorted(sections) == list(SEEDS)
    assert all(sections[seed] for seed in SEEDS)


def test_every_cited_section_is_in_the_map() -> None:
    sections = map_sections()
    missing = []
    count = 0
    for path, text in FILES.items():
        for c in citations(text, rel(path)):
            count += 1
            missing += [f"{c.path}:{c.line}: seeds/{c.seed} {ref}   (cited as {c.text!r})"
                        for ref in c.refs if ref not in sections.get(c.seed, set())]
    assert count > 200, "the scan found too few citations: is it looking in the right place?"
    assert not missing, ("sections cited but missing from docs/seeds.md (add a row, in our "
                         "own words):\n" + "\n".join(missing))


def test_the_map_section_ids_are_well_formed() -> None:
    """Each id in the first column parses as one reference of its seed, so a citation
    written the same way finds it."""
    bad = []
    for seed, ids in map_sections().items():
        for ref in ids:
            if ref in {"Appendix"}:
                continue
            refs, end = parse_refs(seed, " " + ref, 0)
            if refs != [ref] or end != len(ref) + 1:
                bad.append(f"seeds/{seed} {ref!r} parses as {refs}")
    assert not bad, "\n".join(bad)


_PATH = re.compile(r"`((?:src|tests|docs|bench|examples)/[\w./-]*?)(?:::(\w+))?`")


@pytest.mark.parametrize("page", PAGES)
def test_every_path_a_page_names_exists(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    missing = []
    for m in _PATH.finditer(text):
        path = ROOT / m[1]
        if not path.exists():
            missing.append(m[1])
        elif m[2] and m[2] not in path.read_text(encoding="utf-8"):
            missing.append(f"{m[1]}::{m[2]}")
    assert not missing, f"docs/{page} names paths that do not exist (moved?): {missing}"


def test_built_rows_name_their_modules_and_tests() -> None:
    problems = []
    for seed, cells in map_rows():
        if len(cells) != 5:
            problems.append(f"seeds/{seed} {cells[0]}: expected 5 cells, got {len(cells)}")
            continue
        section, _, status, where, tests = cells
        if status.startswith("built"):
            if not _PATH.search(tests):
                problems.append(f"seeds/{seed} {section}: built, but no test named")
            if not _PATH.search(where) and not re.search(r"\bas\b[^;(]*\btests?\b", status):
                problems.append(f"seeds/{seed} {section}: built, but no module named")
        elif status.startswith("not built"):
            if "decisions.md" not in status:
                problems.append(f"seeds/{seed} {section}: not built, and no decisions.md reason")
        elif not status.startswith(("background", "followed by concept")):
            problems.append(f"seeds/{seed} {section}: unknown status {status!r}")
    assert not problems, "\n".join(problems)


def decision_headings() -> list[str]:
    return [line[3:].strip() for line in (DOCS / "decisions.md").read_text(
        encoding="utf-8").splitlines() if line.startswith("## ")]


_DECISION_NAMES = re.compile(r"decisions\.md, ((?:\"[^\"]+\"(?:,\s*)?)+)")


@pytest.mark.parametrize("page", PAGES)
def test_decisions_a_page_names_are_headings_of_decisions_md(page: str) -> None:
    headings = decision_headings()
    text = (DOCS / page).read_text(encoding="utf-8")
    unknown = [name for m in _DECISION_NAMES.finditer(text)
               for name in re.findall(r"\"([^\"]+)\"", m[1])
               if not any(h.startswith(name) for h in headings)]
    assert not unknown, f"docs/{page} names decisions that docs/decisions.md lacks: {unknown}"


# ------------------------------------------------------------------ interfaces
_OUTSIDE = re.compile(r"\bCONTRACTS\b")
_INTERFACES_REF = re.compile(r"interfaces\.md(?:\)|\]\([^)]*\))?,? ?(?:§ ?|sections? )(\d+)")


def interfaces_sections() -> set[str]:
    text = (DOCS / "interfaces.md").read_text(encoding="utf-8")
    return set(re.findall(r"^## (\d+)\. ", text, re.M))


def test_interfaces_keeps_the_contract_numbering() -> None:
    assert {str(n) for n in range(1, 7)} <= interfaces_sections()


def test_nothing_cites_a_page_outside_the_repository() -> None:
    bad = [f"{rel(path)}:{n}: {line.strip()[:100]}"
           for path, text in FILES.items()
           for n, line in enumerate(text.splitlines(), 1)
           if _OUTSIDE.search(line) and "interfaces.md" not in line]
    assert not bad, ("cite docs/interfaces.md §N (same numbers) instead of the outside "
                     "contract page:\n" + "\n".join(bad))


def test_every_interfaces_citation_names_a_section() -> None:
    sections = interfaces_sections()
    bad = [f"{rel(path)}: interfaces.md §{m[1]}"
           for path, text in FILES.items() for m in _INTERFACES_REF.finditer(text)
           if m[1] not in sections]
    assert not bad, f"citations of sections docs/interfaces.md does not have: {bad}"


@pytest.mark.parametrize("page", PAGES)
def test_the_new_pages_are_in_the_reading_lists(page: str) -> None:
    assert f"({page})" in (DOCS / "architecture.md").read_text(encoding="utf-8")
    assert f"(docs/{page})" in (ROOT / "README.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------ the citation grammar
@pytest.mark.parametrize(("text", "seed", "refs"), [
    ("seeds/000 VI.A.3, docs/group.md", "000", ("VI.A.3",)),
    ("seeds/000 VI intro, VI.B SyncReqRecv, III.B.5)", "000", ("VI", "VI.B", "III.B.5")),
    ("seeds/000 V.B, SendGrpInfoList; IX.C.3)", "000", ("V.B", "IX.C.3")),
    ("(seeds/000 section II, Fig. 4)", "000", ("II", "Fig. 4")),
    ("seeds/000 Fig. 3-4 and two more", "000", ("Fig. 3", "Fig. 4")),
    ("seeds/003 IV-VI, seeds/000 IV", "003", ("IV", "V", "VI")),
    ("seeds/003 VI.C-D).", "003", ("VI.C", "VI.D")),
    ("seeds/003 VI.C footnote 1, VI.D.2", "003", ("VI.C", "footnote 1", "VI.D.2")),
    ("seeds/002 sections 1-4.", "002", ("1", "2", "3", "4")),
    ("seeds/002 sections 2 and 4, UDPMulticastChannel; CONTRACTS", "002", ("2", "4")),
    ("seeds/002 section 1, assumption 4)", "002", ("1",)),
    ("seeds/002 section 5, \"Flow Control Sublayer\"; 2.3)", "002", ("5", "2.3")),
    ("seeds/001 3.3, figure 6; 2.3 A1-A3; 4.2; 4.3)", "001",
     ("3.3", "Fig. 6", "2.3", "A1", "A2", "A3", "4.2", "4.3")),
    ("seeds/001 3.2, figure 5 lines 13, 21-23, footnote 3)", "001",
     ("3.2", "Fig. 5", "footnote 3")),
    ("seeds/001 2.3 (A6)", "001", ("2.3", "A6")),
    ("seeds/001 P1, P2, P4-P6 on the", "001", ("P1", "P2", "P4", "P5", "P6")),
    ("seeds/001 has one group", "001", ()),
    ("seeds/004 4.5 \"Host crash\")", "004", ("4.5",)),
    ("seeds/004 5.4's 300 ms", "004", ("5.4",)),
    ("# seeds/001 4.2, last\n# paragraph", "001", ("4.2",)),
    ("(seeds/001 2.3 A2, 2.4 B1)\n\nA2 says", "001", ("2.3", "A2", "2.4", "B1")),
])
def test_citations_are_read_as_written(text: str, seed: str, refs: tuple[str, ...]) -> None:
    c = next(iter(citations(text)))
    assert (c.seed, c.refs) == (seed, refs)
