"""Tool-call assembly, reasoning split and SSE decoding (actors/model/_assembly.py,
_reasoning.py, _sse.py): pure functions fed the chunk shapes real servers send."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.model._assembly import Assembly, call_ids_in, repair_arguments
from actors.model._reasoning import ThinkSplitter
from actors.model._sse import NotAnEventStream, SSEDecoder, SSEEvent, SSELines

JSON = dict[str, Any]


def chunk(delta: JSON, finish: str | None = None, **extra: Any) -> JSON:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def call(index: int | None = None, id: Any = None, name: str | None = None,
         arguments: Any = None) -> JSON:
    entry: JSON = {"function": {}}
    if index is not None:
        entry["index"] = index
    if id is not None:
        entry["id"] = id
    if name is not None:
        entry["function"]["name"] = name
    if arguments is not None:
        entry["function"]["arguments"] = arguments
    return {"tool_calls": [entry]}


def assemble(*chunks: JSON, taken: set[str] | None = None) -> Assembly:
    assembly = Assembly(taken_ids=taken or set())
    for c in chunks:
        assembly.add(c)
    assembly.finish()
    return assembly


def calls_of(assembly: Assembly) -> list[tuple[str, Any]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in assembly.tool_calls()]


# ------------------------------------------------------------------------------- tool calls


def test_fragments_are_joined_by_index() -> None:
    assembly = assemble(
        chunk(call(0, "a", "read_file", "")), chunk(call(0, arguments='{"pa')),
        chunk(call(1, "b", "grep", '{"pattern"')), chunk(call(0, arguments='th": "x"}')),
        chunk(call(1, arguments=': "y"}')), chunk({}, "tool_calls"),
    )
    assert calls_of(assembly) == [("read_file", {"path": "x"}), ("grep", {"pattern": "y"})]
    assert [c["id"] for c in assembly.tool_calls()] == ["a", "b"]


def test_every_call_at_index_zero_with_its_own_id_stays_apart() -> None:
    """ollama 0.20.x with gemma4: each call whole in one chunk, all with index 0."""
    assembly = assemble(
        chunk(call(0, "call_aaaaaaaa", "write_file", '{"content":"1","path":"out.txt"}')),
        chunk(call(0, "call_bbbbbbbb", "run_bash", '{"command":"cat out.txt"}')),
        chunk({}, "tool_calls"),
    )
    assert calls_of(assembly) == [("write_file", {"content": "1", "path": "out.txt"}),
                                  ("run_bash", {"command": "cat out.txt"})]


def test_several_calls_in_one_chunk_with_the_same_index() -> None:
    both = {"tool_calls": [
        {"id": "call_1", "index": 0, "type": "function",
         "function": {"name": "a", "arguments": "{}"}},
        {"id": "call_2", "index": 0, "type": "function",
         "function": {"name": "b", "arguments": '{"x":1}'}},
    ]}
    assert calls_of(assemble(chunk(both), chunk({}, "tool_calls"))) == [("a", {}),
                                                                       ("b", {"x": 1})]


def test_calls_without_index_each_start_a_new_call() -> None:
    """ollama before 0.4.7 sent no index at all."""
    assembly = assemble(chunk(call(None, "c1", "ls", '{"path":"."}')),
                        chunk(call(None, "c2", "ls", '{"path":"src"}')), chunk({}, "stop"))
    assert calls_of(assembly) == [("ls", {"path": "."}), ("ls", {"path": "src"})]


def test_a_fragment_without_index_or_id_continues_the_last_call() -> None:
    assembly = assemble(chunk(call(None, "c1", "ls", '{"pa')),
                        chunk(call(None, arguments='th":"."}')), chunk({}, "tool_calls"))
    assert calls_of(assembly) == [("ls", {"path": "."})]


def test_a_second_name_for_a_complete_call_without_ids_is_a_new_call() -> None:
    assembly = assemble(chunk(call(0, name="ls", arguments="{}")),
                        chunk(call(0, name="grep", arguments='{"pattern":"x"}')),
                        chunk({}, "tool_calls"))
    assert calls_of(assembly) == [("ls", {}), ("grep", {"pattern": "x"})]


def test_repeated_metadata_with_the_same_id_is_one_call() -> None:
    """vLLM GLM parsers re-send id and name on continuation chunks."""
    assembly = assemble(chunk(call(0, "x1", "ls", '{"path"')),
                        chunk(call(0, "x1", "ls", ':"a"}')), chunk({}, "tool_calls"))
    assert calls_of(assembly) == [("ls", {"path": "a"})]


def test_vllm_null_fields_are_missing_fields() -> None:
    nulls = {"tool_calls": [{"id": None, "type": None, "index": 0,
                             "function": {"name": None, "arguments": '"x"}'}}]}
    assembly = assemble(chunk(call(0, "t1", "read_file", '{"path":')), chunk(nulls),
                        chunk({}, "tool_calls"))
    assert calls_of(assembly) == [("read_file", {"path": "x"})]
    assert assembly.tool_calls()[0]["id"] == "t1"


def test_arguments_sent_as_an_object_are_serialised() -> None:
    """llama.cpp builds of March 2026 (issue 20198)."""
    assembly = assemble(chunk(call(0, "k", "write_file", {"path": "a.txt", "content": "hi"})),
                        chunk({}, "tool_calls"))
    assert calls_of(assembly) == [("write_file", {"path": "a.txt", "content": "hi"})]


@pytest.mark.parametrize("text", [
    '{"path": "a"}{"path": "a"}',  # the whole object repeated by the end-of-stream flush
    '{"path":"a"}{"path": "a"}',  # ... formatted differently the second time
    '{"path": "a"}  {"path": "a"}',
    '{"path": "a"{"path": "a"}',  # a streamed prefix, then the whole object
    '{{"path": "a"}',
])
def test_repeated_arguments_are_taken_once(text: str) -> None:
    assert json.loads(repair_arguments(text)) == {"path": "a"}


@pytest.mark.parametrize("text", ['{"a": 1}{"b": 2}', '{"command": "ls', "not json"])
def test_other_invalid_arguments_are_kept_as_they_came(text: str) -> None:
    assert repair_arguments(text) == text


def test_valid_arguments_are_kept_as_sent_and_empty_ones_are_an_empty_object() -> None:
    go = '{"command":"echo a \\u003e b \\u0026\\u0026 cat b"}'
    assert repair_arguments(go) == go
    assert repair_arguments("") == "{}" and repair_arguments("  ") == "{}"


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "1" * 5000,
                                  '{"a": 1e400}{"a": 1e400}', "[" * 100_000])
def test_hostile_arguments_never_raise(text: str) -> None:
    assert isinstance(repair_arguments(text), str)


def test_missing_numeric_and_duplicate_ids_become_unique_strings() -> None:
    assembly = assemble(
        chunk(call(0, 7, "ls", "{}")), chunk(call(1, "dup", "ls", "{}")),
        chunk(call(2, "dup", "ls", "{}")), chunk(call(3, None, "ls", "{}")),
        chunk(call(4, "", "ls", "{}")), chunk(call(5, "seen-before", "ls", "{}")),
        chunk({}, "tool_calls"), taken={"seen-before"},
    )
    ids = [c["id"] for c in assembly.tool_calls()]
    assert ids[:2] == ["7", "dup"]
    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == 6 and "seen-before" not in ids


def test_call_ids_in_a_conversation() -> None:
    messages = [{"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}, {"x": 1}]}]
    assert call_ids_in(messages) == {"a", "b"}


# ----------------------------------------------------------------- text, reasoning, usage


def test_reasoning_fields_are_kept_out_of_the_answer() -> None:
    assembly = assemble(chunk({"role": "assistant", "content": None}),
                        chunk({"reasoning_content": "Let me think. "}),
                        chunk({"content": "", "reasoning": "More."}),
                        chunk({"content": "Answer."}), chunk({}, "stop"))
    assert assembly.message() == {"role": "assistant", "content": "Answer.",
                                  "reasoning_content": "Let me think. More."}
    assert assembly.reasoning_text() == "Let me think. More."


@pytest.mark.parametrize(("pieces", "answer", "reasoning"), [
    (["<think>", "plan", "</think>", "\n\nHello"], "Hello", "plan"),
    (["  <thi", "nk>a</thi", "nk>b"], "b", "a"),
    (["step one\n", "</think>\n\nHello!"], "Hello!", "step one"),  # llama.cpp issue 23320
    (["Plain answer, no tags."], "Plain answer, no tags.", ""),
    (["<think>cut short by the limit"], "", "cut short by the limit"),
])
def test_think_tags_in_the_content(pieces: list[str], answer: str, reasoning: str) -> None:
    assembly = assemble(*[chunk({"content": p}) for p in pieces], chunk({}, "stop"))
    assert assembly.answer_text() == answer
    assert assembly.reasoning_text() == reasoning


def test_usage_and_fingerprint() -> None:
    assembly = assemble(chunk({"content": "x"}, system_fingerprint="fp_ollama"),
                        chunk({}, "stop"),
                        {"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 7}})
    assert assembly.usage is not None
    assert (assembly.usage.prompt_tokens, assembly.usage.completion_tokens) == (120, 7)
    assert assembly.fingerprint == "fp_ollama" and assembly.finish_reason == "stop"
    empty = assemble(chunk({}, "stop"), {"choices": [], "usage": {"prompt_tokens": 0}})
    assert empty.usage is None  # zero prompt tokens: not a figure to trust


def test_odd_shapes_are_ignored_not_fatal() -> None:
    assembly = assemble({"choices": None}, {"choices": ["x", {"index": 1, "delta": {}}]},
                        chunk({"content": ["a", {"text": "b"}], "tool_calls": "x"}),
                        {"choices": [{"index": 0, "delta": None, "finish_reason": 3}]},
                        chunk({"tool_calls": [None, {"function": "x"}]}, "stop"))
    assert assembly.answer_text() == "b" and assembly.finish_reason == "stop"


# What llama.cpp 0c1e57098 streams with --reasoning-format none for Gemma 4, as checked on
# the real server (tests/e2e/test_llamacpp_real.py), and the other families' inline blocks.
@pytest.mark.parametrize(("pieces", "answer", "reasoning"), [
    (["<|channel>", "thought\n", "The user", " wants an answer.", "<channel|>", "The answer",
      " is 42."], "The answer is 42.", "The user wants an answer."),
    (["<|channel>thought\nI should read<chan", "nel|>"], "", "I should read"),
    (["[THINK]plan[/THINK]Hi"], "Hi", "plan"),
    (["<seed:think>plan</seed:think>Hi"], "Hi", "plan"),
    (["\u25c1think\u25b7plan\u25c1/think\u25b7Hi"], "Hi", "plan"),
    (["<|START_THINKING|>plan<|END_THINKING|>Hi"], "Hi", "plan"),
    (["<|channel|>analysis<|message|>plan<|end|>", "<|start|>assistant<|channel|>final",
      "<|message|>Hi"], "Hi", "plan"),
    (["<|channel|>analysis<|message|>plan<|end|>Hi"], "Hi", "plan"),
    (["<|channel|>analysis<|message|>plan<|end|><|start|>"], "", "plan"),
    (["A [THINK] in the answer stays."], "A [THINK] in the answer stays.", ""),
    (["<|chan"], "<|chan", ""),  # the content ended before a tag could be told
])
def test_each_family_s_inline_reasoning(pieces: list[str], answer: str, reasoning: str) -> None:
    assembly = assemble(*[chunk({"content": p}) for p in pieces], chunk({}, "stop"))
    assert assembly.answer_text() == answer
    assert assembly.reasoning_text() == reasoning


@given(st.text(alphabet="ab<>/thinkT \n", max_size=40), st.lists(st.integers(1, 6), max_size=12))
def test_the_split_does_not_depend_on_how_the_content_is_cut(
    text: str, cuts: list[int]
) -> None:
    split_anyhow(text, cuts)


@given(st.text(alphabet="a<|>channel thought\n[]THINK/", max_size=40),
       st.lists(st.integers(1, 6), max_size=12))
def test_other_families_split_the_same_however_cut(text: str, cuts: list[int]) -> None:
    split_anyhow(text, cuts)


def split_anyhow(text: str, cuts: list[int]) -> None:
    """The split of ``text`` cut at ``cuts`` is the split of it whole."""
    def run(pieces: list[str]) -> tuple[str, str]:
        splitter = ThinkSplitter()
        out = [p for piece in pieces for p in splitter.feed(piece)] + splitter.finish()
        answer: list[str] = []
        reasoning: list[str] = []
        for p in out:
            if p.kind == "revealed":
                reasoning.extend([*answer, p.text])
                answer.clear()
            else:
                (answer if p.kind == "text" else reasoning).append(p.text)
        return "".join(answer), "".join(reasoning)

    pieces, rest = [], text
    for n in cuts:
        pieces.append(rest[:n])
        rest = rest[n:]
    pieces.append(rest)
    assert run(pieces) == run([text])


# ------------------------------------------------------------------------------------- SSE


def decode(lines: list[str]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [e for line in lines if (e := decoder.feed(line)) is not None]
    last = decoder.close()
    return events + ([last] if last else [])


def test_sse_fields_comments_and_the_llama_cpp_error_field() -> None:
    assert decode([": keep-alive", "", "event: x", "data: {\"a\":", "data: 1}", "id: 3", "",
                   'error: {"code":500,"message":"boom"}', "", "data: [DONE]"]) == [
        SSEEvent('{"a":\n1}', "x"), SSEEvent("", "", '{"code":500,"message":"boom"}'),
        SSEEvent("[DONE]"),
    ]


@pytest.mark.parametrize("line", ["<html><body>", '{"error": "Unexpected endpoint"}', "oops"])
def test_a_line_that_is_no_sse_field_is_not_an_event_stream(line: str) -> None:
    with pytest.raises(NotAnEventStream):
        decode([line])


def lines_of(reads: list[bytes]) -> list[str]:
    splitter = SSELines()
    return [line for data in reads for line in splitter.feed(data)] + splitter.close()


def test_lines_end_in_lf_crlf_or_cr_wherever_the_reads_are_cut() -> None:
    body = "data: a\r\n\r\ndata: é€\rdata: b\n\ndata: [DONE]\r\n\r\nlast".encode()
    expected = ["data: a", "", "data: é€", "data: b", "", "data: [DONE]", "", "last"]
    assert lines_of([body]) == expected
    for cut in range(1, len(body)):  # \r|\n and a character's bytes split between reads
        assert lines_of([body[:cut], b"", body[cut:]]) == expected, cut
    assert lines_of([bytes([b]) for b in body]) == expected


def test_lines_of_bad_utf8_show_the_replacement_character() -> None:
    assert lines_of([b"data: \xff\xfe ok\n", b"data: \xe2\x82"]) == [
        "data: \ufffd\ufffd ok", "data: \ufffd"]
