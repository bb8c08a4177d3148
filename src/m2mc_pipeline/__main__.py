"""``python -m m2mc_pipeline analyze|sweep ...``, and the main file for ``spark-submit``.

    spark-submit --master yarn --py-files m2mc.zip src/m2mc_pipeline/__main__.py \\
        analyze hdfs:///traces/run1 --out ./analysis --tables hdfs:///m2mc/tables

The arguments are those of ``m2mc analyze`` and ``m2mc sweep`` (docs/pipeline.md);
the SparkSession is the one spark-submit set up.
"""

from __future__ import annotations

import sys

from m2mc.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
