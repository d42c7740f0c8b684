"""The retry policy (actors/model/_retry.py) on the event loop's clock: trio's MockClock runs
whole backoff schedules without waiting; on asyncio the sleep is injected and recorded."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import trio.testing

from actors.core.errors import (
    EndpointUnreachable,
    ModelError,
    RequestRefused,
    ServerFailed,
    StreamBroken,
)
from actors.model import RetryPolicy
from actors.model._retry import with_retries
from tests.support.endpoints import Recorded

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    if request.param == "trio":
        return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})
    return "asyncio"


class Attempts:
    """Fails with the given errors in turn, then answers."""

    def __init__(self, *errors: ModelError) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.retries: list[tuple[str, float, int]] = []

    async def __call__(self, n: int) -> str:
        self.calls += 1
        assert n == self.calls
        if self.errors:
            raise self.errors.pop(0)
        return "answer"

    async def on_retry(self, error: ModelError, delay: float, attempt: int) -> None:
        self.retries.append((error.what, delay, attempt))


def server_error() -> ServerFailed:
    return ServerFailed("HTTP 500", "boom", endpoint="http://x/v1", status=500)


async def run(attempts: Attempts, anyio_backend: Any, *, budget: float = 120.0) -> Any:
    """Run with the loop's real sleep on trio (its clock is mocked), else a recorded one."""
    sleep = anyio.sleep if anyio_backend != "asyncio" else Recorded()
    start = anyio.current_time()
    result = await with_retries(attempts, RetryPolicy(), deadline=start + budget,
                                on_retry=attempts.on_retry, sleep=sleep)
    waited = (anyio.current_time() - start) if anyio_backend != "asyncio" else sum(
        sleep.delays)  # type: ignore[union-attr]
    return result, waited


async def test_five_server_errors_back_off_and_are_counted(anyio_backend: Any) -> None:
    attempts = Attempts(*[server_error() for _ in range(5)])
    with pytest.raises(ServerFailed) as info:
        await run(attempts, anyio_backend)
    assert attempts.calls == 5
    assert [d for _, d, _ in attempts.retries] == [0.5, 1, 2, 4]
    assert str(info.value) == "The model endpoint http://x/v1 failed: HTTP 500 five times: boom."


async def test_a_success_after_retries_takes_the_sum_of_the_backoffs(anyio_backend: Any) -> None:
    attempts = Attempts(server_error(), StreamBroken("the connection dropped"), server_error())
    result, waited = await run(attempts, anyio_backend)
    assert result == "answer" and waited == pytest.approx(3.5)
    assert [a for _, _, a in attempts.retries] == [2, 3, 4]


async def test_retry_after_is_waited_for_when_it_fits(anyio_backend: Any) -> None:
    limited = ServerFailed("HTTP 429", "slow down", status=429)
    limited.retry_after = 30
    result, waited = await run(Attempts(limited), anyio_backend)
    assert result == "answer" and waited == pytest.approx(30)


async def test_no_wait_past_the_deadline(anyio_backend: Any) -> None:
    attempts = Attempts(*[server_error() for _ in range(5)])
    with pytest.raises(ServerFailed) as info:
        await run(attempts, anyio_backend, budget=2.0)  # 0.5 fits, then 0.5 + 1 + 2 > 2
    assert attempts.calls == 3 and "three times" in str(info.value)


async def test_refusals_and_unreachable_endpoints_are_not_retried(anyio_backend: Any) -> None:
    for error in (RequestRefused("HTTP 400", "bad"), EndpointUnreachable("connection refused")):
        attempts = Attempts(error)
        with pytest.raises(type(error)):
            await run(attempts, anyio_backend)
        assert attempts.calls == 1 and attempts.retries == []
