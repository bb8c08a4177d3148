"""The one asyncio driver of every sans-IO stack (runtime/driver.py) with real
sockets and real time, the adapters of the datagram stacks (the group node on a
channel: :class:`StackDriver`; the M2MP layer: :class:`M2MPEndpoint`) and the trace
of a real run. (The application API's synchronous facade is :mod:`m2mc.api.sync`.)"""

from m2mc.runtime.daemon import M2MPDaemon
from m2mc.runtime.driver import Driver
from m2mc.runtime.endpoint import M2MPEndpoint, MessageAbandonedError
from m2mc.runtime.stack import StackDriver

__all__ = ["Driver", "M2MPDaemon", "M2MPEndpoint", "MessageAbandonedError", "StackDriver"]
