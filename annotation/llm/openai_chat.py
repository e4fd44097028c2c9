"""Any OpenAI-compatible chat endpoint as the Stage 2/3 LLM (a vLLM or llama.cpp server, a hosted API).

Plain HTTP (``urllib``), so nothing beyond the standard library is needed: one POST to
``{url}/chat/completions`` per conversation, ``concurrency`` of them in flight (the server batches
them). A request that fails (connection refused, 5xx, timeout, malformed JSON) is tried again up
to ``http_retries`` times, then :class:`ChatBackendError` marks the batch's clips for a later
re-run instead of failing the run. The API key, when needed, is read from the environment
variable named by ``api_key_env``.
"""
from __future__ import annotations

from core.chat_completions import chat_completions_url, post_chat_completion

import os
import time
import urllib.error
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from annotation.llm.chat import ChatBackendError


class OpenAIChat:
    """``url``: the API base (e.g. ``http://localhost:8000/v1``); ``model``: the served model name."""

    def __init__(self, url: str, model: str, max_tokens: int = 128, temperature: float = 0.0,
                 retry_temperature: float = 0.7, timeout_s: float = 120.0, concurrency: int = 8,
                 http_retries: int = 2, api_key_env: str | None = "OPENAI_API_KEY", seed: int | None = 0):
        self.endpoint = chat_completions_url(url, "llm.url")
        self.model, self.max_tokens = model, int(max_tokens)
        self.temperature, self.retry_temperature = float(temperature), float(retry_temperature)
        self.timeout_s, self.concurrency = float(timeout_s), max(1, int(concurrency))
        self.http_retries = int(http_retries)
        self.api_key_env, self.seed = api_key_env, seed

    def _post(self, body: dict) -> str:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        last = "no attempt"
        for attempt in range(1 + max(0, self.http_retries)):
            if attempt:
                time.sleep(min(2.0 ** attempt * 0.25, 5.0))
            try:
                return post_chat_completion(self.endpoint, body, key, self.timeout_s)
            except urllib.error.HTTPError as err:
                last = f"HTTP {err.code} from {self.endpoint}"
                if 400 <= err.code < 500 and err.code not in (408, 429):
                    break  # the request itself is wrong: retrying will not help
            except (urllib.error.URLError, TimeoutError, OSError) as err:
                last = f"{self.endpoint}: {getattr(err, 'reason', err)}"
            except ValueError as err:
                last = f"malformed chat-completions response: {err}"
        raise ChatBackendError(last)

    def complete(self, conversations: Sequence[list[dict]], attempt: int = 0) -> list[str]:
        temperature = self.temperature if attempt == 0 else self.retry_temperature
        bodies = [{"model": self.model, "messages": list(c), "max_tokens": self.max_tokens,
                   "temperature": temperature, **({"seed": self.seed + attempt} if self.seed is not None else {})}
                  for c in conversations]
        if len(bodies) <= 1:
            return [self._post(b) for b in bodies]
        with ThreadPoolExecutor(min(self.concurrency, len(bodies))) as pool:
            return list(pool.map(self._post, bodies))
