"""Parse citations of the seeds (``seeds/00N <section>``) out of free text.

The citations in code and docs are written by hand, in a few shapes:
``seeds/000 VI.A.3``, ``seeds/002 section 5``, ``seeds/002 sections 1 and 3``,
``seeds/001 2.4 B3``, ``seeds/001 P1-P7``, ``seeds/003 IV-VI``, ``seeds/001 figure 5
lines 26-31, footnote 3``, ``seeds/000 VI.B SyncReqRecv, III.B.5``. A citation is the
seed, then a list of references separated by commas, semicolons, "and" or spaces;
the list ends at the first word that is not a reference. Words that narrow a
reference down (a function name, "step 2", "line 15", "intro", a quoted title)
are skipped. A citation with no reference at all cites the whole seed.

References are returned in canonical form: ``VI.A.3`` (seeds 000 and 003),
``2.3`` (seeds 001, 002, 004), ``P4``/``A1``/``B3``/``L1`` (seed 001's
properties), ``Fig. 5``, ``footnote 4``, ``abstract``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

ROMAN_SEEDS = frozenset({"000", "003"})
SEEDS = ("000", "001", "002", "003", "004")

_CITATION = re.compile(r"seeds/(00[0-4])(?![\w/])")
# A line break inside a citation (a wrapped comment or paragraph) is a space; a
# blank line ends every citation.
_PARAGRAPH = re.compile(r"\n[ \t]*(?:#+[ \t]*)?\n")
_WRAP = re.compile(r"[ \t]*\n[ \t]*(?:#+[ \t]*|//[ \t]*|>[ \t]*)?")

_ROMAN = r"(?:XII|XI|X|IX|VIII|VII|VI|V|IV|III|II|I)"
_SUB = r"(?:\.[A-Z](?:\.\d+)*)?"
_NUM = r"\d{1,2}(?:\.\d{1,2}){0,2}"

# Separators between references.
_SEP = re.compile(r"\s*(?:,|;|\band\b|&|\+)\s*|\s+")
# Words that narrow the previous reference down: skipped, the list goes on.
_QUALIFIER = re.compile(
    r"(?:"
    r"[`*]*(?:[A-Z]+[a-z]+[A-Z]\w*|[a-z]+[A-Z]\w*)(?:\(\))?[`*]*"  # CamelCase / camelCase
    r"|\"[^\"\n]{1,60}\"|“[^”\n]{1,60}”"  # a quoted title
    r"|\((?:[ivx]+|[a-z])\)"  # (i), (v), (a)
    r"|intro|introduction"
    r"|(?:step|steps|assumption|Algorithm|algorithm|item)\s+[\divx]+(?:\s*-\s*[\divx]+)?"
    r"|lines?\s+\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*"
    r")(?![\w])"
)

_ROMAN_REF = re.compile(
    rf"(?:sections?\s+)?(?P<a>{_ROMAN}{_SUB})"
    rf"(?:\s*-\s*(?P<b>{_ROMAN}{_SUB}|[A-Z]))?(?!\w|\.\w)"
)
_NUM_REF = re.compile(
    rf"(?:sections?\s+)?(?P<a>{_NUM})(?:\s*-\s*(?P<b>{_NUM}))?(?!\w|\.\w)"
)
_PROP_REF = re.compile(
    r"(?P<open>\()?(?P<a>[PABL]\d{1,2})(?:\s*-\s*(?P<b>[PABL]?\d{1,2}))?(?(open)\))(?![\w])"
)
_FIG_REF = re.compile(
    r"(?:Fig\.?|Figure|figure|figures|Figures)\s*(?P<a>\d{1,2})\.?"
    r"(?:\s*(?:-|and)\s*(?P<b>\d{1,2}))?(?![\w])"
)
_FOOT_REF = re.compile(r"footnote\s+(?P<a>\d{1,2})(?![\w])")
_ABSTRACT = re.compile(r"abstract(?![\w])")

_ROMANS = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"]


@dataclass(frozen=True)
class Citation:
    path: str
    line: int
    seed: str
    refs: tuple[str, ...]
    text: str  # the citation as written, for error messages


def _expand_roman(a: str, b: str | None) -> list[str]:
    if b is None:
        return [a]
    if re.fullmatch(r"[A-Z]", b) and "." in a:  # VI.C-D
        head, last = a.rsplit(".", 1)
        return [f"{head}.{chr(c)}" for c in range(ord(last), ord(b) + 1)]
    if a in _ROMANS and b in _ROMANS:  # IV-VI
        i, j = _ROMANS.index(a), _ROMANS.index(b)
        return _ROMANS[i:j + 1]
    return [a, b]


def _expand_num(a: str, b: str | None) -> list[str]:
    if b is None:
        return [a]
    if a.isdigit() and b.isdigit() and int(a) <= int(b):  # sections 1-4
        return [str(i) for i in range(int(a), int(b) + 1)]
    return [a, b]


def _expand_prop(a: str, b: str | None) -> list[str]:
    if b is None:
        return [a]
    letter = a[0]
    low, high = int(a[1:]), int(b.lstrip("PABL"))
    return [f"{letter}{i}" for i in range(low, high + 1)]


def _ref_at(seed: str, text: str, pos: int) -> tuple[list[str], int] | None:
    """The reference(s) starting at ``pos``, and where they end."""
    m = _FIG_REF.match(text, pos)
    if m:
        lo = int(m["a"])
        hi = int(m["b"]) if m["b"] else lo
        return [f"Fig. {i}" for i in range(lo, max(lo, hi) + 1)], m.end()
    m = _FOOT_REF.match(text, pos)
    if m:
        return [f"footnote {m['a']}"], m.end()
    m = _ABSTRACT.match(text, pos)
    if m:
        return ["abstract"], m.end()
    if seed in ROMAN_SEEDS:
        m = _ROMAN_REF.match(text, pos)
        if m:
            return _expand_roman(m["a"], m["b"]), m.end()
        return None
    if seed == "001":
        m = _PROP_REF.match(text, pos)
        if m:
            return _expand_prop(m["a"], m["b"]), m.end()
    m = _NUM_REF.match(text, pos)
    if m:
        return _expand_num(m["a"], m["b"]), m.end()
    return None


def parse_refs(seed: str, text: str, pos: int) -> tuple[list[str], int]:
    """The references of a citation of ``seed`` whose list starts at ``pos``."""
    refs: list[str] = []
    if text.startswith(":", pos):
        pos += 1
    while True:
        sep = _SEP.match(text, pos)
        at = sep.end() if sep else pos
        if at == pos and refs:  # references must be separated
            break
        found = _ref_at(seed, text, at)
        if found is not None:
            refs.extend(found[0])
            pos = found[1]
            continue
        q = _QUALIFIER.match(text, at)
        if q is not None and (refs or not sep or sep.group().strip() == ""):
            pos = q.end()
            continue
        break
    return refs, pos


def citations(text: str, path: str = "") -> Iterator[Citation]:
    flat = _WRAP.sub(" ", _PARAGRAPH.sub("\n\x00\n", text))
    # Line numbers of the original text, for messages.
    starts = [m.start() for m in _CITATION.finditer(text)]
    for i, m in enumerate(_CITATION.finditer(flat)):
        refs, end = parse_refs(m[1], flat, m.end())
        line = text.count("\n", 0, starts[i]) + 1 if i < len(starts) else 0
        yield Citation(path, line, m[1], tuple(refs), flat[m.start():max(end, m.end())])
