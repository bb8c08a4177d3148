"""``python -m m2mc.cli``: the same as the ``m2mc`` console script, and the main file
for ``spark-submit`` (docs/spark-cluster.md)::

    spark-submit --master yarn --py-files m2mc.zip src/m2mc/cli/__main__.py \\
        analyze hdfs:///traces/run1 --out ./analysis --tables hdfs:///m2mc/tables
"""

import sys

from m2mc.cli import main

sys.exit(main())
