"""Write tests/golden/<layer>.txt from the catalogue (golden_cases.py). Run by hand:

    PYTHONPATH=src python tests/golden/regenerate.py            # every layer
    PYTHONPATH=src python tests/golden/regenerate.py group infra  # some layers

Then read the diff: the files are the wire format written out, and a change in them
is a change of the wire. A change nobody meant is a bug; a change meant is a
protocol version question (docs/interfaces.md) and a docs change. Check that the
docs (docs/interfaces.md, docs/group.md, docs/security.md, docs/infra.md) still
describe every field as the file shows it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from golden_cases import LAYERS
from golden_vectors import HERE, format_file


def main(argv: list[str]) -> int:
    layers = argv or list(LAYERS)
    unknown = [name for name in layers if name not in LAYERS]
    if unknown:
        print(f"regenerate.py: unknown layer(s) {', '.join(unknown)}; "
              f"layers: {', '.join(LAYERS)}", file=sys.stderr)
        return 2
    for layer in layers:
        header, make = LAYERS[layer]
        path = HERE / f"{layer}.txt"
        path.write_text(format_file(layer, header, make()))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
