"""Wire formats and the sans-IO M2MP layer (seeds/002 section 5, CONTRACTS section 1)."""
