"""The retry policy: which failures are tried again, how often, and how long to wait.

- 5xx, 429 and broken streams: up to ``attempts`` tries in all, with exponential backoff
  (0.5, 1, 2, 4 s by default); a 429 waits at least its ``Retry-After``.
- An unreachable endpoint (connection refused, unknown host, a bad URL) is reported at once:
  nothing is listening, and waiting would only delay the hint.
- Everything else (4xx, known server configuration, garbage answers) fails at once.
- A wait longer than ``longest_wait`` (a ``Retry-After`` of an hour), or one that would not
  end before the deadline (``--llm-total-timeout``, when given), is not started.

The final error says how many times it happened ("HTTP 500 five times: ..."). The sleep is
injected (tests pass one that records the delays), and time is the event loop's clock, so
trio's MockClock runs a whole schedule without waiting.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio

from actors.core.errors import ModelError

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    first_backoff: float = 0.5
    max_backoff: float = 8.0
    longest_wait: float = 60.0  # a server asking for more is reported, not waited for

    def allowed(self, error: ModelError) -> int:
        """How many attempts in all this kind of failure gets."""
        return self.attempts if error.retryable else 1

    def backoff(self, retry: int) -> float:
        """The wait before retry number ``retry`` (1 for the first retry)."""
        return float(min(self.first_backoff * 2.0 ** (retry - 1), self.max_backoff))


async def with_retries(
    attempt: Callable[[int], Awaitable[T]],
    policy: RetryPolicy,
    *,
    deadline: float,
    on_retry: Callable[[ModelError, float, int], Awaitable[None]],
    sleep: Sleep = anyio.sleep,
) -> T:
    """Call ``attempt(n)`` for n = 1, 2, ... until it returns; raise the final ModelError.

    ``deadline`` is on the event loop's clock (``anyio.current_time()``; ``math.inf``:
    none); ``on_retry(error,
    delay, next_attempt)`` is told before each wait. Cancellation: any await (the attempt,
    the wait) may be cancelled; nothing is left running.
    """
    seen: Counter[str] = Counter()
    for n in range(1, 1000):
        try:
            return await attempt(n)
        except ModelError as error:
            seen[error.what] += 1
            final = error.again(seen[error.what])
            if n >= policy.allowed(error):
                raise final from None
            delay = policy.backoff(n)
            if error.retry_after is not None:
                delay = max(delay, error.retry_after)
            if delay > policy.longest_wait or anyio.current_time() + delay >= deadline:
                raise final from None
            await on_retry(error, delay, n + 1)
            await sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
