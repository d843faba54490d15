"""Data in and results out (SPEC section 7): shards and manifests, fetch and verify, pack and report."""
