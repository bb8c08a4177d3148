"""asyncio drivers of infrastructure mode (docs/infra.md): a thin layer that gives
the sans-IO cores of :mod:`m2mc.infra` real sockets and the loop's clock.

* :class:`~m2mc.infra_runtime.host_driver.HostDriver`: one host (``m2mc host``);
* :class:`~m2mc.infra_runtime.member_driver.MemberDriver`: one member, which the
  application API runs in infrastructure mode (:mod:`m2mc.api.infra`, selected by
  ``NodeConfig(mode="infra")``).
"""
