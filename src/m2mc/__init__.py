"""m2mc: many-to-many group communication for devices on a broadcast network."""

__version__ = "0.1.0"
