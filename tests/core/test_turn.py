"""The cancellation of one turn (actors/core/turn.py) on its own, on the event loop's clock."""

from __future__ import annotations

import anyio
import pytest

from actors.core.turn import Turn
from tests.support.virtual_time import BACKENDS, on_virtual_time

pytestmark = pytest.mark.anyio


@pytest.fixture(params=BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    return on_virtual_time(str(request.param))


async def test_a_turn_cancelled_before_a_scope_is_entered() -> None:
    turn = Turn()
    turn.cancel("interrupted by the user")
    start = anyio.current_time()
    reached = False
    with turn.scope() as scope:
        await anyio.sleep(30)
        reached = True
    assert scope.cancelled_caught and not reached
    assert anyio.current_time() == start  # it never slept
    assert turn.cancelled and turn.reason == "interrupted by the user"


async def test_cancel_reaches_every_scope_entered_for_the_turn() -> None:
    turn = Turn()
    stopped: list[tuple[str, float]] = []

    async def worker(name: str) -> None:
        with turn.scope():
            await anyio.sleep(100)
        stopped.append((name, anyio.current_time() - start))

    start = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker, "model")
        tg.start_soon(worker, "tools")
        await anyio.sleep(2)
        turn.cancel("the tool timed out")
    assert sorted(stopped) == [("model", 2), ("tools", 2)]
    assert turn.reason == "the tool timed out"


async def test_the_first_reason_stays() -> None:
    turn = Turn()
    turn.cancel("interrupted by the user")
    first_at = turn.cancelled_at
    await anyio.sleep(1)
    turn.cancel("the turn ended")
    assert turn.reason == "interrupted by the user" and turn.cancelled_at == first_at


async def test_a_turn_never_cancelled_does_not_touch_its_scopes() -> None:
    turn = Turn()
    with turn.scope() as scope:
        await anyio.sleep(5)
    assert not scope.cancelled_caught and not turn.cancelled and turn.reason == ""
