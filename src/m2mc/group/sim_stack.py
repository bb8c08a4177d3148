"""Where the simulator looks for ``[stack] kind = "group"`` (m2mc.sim.node.get_stack)."""

from m2mc.sim.group_stack import GroupSimStack

__all__ = ["GroupSimStack"]
