"""The LLM interface of Stages 2 and 3: chat conversations in, answers out, with bounded retries.

A backend answers a batch of conversations at once (a local model batches them, an endpoint runs
them concurrently). ``attempt`` > 0 asks for a different answer than before (sampling instead of
greedy decoding). :func:`ask_with_retries` re-asks only the conversations whose answers did not
parse, at most ``max_retries`` times, and returns the last reason for those that never did.
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence, TypeVar

from annotation.llm.prompts import AnswerError

T = TypeVar("T")


class ChatBackendError(RuntimeError):
    """The backend could not answer at all (server down, timeout): not the clip's fault, redo later."""


class ChatBackend(Protocol):
    def complete(self, conversations: Sequence[list[dict]], attempt: int = 0) -> list[str]: ...


def ask_with_retries(backend: ChatBackend, conversations: Sequence[list[dict]], parse: Callable[[int, str], T],
                     max_retries: int = 2) -> list[tuple[T | None, str | None]]:
    """Per conversation ``(parsed answer, None)`` or ``(None, reason)`` after ``1 + max_retries`` tries.

    ``parse(i, answer)`` parses the answer to conversation ``i`` (raising :class:`AnswerError`).
    """
    results: list[tuple[T | None, str | None]] = [(None, "not asked")] * len(conversations)
    pending = list(range(len(conversations)))
    for attempt in range(1 + max(0, int(max_retries))):
        if not pending:
            break
        answers = backend.complete([conversations[i] for i in pending], attempt=attempt)
        if len(answers) != len(pending):
            raise ChatBackendError(
                f"{type(backend).__name__} returned {len(answers)} answers for {len(pending)} prompts")
        still = []
        for i, answer in zip(pending, answers):
            try:
                results[i] = (parse(i, answer), None)
            except AnswerError as err:
                results[i] = (None, f"{err} (after {attempt + 1} tries)")
                still.append(i)
        pending = still
    return results
