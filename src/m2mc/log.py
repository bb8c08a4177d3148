"""Structured logging: every record carries the node id (``node=...``)."""

from __future__ import annotations

import logging
import sys

_FORMAT = "%(asctime)s %(levelname)s %(name)s node=%(node)s %(message)s"


class _NodeDefault(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "node"):
            record.node = "-"
        return True


def setup_logging(verbosity: int = 0) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(_NodeDefault())
    root = logging.getLogger("m2mc")
    root.handlers[:] = [handler]
    root.setLevel(level)


def node_logger(name: str, node: str) -> logging.LoggerAdapter[logging.Logger]:
    """A logger whose records say which node wrote them."""
    return logging.LoggerAdapter(logging.getLogger(name), {"node": node})
