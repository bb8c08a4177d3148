"""asyncio drivers of infrastructure mode (docs/infra.md): a thin layer that gives
the sans-IO cores of :mod:`m2mc.infra` real sockets and the loop's clock.

* :class:`~m2mc.infra_runtime.host_driver.HostDriver`: one host (``m2mc host``);
* :class:`~m2mc.infra_runtime.member_driver.MemberDriver`: one member;
* :mod:`m2mc.infra_runtime.node`: the application API (``Node``/``Group`` of
  :mod:`m2mc.api`) over a member, selected by ``NodeConfig(mode="infra")``.
"""
