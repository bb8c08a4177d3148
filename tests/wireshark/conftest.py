"""The dissector tests: helpers importable (pytest runs with --import-mode=importlib),
and the namespace lab of tests/netns for the tests that capture a real run."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
for path in (HERE, HERE.parent / "netns"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
