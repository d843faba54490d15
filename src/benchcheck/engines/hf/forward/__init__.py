"""One forward each: padded or packed batches scored, greedy generation; their device tensors."""
