"""The HTTP endpoint: prometheus_client's WSGI app over a private registry.

Each process part that exports metrics (a Node, a host, the daemon) gets its own
:class:`~prometheus_client.CollectorRegistry` holding one :class:`LoopCollector`, so
several Nodes in one process never share or collide. prometheus_client's
``make_wsgi_app`` renders it (text format, compression, ``name[]`` filters) in the
threading WSGI server that ``start_http_server`` uses, here with a bound anyone who
reaches the port could otherwise fill (threads): :data:`MAX_CONNECTIONS` at once,
each given :data:`CONNECTION_TIMEOUT` to send its request. The server runs in its
own thread; a scrape asks the event loop that owns the counters to
read them (``call_soon_threadsafe``) and waits for the answer, so the counters are
read where they are written, never while a callback is half-way through changing
them, and nothing is added to the per-message path: all the work happens at scrape
time. A loop that does not answer within :data:`SCRAPE_TIMEOUT` gives ``m2mc_up 0``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from m2mc.errors import ConfigError
from m2mc.metrics.address import format_address, parse_metrics_address
from m2mc.metrics.catalogue import CATALOGUE
from m2mc.metrics.sink import Samples

SCRAPE_TIMEOUT = 5.0
MAX_CONNECTIONS = 8  # scrapes served at once; further connections are closed at once
CONNECTION_TIMEOUT = 10.0  # seconds a connection may take to send its request
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
        self.server: _BoundedServer | None = None

    def describe(self) -> list[Metric]:
        return []  # names are not known before a scrape; the registry is ours alone

    def collect(self) -> Iterable[Metric]:
        samples = self._read()
        families = samples.families() if samples is not None else []
        up = GaugeMetricFamily("m2mc_up", CATALOGUE["m2mc_up"].help, labels=["node"])
        up.add_metric([self.node], 1.0 if samples is not None else 0.0)
        name = "m2mc_scrape_connections_refused_total"
        refused = CounterMetricFamily(name, CATALOGUE[name].help, labels=["node"])
        refused.add_metric([self.node], self.server.refused if self.server is not None else 0)
        return [up, refused, *families]

    def _read(self) -> Samples | None:
        """The samples, read on the loop; None if closed, stuck, or the read failed."""
        if self.closed:
            return None
        try:
            return self._on_loop()
        except concurrent.futures.TimeoutError:
            log.warning("metrics of %s: the event loop did not answer within %g s",
                        self.node, self.timeout)
        except RuntimeError:  # the loop is closed
            pass
        except Exception:
            log.exception("metrics of %s: reading the counters failed", self.node)
        return None

    def _on_loop(self) -> Samples:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None  # no loop in this thread: the usual case, the server's thread
        if running is self.loop:  # scraped from the loop itself (generate_latest in a task)
            return self.snapshot()
        future: concurrent.futures.Future[Samples] = concurrent.futures.Future()

        def read() -> None:
            if not future.set_running_or_notify_cancel():
                return  # the scrape gave up waiting
            try:
                future.set_result(self.snapshot())
            except BaseException as exc:
                future.set_exception(exc)

        self.loop.call_soon_threadsafe(read)
        try:
            return future.result(self.timeout)
        finally:
            future.cancel()  # no effect once done; a late read() then does nothing


class _QuietHandler(WSGIRequestHandler):
    timeout = CONNECTION_TIMEOUT  # a connection that sends nothing cannot hold a thread

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are routine: nothing on stderr."""


class _BoundedServer(ThreadingMixIn, WSGIServer):
    """prometheus_client's threading WSGI server, with a bound: at most
    ``max_connections`` requests are served at once (each in its thread, for at most
    :data:`CONNECTION_TIMEOUT` plus :data:`SCRAPE_TIMEOUT`); a connection past it is
    closed at once and counted (``refused``)."""

    daemon_threads = True
    block_on_close = False  # close() does not wait for a slow client

    def __init__(self, sockaddr: tuple[Any, ...], family: int, max_connections: int) -> None:
        self.address_family = family
        self.refused = 0
        self.errors = 0
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(sockaddr, _QuietHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread: give the slot back
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.errors += 1  # a client that timed out or went away: counted, no traceback


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
            family, _, _, _, sockaddr = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
            httpd = _BoundedServer(sockaddr, family, MAX_CONNECTIONS)
        except OSError as exc:
            raise ConfigError(f"metrics address {address}: cannot listen "
                              f"({exc.strerror or exc})") from None
        httpd.set_app(make_wsgi_app(registry))
        collector.server = httpd
        thread = threading.Thread(target=httpd.serve_forever, name=f"m2mc-metrics-{node}",
                                  daemon=True)
        thread.start()
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
