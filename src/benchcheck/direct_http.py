"""The project's own small HTTP requests (a server's health, an endpoint's model list), made directly.

One rule: they never go through a proxy named by the environment (``http_proxy``, ``https_proxy``),
as the engines' own requests (aiohttp, which ignores those variables) never do. A cluster's proxy
cannot reach this host's loopback, and an ``http://`` endpoint's API key would reach the proxy in
clear.
"""

from __future__ import annotations

import urllib.request
from http.client import HTTPResponse

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def open_direct(request: str | urllib.request.Request, timeout: float) -> HTTPResponse:
    """``urllib.request.urlopen`` without the environment's proxies."""
    response: HTTPResponse = _OPENER.open(request, timeout=timeout)
    return response
