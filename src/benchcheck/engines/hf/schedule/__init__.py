"""Which requests run together, in which order: batches, prefix families, the encode/run pipeline."""
