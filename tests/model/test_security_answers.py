"""What an endpoint may send is bounded (issue 26's caps): an answer's text, reasoning and
tool-call arguments together are cut at ``--max-answer-bytes`` as they arrive, and so is a
line that never ends; the turn says so in one line and the saved context stays sendable.
A 200 MB answer keeps the harness's peak memory far below its size, in process (traced)
and as a real ``harness -p`` process (its peak RSS, read from the kernel)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path
from typing import IO

import pytest

from actors.core.events import Notice
from actors.testing.flavours import LlamaCpp
from actors.testing.scripted_server import Flood, Reply, ScriptedServer, tool_pairing_errors
from tests.support.clitools import REPO
from tests.support.runtime import running, settings_for

LIMIT = 64 * 1024
MB = 1024 * 1024


@pytest.mark.anyio
async def test_a_flood_of_text_is_cut_at_the_limit_and_kept(tmp_path: Path) -> None:
    with ScriptedServer([Flood(size=8 * MB, piece=4096), Reply("Fine.")],
                        check_tool_pairing=True) as server:
        settings = settings_for(tmp_path, server.base_url, max_answer_bytes=LIMIT)
        async with running(settings) as (sup, rec):
            first = await sup.run_turn("Say a lot.")
            second = await sup.run_turn("Go on.")
        server.assert_done()
    assert first.outcome == "answered" and first.text == "x" * LIMIT
    assert [n.text for n in rec.of(Notice) if n.level == "warning"] == [
        "The answer was cut at 65,536 bytes (--max-answer-bytes): the endpoint sent more "
        "than that. Ask for less at a time, or raise --max-answer-bytes."]
    assert second.ok and server.errors == []
    assert server.requests[1]["messages"][-2] == {"role": "assistant", "content": "x" * LIMIT}


@pytest.mark.anyio
async def test_tool_call_arguments_past_the_limit_are_never_run(tmp_path: Path) -> None:
    with ScriptedServer([Flood(size=8 * MB, kind="arguments", piece=4096), Reply("Smaller.")],
                        check_tool_pairing=True) as server:
        settings = settings_for(tmp_path, server.base_url, max_answer_bytes=LIMIT)
        async with running(settings) as (sup, _):
            first = await sup.run_turn("Write a big file.")
            second = await sup.run_turn("Try smaller.")
        server.assert_done()
    assert first.outcome == "failed"
    assert first.text == ("The model's answer passed 65,536 bytes (--max-answer-bytes) in the "
                          "middle of its tool calls; none of them was run.")
    sent = server.requests[1]["messages"]
    assert tool_pairing_errors(sent) == []
    assert sent[-3]["tool_calls"][0]["function"] == {"name": "write_file", "arguments": "{}"}
    results = [m["content"] for m in sent if m["role"] == "tool"]
    assert results == ["Not executed: your answer passed the harness's limit of 65,536 bytes "
                       "before this call was complete. Safe to retry with shorter arguments, "
                       "or in smaller steps."]
    assert second.ok and not any(settings.sandbox_dir.iterdir())


@pytest.mark.anyio
async def test_reasoning_past_the_limit_fails_the_turn_and_saves_nothing(
    tmp_path: Path
) -> None:
    with ScriptedServer([Flood(size=8 * MB, kind="reasoning", piece=4096), Reply("Here.")],
                        flavour=LlamaCpp()) as server:
        settings = settings_for(tmp_path, server.base_url, max_answer_bytes=LIMIT)
        async with running(settings) as (sup, _):
            first = await sup.run_turn("Think.")
            assert sup.snapshot().messages[-1] == {"role": "user", "content": "Think."}
            second = await sup.run_turn("Answer.")
    assert first.outcome == "failed"
    assert first.text.startswith("The model's reasoning passed 65,536 bytes")
    assert second.ok


@pytest.mark.anyio
async def test_a_line_that_never_ends_is_cut(tmp_path: Path) -> None:
    with ScriptedServer([Flood(size=8 * MB, one_line=True), Reply("Here.")]) as server:
        settings = settings_for(tmp_path, server.base_url, max_answer_bytes=LIMIT)
        async with running(settings) as (sup, rec):
            first = await sup.run_turn("Hello.")
            second = await sup.run_turn("Again.")
    assert first.outcome == "answered" and first.text == ""
    assert any("cut at 65,536 bytes" in n.text for n in rec.of(Notice))
    assert second.ok


@pytest.mark.anyio
async def test_a_200_mb_answer_is_held_at_the_default_limit(tmp_path: Path) -> None:
    with ScriptedServer([Flood(size=200 * MB)]) as server:
        async with running(settings_for(tmp_path, server.base_url)) as (sup, _):
            tracemalloc.start()
            try:
                result = await sup.run_turn("Say everything.")
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    assert result.outcome == "answered" and len(result.text) == 4 * MB
    assert peak < 64 * MB, peak  # the answer, its pieces shown, its JSON saved: a few copies


@pytest.mark.slow
def test_harness_p_keeps_its_peak_rss_under_300_mb_for_a_200_mb_answer(
    tmp_path: Path, memory_dir: Path
) -> None:
    """The real process, its peak resident set read from the kernel at its exit.

    The harness is started by a small launcher, not by pytest: a child made with vfork (as
    subprocess and posix_spawn do) carries its parent's high-water mark through exec, so a
    child of a grown pytest would report pytest's peak, not its own."""
    project = tmp_path / "project"
    project.mkdir()
    peak_file = tmp_path / "peak"
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir),
           "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "test"}
    with ScriptedServer([Flood(size=200 * MB)]) as server:
        child = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(peak_file), sys.executable, "-m", "repl",
             "-p", "Say everything.", "--base-url", server.base_url],
            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        read = {name: b"" for name in ("out", "err")}
        readers = [threading.Thread(target=_read_all, args=(stream, read, name))
                   for stream, name in ((child.stdout, "out"), (child.stderr, "err"))]
        for reader in readers:
            reader.start()
        child.wait()
        for reader in readers:
            reader.join(30)
    out, err = read["out"], read["err"].decode()
    assert child.returncode == 0, err
    assert len(out) == 4 * MB + 1  # the answer, cut, and its newline
    assert "The answer was cut at 4,194,304 bytes" in err
    peak_mb = int(peak_file.read_text()) / 1024  # kilobytes on Linux
    print(f"peak RSS of harness -p for a 200 MB answer: {peak_mb:.0f} MB")
    assert peak_mb < 300, peak_mb


# Runs argv[2:] with this process's standard streams, exits with its status, and writes its
# peak RSS (kilobytes, from wait4: that child's own, this small launcher's at most) to argv[1].
_LAUNCHER = """
import os, sys
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _read_all(stream: IO[bytes] | None, into: dict[str, bytes], name: str) -> None:
    assert stream is not None
    with stream:
        into[name] = stream.read()
