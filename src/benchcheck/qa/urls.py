"""Base URLs as users write them: OpenAI-compatible services and the clips' URL base."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_USERINFO = re.compile(r"//[^/?#]*@")


def _shown(url: str) -> str:
    """The URL for a message, without a ``user:password@`` part (it would be printed and logged)."""
    return repr(_USERINFO.sub("//***@", url))


def _check(url: str, what: str) -> str:
    """The URL, stripped, or a ``ValueError`` naming the option: checked here, before any item
    runs, because a URL the client cannot use (a port out of range, an unclosed IPv6 bracket,
    a space in the host) failed every item one by one, and a query or fragment had the request
    path appended after it (``...?x=1/v1/chat/completions``)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # urllib checks the port (digits, in range) only when it is read
    except ValueError as e:
        raise ValueError(f"{what} {_shown(url)} is not a valid URL: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} {_shown(url)} is not an http(s) URL")
    if port == 0 or any(c.isspace() for c in parts.netloc):
        raise ValueError(f"{what} {_shown(url)} is not a valid URL: bad host or port")
    if parts.query or parts.fragment or url.strip().endswith(("?", "#")):
        raise ValueError(f"{what} {_shown(url)}: a query or fragment cannot take the request path after it; "
                         "give the base URL only")
    # A user:password URL would travel as a Basic header and be written into the run's settings.
    if parts.username or parts.password:
        raise ValueError(f"{what}: credentials in the URL are refused; pass keys through their variables")
    return url.strip().rstrip("/")


def service_base_url(url: str, what: str = "endpoint") -> str:
    """The engine's form of an OpenAI-compatible base URL (``.../v1``, no trailing slash)."""
    from benchcheck.engines.openai.client import normalize_endpoint

    return normalize_endpoint(_check(url, what))


def media_base_url(url: str) -> str:
    """The base the clips' relative paths are appended to, as given (no ``/v1`` added)."""
    return _check(url, "--video-url-base")
