"""One request to an OpenAI-compatible ``/chat/completions`` endpoint (vLLM, llama.cpp, a hosted API).

Plain ``urllib``: nothing beyond the standard library. Shared by the annotation pipeline's LLM
backend and the VC-Inspector endpoint judge, which add their own retry and error policies.
"""
from __future__ import annotations

import json
import urllib.request


def check_http_url(url: str, what: str = "endpoint") -> str:
    """``url`` when it is ``http://`` or ``https://``; else a ValueError naming ``what``. ``urllib``
    also opens ``file://`` and ``ftp://``: a local file's text must never pass for a model's answer."""
    if not str(url).lower().startswith(("http://", "https://")):
        raise ValueError(f"{what} must start with http:// or https://, got {url!r}")
    return str(url)


def chat_completions_url(base_url: str, what: str = "endpoint") -> str:
    """``http://host:8000/v1`` -> ``http://host:8000/v1/chat/completions`` (http(s) only)."""
    return check_http_url(base_url, what).rstrip("/") + "/chat/completions"


def post_chat_completion(endpoint: str, body: dict, api_key: str | None = None, timeout_s: float = 120.0) -> str:
    """POST ``body`` and return ``choices[0].message.content`` ("" when the server sends null).

    Network failures raise ``urllib.error.URLError`` / ``HTTPError`` / ``OSError``; a reply
    without that field (or not JSON) raises ``ValueError`` naming the endpoint.
    """
    check_http_url(endpoint)
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(endpoint, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        raw = response.read().decode("utf-8")
    try:
        return str(json.loads(raw)["choices"][0]["message"]["content"] or "")
    except (ValueError, KeyError, IndexError, TypeError):
        raise ValueError(f"{endpoint} answered without choices[0].message.content: {raw[:200]}") from None
