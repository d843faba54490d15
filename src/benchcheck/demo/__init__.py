"""The embedded demo: a synthetic item pool (and, later, videos and a tiny model)."""
