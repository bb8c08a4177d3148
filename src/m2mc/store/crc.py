"""CRC-32 (the zlib and PNG one) of the payloads kept beside the log.

Every payload of 2 KiB or more is checksummed once when written and once each time
it is read back, so at 64 KiB messages the checksum is paid once per message in
every process. zlib's own ``crc32`` (1.2.13, as Debian ships it) takes 11.8 µs of CPU
for 64 KiB on our machines; zlib-ng's computes the same function with
carry-less multiplication in 0.85 µs (``python -m m2mc.store.crc``). zlib-ng comes
with the ``fast`` extra (part of ``all``); without it, zlib's is used. Both give the
same values, so files written with one are read with the other.
"""

from __future__ import annotations

import sys
import timeit
from functools import partial

__all__ = ["IMPLEMENTATION", "crc32"]

IMPLEMENTATION: str
try:
    from zlib_ng.zlib_ng import crc32
except ImportError:  # the fast extra is not installed: the standard library's
    from zlib import crc32
    IMPLEMENTATION = "zlib"
else:
    IMPLEMENTATION = "zlib-ng"

def _main() -> None:
    """Print µs of CPU per 64 KiB for the CRC-32 in use and for zlib's."""
    import os
    import zlib

    data = os.urandom(65536)
    number = 2000
    for name, function in ((IMPLEMENTATION, crc32), ("zlib", zlib.crc32)):
        seconds = min(timeit.repeat(partial(function, data), number=number, repeat=5))
        sys.stdout.write(f"{name}: {seconds / number * 1e6:.2f} us per 64 KiB\n")


if __name__ == "__main__":
    _main()
