"""m2mc.kinds' rule, read from the source: code compares a kind with the enum's
members (``order == Order.TOTAL``), never with a string literal (``order ==
"total"``), so a typo is a NameError and the type checker knows the values.

A comparison is flagged when one side is a field that holds a kind (a name,
attribute or ``["key"]`` called ``order``, ``mode``, ``kind``, ``state``,
``reason`` or ``model``, or ending in ``_order`` etc.) and the other a string literal, or a
tuple, list or set of them, holding a value of one of the enums in m2mc.kinds;
``match`` cases on such literals are flagged too. m2mc_pipeline is not read: it
does not import m2mc and reads the trace's strings with its own vocabulary
(m2mc_pipeline.schema.ORDERS).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

from m2mc import kinds

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGES = ("m2mc", "m2mc_chat")
FIELDS = frozenset({"order", "mode", "kind", "state", "reason", "model"})
VALUES = frozenset(member.value for enum in vars(kinds).values()
                   if isinstance(enum, type) and issubclass(enum, StrEnum)
                   and enum.__module__ == kinds.__name__ for member in enum)


def _literals(node: ast.expr) -> list[str]:
    """The kind values a literal (or a literal tuple, list or set) spells."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [item.value for item in items
            if isinstance(item, ast.Constant) and item.value in VALUES]


def _holds_a_kind(node: ast.expr) -> bool:
    """Whether ``node`` reads a field named like a kind."""
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        name = str(node.slice.value)
    else:
        return False
    return name.lstrip("_") in FIELDS or name.rpartition("_")[2] in FIELDS


def literal_comparisons(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, source) of each comparison of a kind field with a literal value."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_literals(side) for side in sides) and any(map(_holds_a_kind, sides)):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Match) and _holds_a_kind(node.subject):
            for case in node.cases:
                for pattern in ast.walk(case.pattern):
                    if isinstance(pattern, ast.MatchValue) and _literals(pattern.value):
                        yield pattern.lineno, f"match {ast.unparse(node.subject)}: " \
                                              f"case {ast.unparse(pattern)}"


def test_the_rule_knows_every_enum_of_kinds() -> None:
    assert {"total", "sb", "adhoc", "infra", "joined", "expelled", "one-way", "constant",
            "random_waypoint", "ids", "counter"} <= VALUES


def test_the_rule_catches_what_it_is_for() -> None:
    source = (
        "if row.order == 'total': pass\n"
        "if config.mode != \"infra\": pass\n"
        "if ep['kind'] in ('symmetric', 'one-way'): pass\n"
        "if group_order == 'sb': pass\n"
        "match change.kind:\n"
        "    case 'joined': pass\n"
        "if spec.mobility.model != 'static': pass\n"
        "if self.kind in ('uniform', 'exponential'): pass\n"
        "if policy.mode == 'ids' or spec.kind == 'counter': pass\n"
        "if row.order == Order.TOTAL: pass\n"  # the member: fine
        "if name == 'total': pass\n"  # not a kind's field
        "if order == 'DESC': pass\n")  # not a kind's value
    found = sorted(line for line, _ in literal_comparisons(ast.parse(source)))
    assert found == [1, 2, 3, 4, 6, 7, 8, 9, 9]


def test_no_kind_is_compared_with_a_string_literal() -> None:
    found = [f"{path.relative_to(SRC)}:{line}: {text}"
             for package in PACKAGES for path in sorted((SRC / package).rglob("*.py"))
             for line, text in literal_comparisons(ast.parse(path.read_text(), str(path)))]
    assert not found, "compare with the m2mc.kinds members instead:\n" + "\n".join(found)
