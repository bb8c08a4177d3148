"""The fast builders' old address, kept for code written against it: they live in
:mod:`m2mc.native.fastobj` (import them from :mod:`m2mc.native`)."""

from m2mc.native.fastobj import BUILDERS, Builder, fast_constructor, tuple_constructor

__all__ = ["BUILDERS", "Builder", "fast_constructor", "tuple_constructor"]
