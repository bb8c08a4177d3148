"""asyncio drivers of infrastructure mode (docs/infra.md): a thin layer that gives
the sans-IO cores of :mod:`m2mc.infra` real sockets, the loop's clock and a disk.

* :class:`~m2mc.infra_runtime.host_driver.HostDriver`: one host (``m2mc host``);
* :class:`~m2mc.infra_runtime.member_driver.MemberDriver`: one member, which the
  application API runs in infrastructure mode (:mod:`m2mc.api.infra`, selected by
  ``NodeConfig(mode="infra")``);
* :mod:`~m2mc.infra_runtime.host_store`, :mod:`~m2mc.infra_runtime.member_store`:
  the SQLite files of a durable host and of a member (the simulator's infrastructure
  stack opens them too).
"""
