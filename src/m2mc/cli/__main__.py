"""``python -m m2mc.cli``: the same as the ``m2mc`` console script."""

import sys

from m2mc.cli import main

sys.exit(main())
