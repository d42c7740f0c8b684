"""The model client actor: chat completions against any OpenAI-compatible endpoint.

Each request is served in its own task (a background compaction's summary call does not hold
up the turn's request). Responses stream: answer text goes to the front end as
:class:`TextDelta`, reasoning as :class:`ReasoningDelta`; tool calls are assembled whatever
the server's dialect (:mod:`actors.model._assembly`). Usage comes from
``stream_options.include_usage``; where the endpoint gives none, it is estimated, tool schemas
included.

Failures: every exception inside a request becomes an outcome whose ``error`` is a
:class:`~actors.core.errors.ModelError` with one clear line; the actor never dies of a
request. Retries follow :mod:`actors.model._retry` (5xx, 429 and broken streams a few times
with backoff; 4xx and known server configuration never). How long the server may keep a
request waiting is :mod:`actors.model._timeouts`: for the answer to begin
(``--llm-first-token-timeout``), then for each next byte (``--llm-timeout``); a limit on the
whole request, retries included, only with ``--llm-total-timeout``.

Start-up check (``preflight``, for the interactive prompt): in the background, without
delaying anything, the actor lists the endpoint's models and learns the context the server
really uses (:mod:`actors.model._preflight`), and warns at once (a :class:`Notice`) when the
endpoint is unreachable, the model is missing, or the context is smaller than
``--max-context-tokens`` (or than the fixed prompt). Without it (print mode) the context is
looked up before the first request, bounded, the same way; a request waits for a lookup
still running. What is learned shapes the requests (llama.cpp: the reasoning its template
wants back, its model's control tokens) and the hints: a request refused as longer than the
context says what helps, and an answer cut because the context filled is told apart from
one cut at the output limit. After the first answer it checks the context once more (ollama
loads the model then), and after every answer it compares the reported prompt size with its
own estimate: a server that cut the prompt is reported. Each warning is given once.

Durable before visible: a request may go out while the checkpoint of what it carries is
still being written (:attr:`ModelRequest.saved`); its answer's events and its outcome wait
for that checkpoint.

Cancellation: a request bound to a turn runs inside ``turn.scope()``. When the turn is
cancelled the stream is closed and the actor answers ``interrupted`` with the answer text
received so far; it never raises into the supervisor. Closing the inbox cancels requests
still running (a background summary call) and the background checks.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from actors.core.budget import (
    SMALL_CONTEXT_TOKENS,
    Usage,
    estimate_fixed,
    estimate_messages,
    estimate_tools,
    prompt_truncated,
)
from actors.core.config import (
    DEFAULT_FIRST_TOKEN_TIMEOUT,
    DEFAULT_MAX_ANSWER_BYTES,
    PROMPT_GRACE_SECONDS,
)
from actors.core.control_tokens import ControlTokens
from actors.core.errors import (
    ContextExceeded,
    EndpointTimeout,
    EndpointUnreachable,
    ModelError,
    ModelNotFound,
    RequestRefused,
)
from actors.core.events import (
    Event,
    EventSink,
    Notice,
    ReasoningDelta,
    ReasoningRevealed,
    StreamRestarted,
    TextDelta,
)
from actors.core.mailbox import answer
from actors.core.messages import Message
from actors.model._assembly import Assembly
from actors.model._body import FAMILIES, Body, EncodedMessages, frame
from actors.model._classify import from_exception
from actors.model._connection import Connection, connect, listening
from actors.model._endpoint import Endpoint, check_base_url, root_url
from actors.model._preflight import (
    LOOKUP_SECONDS,
    context_full,
    context_warning,
    get_json,
    llamacpp_context,
    ollama_context,
    refusal_hint,
    truncation_warning,
)
from actors.model._protocol import ModelOutcome, ModelRequest
from actors.model._reasoning import Piece
from actors.model._retry import RetryPolicy, Sleep, with_retries
from actors.model._timeouts import Timeouts
from actors.model._wire import stream_chat

if TYPE_CHECKING:
    from actors.model._http import http

CLOSE_SECONDS = 2
LIST_SECONDS = 3


@dataclass
class _Progress:
    """What the front end has been shown of the current attempt."""

    text: list[str] = field(default_factory=list)
    shown: bool = False


class ModelClient:
    """Holds the endpoint settings; :meth:`run` is the actor."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        timeout: float,
        first_token_timeout: float = DEFAULT_FIRST_TOKEN_TIMEOUT,
        total_timeout: float | None = None,
        answer_limit: int | None = DEFAULT_MAX_ANSWER_BYTES,
        http_client: http.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
        sleep: Sleep = anyio.sleep,
        events: EventSink | None = None,
        preflight: bool = False,
        context_budget: int | None = None,
        fixed_tokens: tuple[int, int | None] | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.timeout = timeout
        self.timeouts = Timeouts(timeout, first_token_timeout, total_timeout)
        self.answer_limit = answer_limit  # bytes of one answer (None: no limit)
        self.endpoint = Endpoint(base_url, model)
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._api_key = api_key
        self._http_client = http_client  # to send through (a test's mock transport), or None
        self._connection: Connection | None = None
        self._connecting = anyio.Lock()
        self._include_usage = True
        self._events = events or EventSink(None)
        self._preflight = preflight
        self._budget = context_budget
        # The estimated system prompt and tool schemas, if known: with the full schemas, and
        # with the compact ones a small context gets (None: there are none); see _fixed_now.
        self._fixed = fixed_tokens
        self._warned: set[str] = set()
        self._context_checked = False
        self._looked_up: anyio.Event | None = None  # see _look_up
        self._tokens: tuple[frozenset[str], ControlTokens] = (frozenset(), FAMILIES)
        self._background: anyio.abc.TaskGroup | None = None
        # The conversation's requests and the compactor's, each encoded incrementally.
        self._encoded = (EncodedMessages(), EncodedMessages())
        # The latest request's head and tail, encoded, and what they were made of (the tool
        # schemas by identity: the supervisor passes the same list to every request).
        self._frame: tuple[tuple[object, ...], tuple[bytes, bytes]] | None = None

    async def connect(self) -> Connection:
        """The endpoint's connection, made now rather than at the first request (a warm-up;
        a test on a virtual clock, whose deadlines would jump over the worker thread)."""
        return await self._connect()

    async def close(self) -> None:
        """Close the endpoint's clients, if they were made: the actor does at its end; a
        client used without it (for :meth:`list_models`) is closed by its user."""
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.aclose()

    async def _connect(self) -> Connection:
        """The endpoint's connection (:mod:`actors.model._connection`), made once, on first
        use, in a worker thread; a caller that comes meanwhile waits for it (the warm-up and
        the first request made two, in two threads, each importing and building). Before it
        is made, a TCP connection to the endpoint is tried: nothing listening raises
        :class:`EndpointUnreachable` at once (and the next call tries again). Cancellation:
        the try stops; the connection being made is finished and kept (it does no I/O) and
        the cancellation is delivered after."""
        async with self._connecting:  # one connection, made once: a second caller waits
            if self._connection is None:
                if self._http_client is None:  # not a test's transport: a real address
                    refused = await listening(self.base_url)
                    if refused is not None:  # nothing listens: said without the HTTP library
                        raise from_exception(refused, self.endpoint, streaming=False)
                with anyio.CancelScope(shield=True):  # no I/O: imports and a client, bounded
                    made: Connection = await anyio.to_thread.run_sync(partial(
                        connect, base_url=self.base_url, api_key=self._api_key,
                        http_client=self._http_client,
                    ))
                self._connection = made
            return self._connection

    async def run(
        self,
        inbox: MemoryObjectReceiveStream[ModelRequest],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve requests concurrently until every sender of ``inbox`` is closed; requests
        still running then (a background compaction's summary call) are cancelled."""
        try:
            async with inbox, anyio.create_task_group() as tg:
                self._background = tg
                task_status.started()
                tg.start_soon(self._warm_up)
                async for request in inbox:
                    tg.start_soon(self._serve, request)
                tg.cancel_scope.cancel()  # closing: nobody waits for requests still running
        finally:
            if self._connection is not None:
                with anyio.move_on_after(CLOSE_SECONDS, shield=True):
                    await self._connection.aclose()

    async def _warm_up(self) -> None:
        """Make the connection (in a worker thread) and check the endpoint, in the background,
        once the front end has had :data:`~actors.core.config.PROMPT_GRACE_SECONDS` to show
        its prompt: importing the HTTP library holds the interpreter for a tenth of a second,
        which would delay the first prompt. A request that comes sooner connects itself and
        does not wait for this."""
        await anyio.sleep(PROMPT_GRACE_SECONDS)
        await _quietly(self._connect)
        if self._preflight:
            await _quietly(self.check_endpoint)

    async def _serve(self, request: ModelRequest) -> None:
        outcome = ModelOutcome(interrupted=True)
        progress = _Progress()
        scope = request.turn.scope() if request.turn is not None else anyio.CancelScope()
        try:
            with scope:
                answered = await self._complete(request, progress)
                await _saved(request)
                outcome = answered
            if outcome.interrupted:
                outcome.partial_text = "".join(progress.text)
            await answer(request.reply, outcome)
        finally:
            request.reply.close()  # cancelled with the actor: the caller sees no answer

    async def _complete(self, request: ModelRequest, progress: _Progress) -> ModelOutcome:
        """The request to its end, as an outcome; only cancellation propagates."""
        try:
            check_base_url(self.base_url)
            return await self._complete_checked(request, progress)
        except ModelNotFound as error:
            available = await self.list_models()
            return ModelOutcome(error=error.with_available(available, self.endpoint.pull_hint()))
        except ContextExceeded as error:  # the hint knows the request and the server
            return ModelOutcome(error=error.with_hint(refusal_hint(
                self.endpoint, error.prompt_tokens, error.context, budget=self._budget,
                estimated=estimate_messages(request.messages)
                + estimate_tools(self._tools_for(request)),
                fixed=estimate_fixed(request.messages, self._tools_for(request)))))
        except ModelError as error:
            return ModelOutcome(error=error)
        except Exception as exc:  # a bug or a surprise: still one clear line, never a crash
            return ModelOutcome(error=self._unexpected(exc))

    def _unexpected(self, exc: Exception) -> ModelError:
        try:
            return from_exception(exc, self.endpoint, streaming=False)
        except Exception:  # the translation itself failed: say what happened, plainly
            return ModelError(f"unexpected error ({type(exc).__name__})", str(exc)[:160],
                              endpoint=self.base_url)

    async def list_models(self) -> list[str]:
        """The model ids the endpoint lists at ``/v1/models`` (empty if it lists none).

        Bounded (a few seconds); any failure is an empty list.
        """
        with anyio.move_on_after(LIST_SECONDS):
            try:
                payload = (await (await self._connect()).fetch("/models")).json()
            except Exception:  # an endpoint without a models list: nothing to name
                return []
            return self.endpoint.learn_from_models(payload)
        return []

    async def _complete_checked(
        self, request: ModelRequest, progress: _Progress
    ) -> ModelOutcome:
        if self._looked_up is None and request.tools:  # the conversation's first request
            self._fixed = (estimate_fixed(request.messages, request.tools),
                           None if request.small_tools is None
                           else estimate_fixed(request.messages, request.small_tools))
        await self._look_up()
        encoded = self._encoded_for(request.messages)
        taken = encoded.call_ids
        in_messages = encoded.tokens
        last: list[ModelError] = []

        async def attempt(n: int) -> Assembly:
            if progress.shown:
                progress.text.clear()
                progress.shown = False
                await self._emit(request, StreamRestarted(str(last[-1]) if last else "retry"))
            assembly = Assembly(taken_ids=taken, limit=self.answer_limit)
            try:
                connection = await self._connect()
                await stream_chat(connection, self._body(request, encoded), self.endpoint,
                                  assembly, lambda piece: self._show(request, progress, piece),
                                  self.timeouts)
            except RequestRefused as error:
                if self._include_usage and "stream_options" in error.detail:
                    self._include_usage = False  # an endpoint without usage chunks
                    return await attempt(n)
                raise
            except ModelError as error:
                last.append(error)
                raise
            self.endpoint.learn_from_fingerprint(assembly.fingerprint)
            return assembly

        async def on_retry(error: ModelError, delay: float, next_attempt: int) -> None:
            allowed = self.retry.allowed(error)
            await self._emit(request, Notice(
                f"Model request failed ({error.what}"
                f"{': ' + error.detail if error.detail else ''}); retrying in {delay:g} s "
                f"(attempt {next_attempt} of {allowed}).", "warning"))

        total = self.timeouts.total
        with anyio.move_on_after(math.inf if total is None else total) as timer:
            assembly = await with_retries(
                attempt, self.retry, deadline=timer.deadline, on_retry=on_retry,
                sleep=self._sleep,
            )
        if timer.cancelled_caught:
            detail = f"last error: {last[-1].what}" if last else ""
            return ModelOutcome(error=EndpointTimeout(
                f"no complete answer within {total:g} s", detail,
                endpoint=self.base_url, hint="Raise --llm-total-timeout, or leave it out.",
            ))
        message = assembly.message()
        usage = assembly.usage or Usage(in_messages + estimate_tools(self._tools_for(request)),
                                        estimate_messages([message]), estimated=True)
        # Compared with the messages alone: servers differ in how they count tool schemas.
        if assembly.usage is not None and prompt_truncated(usage.prompt_tokens, in_messages):
            await self._warn("truncated", truncation_warning(
                self.endpoint, usage.prompt_tokens, in_messages), request)
        if not self._context_checked and self._background is not None:
            self._context_checked = True
            self._background.start_soon(_quietly, self._check_context)
        full = None
        if assembly.finish_reason == "length" and assembly.usage is not None:
            full = context_full(
                self.endpoint, usage.prompt_tokens, usage.completion_tokens,
                estimated=in_messages + estimate_tools(self._tools_for(request)),
                fixed=estimate_fixed(request.messages, self._tools_for(request)),
                budget=self._budget)
        return ModelOutcome(message=message, usage=usage, finish_reason=assembly.finish_reason,
                            reasoning=assembly.reasoning_text(), context_full=full,
                            over_limit=assembly.limit if assembly.over_limit else None)

    def _encoded_for(self, messages: Sequence[Message]) -> EncodedMessages:
        """The encoder holding these messages' conversation (the one whose first message
        they start with), brought up to date; else the other one (the least recently used)."""
        first, second = self._encoded
        if not first.starts(messages):
            first, second = second, first
            self._encoded = (first, second)
        first.update(messages, reasoning=self.endpoint.renders_reasoning,
                     tokens=self._control_tokens())
        return first

    def _control_tokens(self) -> ControlTokens:
        """The control tokens to neutralise: the common families', and the served model's
        once the server told them (made again only when they change)."""
        learned = self.endpoint.control_tokens
        if learned != self._tokens[0]:
            self._tokens = (learned, ControlTokens(learned))
        return self._tokens[1]

    def _body(self, request: ModelRequest, encoded: EncodedMessages) -> Body:
        """The request's JSON body; ``encoded`` holds its messages. What comes around them
        is encoded again only when it changed (:func:`~actors.model._body.frame`)."""
        tools = self._tools_for(request)
        model = request.model or self.model
        key = (tools, model, self._include_usage, request.temperature,
               request.max_tokens)
        cached = self._frame
        if cached is not None and all(map(operator.is_, cached[0], key)):
            return encoded.framed(cached[1])
        head: dict[str, Any] = {"model": model}
        tail: dict[str, Any] = {"stream": True}
        if self._include_usage:
            tail["stream_options"] = {"include_usage": True}
        if tools:
            tail["tools"] = tools
        if request.temperature is not None:
            tail["temperature"] = request.temperature
        if request.max_tokens is not None:
            tail["max_tokens"] = request.max_tokens
        around = frame(head, tail)
        self._frame = (key, around)
        return encoded.framed(around)

    def _small_context(self) -> bool:
        """The server is known to give a request at most SMALL_CONTEXT_TOKENS."""
        length = self.endpoint.context_length
        return length is not None and length <= SMALL_CONTEXT_TOKENS

    def _fixed_now(self) -> int | None:
        """The estimated fixed prompt as requests now carry it (the compact schemas once
        the server is known to hold a small context), if known."""
        if self._fixed is None:
            return None
        full, compact = self._fixed
        return compact if compact is not None and self._small_context() else full

    def _tools_for(self, request: ModelRequest) -> list[dict[str, Any]] | None:
        """The request's tools: its compact ones once the server is known to hold a small
        context (:attr:`ModelRequest.small_tools`)."""
        if request.small_tools is not None and self._small_context():
            return request.small_tools
        return request.tools

    async def _show(self, request: ModelRequest, progress: _Progress, piece: Piece) -> None:
        if piece.kind == "text":
            progress.text.append(piece.text)
            progress.shown = True
            await self._emit(request, TextDelta(piece.text))
        elif piece.kind == "reasoning":
            progress.shown = True
            await self._emit(request, ReasoningDelta(piece.text))
        else:
            progress.text.clear()
            await self._emit(request, ReasoningRevealed(piece.text))

    @staticmethod
    async def _emit(request: ModelRequest, event: Event) -> None:
        if request.events is not None:
            await _saved(request)
            await request.events.send(event)

    # -- what the endpoint tells about itself ---------------------------------------------

    async def _warn(self, key: str, text: str, request: ModelRequest | None = None) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        if request is not None and request.events is not None:
            await self._emit(request, Notice(text, "warning"))
        else:
            await self._events.send(Notice(text, "warning"))

    async def check_endpoint(self) -> None:
        """The start-up check (see the module docstring): warnings only, never raises.
        :meth:`run` starts it in the background when ``preflight`` is set."""
        try:
            check_base_url(self.base_url)
        except ModelError as error:
            await self._warn("unreachable", str(error))
            return
        payload, unreachable = await self._fetch_models()
        if unreachable is not None:
            await self._warn("unreachable", str(unreachable))
            return
        if payload is not None:
            self.endpoint.learn_from_models(payload)
        if self.endpoint.has_model() is False:
            missing = ModelNotFound(self.model, "not in its list of models",
                                    available=self.endpoint.models, endpoint=self.base_url,
                                    hint=self.endpoint.pull_hint())
            await self._warn("model", str(missing))
        if self.endpoint.server == "unknown":
            version = await get_json(await self._connect(),
                                     f"{root_url(self.base_url)}/api/version")
            if isinstance(version, dict) and "version" in version:
                self.endpoint.server = "ollama"
        await self._look_up()

    async def _fetch_models(self) -> tuple[Any, ModelError | None]:
        """The ``/v1/models`` answer, or why the endpoint could not be reached."""
        with anyio.move_on_after(LIST_SECONDS):
            try:
                connection = await self._connect()
                return (await connection.fetch("/models")).json(), None
            except ValueError:
                return None, None
            except Exception as exc:
                error = from_exception(exc, self.endpoint, streaming=False)
                if isinstance(error, EndpointUnreachable):
                    return None, error
                return None, None  # reachable, but no list of models: nothing to check
        return None, None

    async def _look_up(self) -> None:
        """What the server tells about itself that requests depend on (the context a
        request gets; llama.cpp: whether its template wants the turn's reasoning back),
        looked up once: by the start-up check in the REPL, else before the first request
        (print mode); a request that comes while it runs waits for it. Bounded by
        :data:`LOOKUP_SECONDS` in all; a failure learns nothing. Cancellation: a lookup
        cancelled half-way counts as done."""
        done = self._looked_up
        if done is None:
            done = self._looked_up = anyio.Event()
            try:
                with anyio.move_on_after(LOOKUP_SECONDS):
                    await _quietly(self._learn)
            finally:
                done.set()
        elif not done.is_set():
            with anyio.move_on_after(LOOKUP_SECONDS):
                await done.wait()

    async def _learn(self) -> None:
        if self.endpoint.server == "unknown" and not self.endpoint.models:
            connection = await self._connect()  # its /v1/models names the server
            self.endpoint.learn_from_models(await get_json(
                connection, f"{self.base_url.rstrip('/')}/models"))
        await self._learn_context()

    async def _check_context(self) -> None:
        """After the first answer: the context, if the start-up check could not tell."""
        if self.endpoint.context_length is None:
            await self._learn_context()

    async def _learn_context(self) -> None:
        connection = await self._connect()
        server = self.endpoint.server
        if server == "ollama":
            await ollama_context(connection, self.endpoint)
        elif server == "llama.cpp":
            await llamacpp_context(connection, self.endpoint)
        elif server == "vllm" and self.endpoint.context_length is None:
            payload, _ = await self._fetch_models()
            self.endpoint.learn_from_models(payload)
        warning = None if self._budget is None else context_warning(
            self.endpoint, self._budget, self._fixed_now())
        if warning is not None:
            await self._warn("context", warning)


async def _saved(request: ModelRequest) -> None:
    """Wait until the store holds what ``request`` carries (:attr:`ModelRequest.saved`).
    Cancellation: the wait runs in the request's turn scope; the caller cancels the turn
    when that checkpoint fails, so the answer is then dropped, never shown."""
    if request.saved is not None and not request.saved.is_set():
        await request.saved.wait()


async def _quietly(check: Callable[[], Awaitable[object]]) -> None:
    """Run a background check that may only warn: if it fails, it says nothing, and it never
    takes the actor down (a failing request reports its own failure). Cancellation passes."""
    with contextlib.suppress(Exception):
        await check()


__all__ = ["ModelClient", "ModelOutcome", "ModelRequest"]
