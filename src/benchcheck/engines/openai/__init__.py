"""The OpenAI-compatible client engine (``client``) and the wire format it shares with the server (``wire``)."""
