"""Re-cite the entries of vulture_allow.py whose cited line no longer holds their name
(an edit above it moved it): each gets the nearest line of its file that does.

    python tests/architecture/recite_vulture_allow.py

tests/architecture/test_vulture_allow.py fails until the citations are true; this
fixes the common case, a line that moved. A name that is gone from its file is only
reported: delete the entry, or cite where vulture reports the name now.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY = re.compile(r"^(_\.)?(\w+)  # (\S+?):(\d+): (.*)$")


def recite(root: Path) -> tuple[int, list[str]]:
    """Rewrite ``root/vulture_allow.py``; (entries re-cited, names found nowhere)."""
    allow = root / "vulture_allow.py"
    lines, fixed, lost = [], 0, []
    for line in allow.read_text().splitlines():
        match = ENTRY.match(line)
        if match:
            attr, name, path, cited, why = match.groups()
            source = (root / path).read_text().splitlines() if (root / path).exists() else []
            holds = re.compile(rf"\b{re.escape(name)}\b")
            at = int(cited)
            if not (0 < at <= len(source) and holds.search(source[at - 1])):
                found = [i + 1 for i, text in enumerate(source) if holds.search(text)]
                if found:
                    nearest = min(found, key=lambda i: abs(i - at))
                    line = f"{attr or ''}{name}  # {path}:{nearest}: {why}"
                    fixed += 1
                else:
                    lost.append(f"{name} ({path})")
        lines.append(line)
    allow.write_text("\n".join(lines) + "\n")
    return fixed, lost


if __name__ == "__main__":
    count, missing = recite(ROOT)
    print(f"re-cited {count} entries")
    for name in missing:
        print(f"no line holds {name}: delete the entry or cite where vulture reports it")
    sys.exit(1 if missing else 0)
