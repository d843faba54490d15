"""Video store, frame plans, extraction and the frame cache (SPEC sections 4 and 5)."""
