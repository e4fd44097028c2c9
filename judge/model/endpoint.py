"""A VC-Inspector judge behind an OpenAI-compatible chat endpoint (e.g. ``vllm serve``).

Same prompt as the in-process judge (the system prompt and D.6 with the caption), the clip's
frames as PNG images ahead of it, greedy decoding (temperature 0), the same answer parser.
Requests run concurrently; a failed request gives that pair an error, never a score.
"""
from __future__ import annotations

from core.chat_completions import chat_completions_url, post_chat_completion

import base64
import io
import urllib.error
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from judge.model.prompt_format import JUDGE_INSTRUCTION, SYSTEM_PROMPT, JudgeAnswer, parse_judge_answer


def png_data_url(frame: np.ndarray) -> str:
    """An ``(H, W, 3)`` uint8 frame as a ``data:image/png;base64,...`` URL."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


class EndpointJudge:
    """Scores (frames, caption) pairs through ``POST {base_url}/chat/completions``.

    Args:
        base_url: the server's OpenAI API root, e.g. ``http://localhost:8000/v1``.
        model: the served model's name (``vllm serve PATH --served-model-name NAME``).
        api_key: sent as a bearer token when given.
        concurrency: requests in flight at once.
        timeout_s: per request.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, concurrency: int = 8,
                 timeout_s: float = 120.0):
        self.url = chat_completions_url(base_url)
        self.model = model
        self.api_key = api_key
        self.concurrency = max(1, int(concurrency))
        self.timeout_s = float(timeout_s)

    def messages(self, frames: np.ndarray, caption: str) -> list[dict]:
        content = [{"type": "image_url", "image_url": {"url": png_data_url(f)}} for f in frames]
        content.append({"type": "text", "text": JUDGE_INSTRUCTION.format(caption=caption)})
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}]

    def complete(self, messages: list[dict], max_new_tokens: int) -> str:
        body = {"model": self.model, "messages": messages, "temperature": 0.0, "max_tokens": int(max_new_tokens)}
        return post_chat_completion(self.url, body, self.api_key, self.timeout_s)

    def _one(self, frames: np.ndarray, caption: str, max_new_tokens: int) -> JudgeAnswer:
        try:
            return parse_judge_answer(self.complete(self.messages(frames, caption), max_new_tokens))
        except (urllib.error.URLError, OSError, ValueError) as err:
            return JudgeAnswer(None, "", f"endpoint: {type(err).__name__}: {err}")

    def score(self, frames: Sequence[np.ndarray], captions: Sequence[str], max_new_tokens: int = 64,
              sampled_fps: Sequence[float | None] | None = None) -> list[JudgeAnswer]:
        """Rate captions of videos given as ``(T, H, W, 3)`` uint8 frame arrays (``sampled_fps`` unused)."""
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(lambda fc: self._one(fc[0], fc[1], max_new_tokens), zip(frames, captions)))
