"""``benchcheck serve``: an OpenAI-compatible HTTP server in front of an in-process engine."""
