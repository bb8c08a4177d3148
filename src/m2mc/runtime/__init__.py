"""Drivers that run the sans-IO stacks with real sockets and real time (asyncio),
and the synchronous facade of the application API."""

from m2mc.runtime.driver import StackDriver

__all__ = ["StackDriver"]
