"""The title call: one short model request that names a session after its first answer.

:func:`ask_for_title` sends the first exchange (:func:`actors.core.titles.title_request`) to
the model client, which serves it beside the turn's own requests, and answers the cleaned
title (or None) with the call's usage. It never touches the session: the supervisor, which
owns the usage and the title, counts the cost and sets the title unless the user named the
session meanwhile (``Store.propose_title`` checks that in its transaction).

Cancellation: the call runs in the scopes of ``job`` (a :class:`~actors.core.turn.Turn` of
its own); cancelling it (the harness leaving) ends the request, and the answer is then no
title, with whatever usage the client could report.
"""

from __future__ import annotations

from anyio.streams.memory import MemoryObjectSendStream

from actors.core.budget import Usage
from actors.core.mailbox import ask
from actors.core.titles import TITLE_MAX_TOKENS, model_title, title_request
from actors.core.turn import Turn
from actors.model import ModelOutcome, ModelRequest


async def ask_for_title(
    model_inbox: MemoryObjectSendStream[ModelRequest],
    user_text: str,
    answer_text: str,
    job: Turn,
    model: str | None = None,
) -> tuple[str | None, Usage | None]:
    """The model's title for this exchange (None when it gave nothing usable) and the
    call's usage. Raises :class:`~actors.core.errors.ActorGone` if the client is gone."""
    messages = title_request(user_text, answer_text)
    outcome: ModelOutcome = await ask(
        model_inbox,
        lambda reply: ModelRequest(messages, reply, turn=job, temperature=0,
                                   max_tokens=TITLE_MAX_TOKENS, model=model),
        "model client",
    )
    if outcome.message is None:
        return None, outcome.usage
    return model_title(str(outcome.message.get("content") or "")), outcome.usage
