"""Video store, frame plans, extraction and the frame cache (docs/PROTOCOL.md, "Videos", "Frame plans")."""
