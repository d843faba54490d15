"""Data in and results out (docs/PROTOCOL.md, "Returns"): shards and manifests, fetch and verify, pack and report."""
