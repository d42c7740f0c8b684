"""An imported session resumes: each peer's fixture imported with the real ``harness --import``
and resumed with ``harness --resume ID -p …`` against the scripted server, which refuses any
request whose tool calls are not paired. The call each peer left running is answered
"interrupted" and never run again (its command would have created a file), and the session
still says where it came from after the resume's checkpoints."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from actors.core.messages import INTERRUPTED_NOTICE
from actors.testing.scripted_server import Reply, ScriptedServer, tool_pairing_errors
from tests.support.clitools import harness

pytestmark = pytest.mark.slow  # every test here starts Python processes

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures" / "peers"
PEERS = {
    "claude-code": ("claude-code/-home-dev-calc/5d1c2a3e-7b4f-4c1d-9e2a-1f0b6c8d4e21.jsonl",
                    "toolu_05"),
    "codex": ("codex/sessions/2026/08/02/"
              "rollout-2026-08-02T09-00-00-0198f3a2-6c1e-7d40-9b8a-2e5f4c3d1a07.jsonl",
              "call_Kx3"),
    "gemini": ("gemini/tmp/calc/chats/session-2026-08-03T08-00-3f2a1b4c.jsonl",
               "write_file-1754208245000-d4"),
}
RECORDED_PROJECT = "/home/dev/calc"  # where the fixtures' sessions ran


def relocated(name: str, tmp_path: Path, project: Path) -> Path:
    """The fixture, its project path made this test's project (Gemini CLI's with the
    ``.project_root`` beside its chats)."""
    relative = Path(PEERS[name][0])
    top = relative.parts[0]
    copy = tmp_path / "peers"
    shutil.copytree(FIXTURES / top, copy / top)
    for file in (copy / top).rglob("*"):
        if file.is_file():
            file.write_text(file.read_text().replace(RECORDED_PROJECT, str(project)))
    return copy / relative


@pytest.mark.parametrize("name", sorted(PEERS))
def test_an_imported_session_resumes_with_every_call_paired(
    name: str, tmp_path: Path, memory_dir: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    project = project.resolve()
    source = relocated(name, tmp_path, project)
    done = harness("--import", str(source), memory_dir=memory_dir, cwd=project)
    assert done.returncode == 0, done.stderr
    [session_id] = re.findall(r"^Imported (\w+) ", done.stdout, re.MULTILINE)
    interrupted = PEERS[name][1]
    with ScriptedServer([Reply("Nothing was run again.")], check_tool_pairing=True) as server:
        result = harness("--resume", session_id, "-p", "What happened to the last command?",
                         "--base-url", server.base_url, memory_dir=memory_dir, cwd=project,
                         env={"OPENAI_API_KEY": "test"})
        assert result.returncode == 0, result.stderr
        assert server.errors == []
        [request] = server.requests
    messages = request["messages"]
    assert tool_pairing_errors(messages) == []
    assert messages[0]["role"] == "system" and "imported from" in messages[0]["content"]
    [answer] = [m["content"] for m in messages
                if m.get("role") == "tool" and m.get("tool_call_id") == interrupted]
    assert answer == INTERRUPTED_NOTICE
    assert messages[-1] == {"role": "user", "content": "What happened to the last command?"}
    assert "Nothing was run again." in result.stdout
    assert not (project / "ran-from-history").exists()  # the interrupted call never re-ran
    info = harness("--info", session_id, memory_dir=memory_dir, cwd=project)
    assert info.returncode == 0
    assert re.search(rf"^Imported: .*{re.escape(str(source))}", info.stdout, re.MULTILINE)
    assert "1 model calls" in info.stdout  # the resumed turn's own usage, apart


@pytest.mark.parametrize("name", sorted(PEERS))
def test_the_import_command_reports_and_is_idempotent(
    name: str, tmp_path: Path, memory_dir: Path
) -> None:
    source = FIXTURES / PEERS[name][0]
    first = harness("--import", str(source), memory_dir=memory_dir)
    assert first.returncode == 0 and first.stderr == "", first.stderr
    assert re.search(r"^Imported \w+ \(.*\): .*, \d+ messages", first.stdout, re.MULTILINE)
    again = harness("--import", str(source), memory_dir=memory_dir)
    assert again.returncode == 0 and again.stdout.startswith("Already present: ")
    listed = harness("--list-sessions", "--all", memory_dir=memory_dir)
    assert listed.returncode == 0 and len(listed.stdout.strip().splitlines()) == 2


def test_hostile_files_in_a_directory_are_one_line_each(tmp_path: Path, memory_dir: Path) -> None:
    folder = tmp_path / "peers"
    folder.mkdir()
    good = (FIXTURES / PEERS["codex"][0]).read_text()
    lines = good.splitlines()
    (folder / "a-garbage.jsonl").write_text("\n".join([lines[0], "{oops", *lines[1:]]))
    (folder / "b-huge.jsonl").write_text(
        "\n".join([lines[0], lines[1].replace('"timestamp":', '"n":' + "9" * 400 + ',"t":')]))
    (folder / "c-types.jsonl").write_text("\n".join([lines[0], '{"timestamp": "x", '
                                                     '"type": "response_item", "payload": 3}']))
    (folder / "z-good.jsonl").write_text(good)
    result = harness("--import", str(folder), memory_dir=memory_dir)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    skipped = result.stderr.strip().splitlines()
    assert [line.split(": line ")[0] for line in skipped] == [
        f"harness: skipped {folder / n}"
        for n in ("a-garbage.jsonl", "b-huge.jsonl", "c-types.jsonl")]
    assert "line 2: not valid JSON" in skipped[0]
    assert "line 2: n is an integer of more than 100 digits" in skipped[1]
    assert "line 2: payload must be an object" in skipped[2]
    assert re.search(r"^Imported \w+ \(.*z-good.jsonl\)", result.stdout, re.MULTILINE)
