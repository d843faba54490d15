"""Requests to model inputs on the host: chat template, token ids, decoded frames, M-RoPE positions."""
