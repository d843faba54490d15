"""Base URLs as users write them: OpenAI-compatible services and the clips' URL base."""

from __future__ import annotations

from urllib.parse import urlsplit


def _check(url: str, what: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} {url!r} is not an http(s) URL")
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
