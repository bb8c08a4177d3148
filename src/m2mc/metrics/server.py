"""The HTTP endpoint: prometheus_client's own server over a private registry.

Each process part that exports metrics (a Node, a host, the daemon) gets its own
:class:`~prometheus_client.CollectorRegistry` holding one :class:`LoopCollector`, so
several Nodes in one process never share or collide. The server runs in
prometheus_client's thread; a scrape asks the event loop that owns the counters to
read them (``call_soon_threadsafe``) and waits for the answer, so the counters are
read where they are written, never while a callback is half-way through changing
them, and nothing is added to the per-message path: all the work happens at scrape
time. A loop that does not answer within :data:`SCRAPE_TIMEOUT` gives ``m2mc_up 0``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric

from m2mc.errors import ConfigError
from m2mc.metrics.address import format_address, parse_metrics_address
from m2mc.metrics.catalogue import CATALOGUE
from m2mc.metrics.sink import Samples

SCRAPE_TIMEOUT = 5.0
log = logging.getLogger("m2mc.metrics")

Snapshot = Callable[[], Samples]


class LoopCollector:
    """A prometheus_client collector whose samples are read on ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, snapshot: Snapshot, node: str,
                 timeout: float = SCRAPE_TIMEOUT) -> None:
        self.loop = loop
        self.snapshot = snapshot
        self.node = node
        self.timeout = timeout
        self.closed = False

    def describe(self) -> list[Metric]:
        return []  # names are not known before a scrape; the registry is ours alone

    def collect(self) -> Iterable[Metric]:
        samples = self._read()
        families = samples.families() if samples is not None else []
        up = GaugeMetricFamily("m2mc_up", CATALOGUE["m2mc_up"].help, labels=["node"])
        up.add_metric([self.node], 1.0 if samples is not None else 0.0)
        return [up, *families]

    def _read(self) -> Samples | None:
        if self.closed:
            return None
        try:
            if asyncio.get_running_loop() is self.loop:  # scraped from the loop itself
                return self.snapshot()
        except RuntimeError:
            pass  # no loop in this thread: the usual case, the server's thread
        future: concurrent.futures.Future[Samples] = concurrent.futures.Future()

        def read() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(self.snapshot())
            except BaseException as exc:
                future.set_exception(exc)

        try:
            self.loop.call_soon_threadsafe(read)
            return future.result(self.timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            log.warning("metrics of %s: the event loop did not answer within %.0f s",
                        self.node, self.timeout)
        except RuntimeError:  # the loop is closed
            pass
        except Exception:
            log.exception("metrics of %s: reading the counters failed", self.node)
        return None


class MetricsServer:
    """``/metrics`` (any path, in fact) on ``host:port`` for one collector."""

    def __init__(self, collector: LoopCollector, httpd: Any, thread: threading.Thread) -> None:
        self.collector = collector
        self._httpd = httpd
        self._thread = thread
        self.host = str(httpd.server_address[0])
        self.port = int(httpd.server_address[1])

    @classmethod
    def start(cls, address: str, loop: asyncio.AbstractEventLoop, snapshot: Snapshot,
              node: str) -> MetricsServer:
        """Listen on ``address`` (ADDR:PORT); :class:`ConfigError` if that cannot be."""
        host, port = parse_metrics_address(address)
        registry = CollectorRegistry(auto_describe=False)
        collector = LoopCollector(loop, snapshot, node)
        registry.register(collector)
        try:
            httpd, thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            raise ConfigError(f"metrics address {address}: cannot listen "
                              f"({exc.strerror or exc})") from None
        return cls(collector, httpd, thread)

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)

    @property
    def url(self) -> str:
        return f"http://{self.address}/metrics"

    def close(self) -> None:
        """Stop serving and free the port (returns within about half a second)."""
        self.collector.closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5.0)

    async def aclose(self) -> None:
        """:meth:`close` off the event loop (the server's poll takes up to 0.5 s)."""
        self.collector.closed = True
        await asyncio.to_thread(self.close)
