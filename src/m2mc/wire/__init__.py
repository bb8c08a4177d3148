"""Wire formats and the sans-IO M2MP layer (seeds/002 section 5, docs/interfaces.md §1)."""
