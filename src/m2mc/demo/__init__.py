"""Pieces of ``m2mc demo``: chat bots on real nodes, the sweep it runs, the summary."""
