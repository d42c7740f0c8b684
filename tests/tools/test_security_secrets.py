"""The harness's secrets are out of its children's reach: the endpoint's key and the store's
password are in no command line, in no environment a tool's process can read (its own, the
harness's initial one, the grep worker's), not in the harness's memory or open files for a
process without CAP_SYS_PTRACE, and never on the screen."""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest

from actors.core.secrets import has_password, redact, url_secrets
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from actors.tools import TOOLS, ToolContext
from repl.cli import main
from tests.support.clitools import REPO
from tests.support.processes import CATASTROPHIC, descendants_running_grep
from tests.support.stores import Stores
from tests.support.tool_context import ToolSession

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

PROBE = REPO / "tests" / "support" / "programs" / "secret_probe.py"
PR_CAPBSET_DROP, CAP_SYS_PTRACE = 24, 19


# -- the password a store URL carries -----------------------------------------------------


@pytest.mark.parametrize(("url", "found"), [
    ("postgresql://u:pw@db/team", ["pw"]),
    ("postgres://u:p%40ss@db:5432/team", ["p%40ss", "p@ss"]),
    ("postgresql://u:pw@[::1/x", ["pw"]),  # libpq refuses it; the password is still known
    ("postgresql://db/team?user=u&password=pw&sslmode=require", ["pw"]),
    ("postgresql://db/team?sslpassword=keypw", ["keypw"]),
    ("host=db password=pw user=u", ["pw"]),
    ("host=db password = 'p w' user=u", ["'p w'", "p w"]),
    ("postgresql://u@db/team", []),
    ("postgresql://db/a:b@c", []),  # a '/' before the '@': no user part
    ("http://localhost:11434/v1", []),
    ("sqlite", []),
])
def test_the_password_of_a_store_url_is_found(url: str, found: list[str]) -> None:
    assert sorted(url_secrets(url)) == sorted(found)
    assert has_password(url) == bool(found)
    shown = redact(f"bad URL {url!r}", url)
    assert not any(secret in shown for secret in found), shown


def test_a_password_on_the_command_line_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["--store", "postgresql://u:hunter2@db/team", "--list-sessions"],
                 ["--store=postgresql://db/team?password=hunter2", "--doctor"],
                 ["--base-url", "http://u:hunter2@127.0.0.1:9/v1", "-p", "hi"]):
        assert main([*argv, "--memory-dir", str(tmp_path / "memory")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("harness: --") and "command line" in err
        assert "hunter2" not in err and "Traceback" not in err
    assert not (tmp_path / "memory").exists()  # refused before anything was opened


@pytest.mark.parametrize("url", [
    "postgresql://u:hunter2%zz@127.0.0.1:9/x",  # libpq: invalid percent-encoded token
    "postgresql://u:hunter2@[::1/x",  # libpq quotes the whole URL
    "host=127.0.0.1 password=hunter2 port=9",  # not a URL
])
def test_a_bad_store_url_from_the_environment_is_one_line_without_its_password(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("psycopg")
    monkeypatch.setenv("AGENT_HARNESS_STORE", url)
    assert main(["--list-sessions", "--memory-dir", str(tmp_path / "memory")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: ") and err.count("\n") == 1, err
    assert "hunter2" not in err


# -- what a tool's process can read ---------------------------------------------------------


def _without_cap_sys_ptrace() -> None:
    """In the harness's child, before exec: CAP_SYS_PTRACE out of its bounding set (root's
    processes would otherwise read any memory: the limit docs/security.md states)."""
    ctypes.CDLL(None).prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0)


def probe_the_harness(
    tmp_path: Path, env: dict[str, str], secret_list: list[str]
) -> tuple[dict[str, Any], str]:
    """Run ``harness -p`` whose one tool call runs the probe; its report, and the export."""
    project, memory = tmp_path / "project", tmp_path / "memory"
    project.mkdir()
    secrets_file = tmp_path / "secrets"  # outside the project, never in a command line
    secrets_file.write_text("\n".join(secret_list) + "\n")
    command = f"{sys.executable} -I {PROBE} {secrets_file}"
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": command})]), Reply("Done.")]
    full_env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory), "PYTHONPATH": str(REPO),
                **env}
    with ScriptedServer(script) as server:
        run = subprocess.run(
            [sys.executable, "-m", "repl", "-p", "probe", "--base-url", server.base_url,
             "--mode", "dangerouslySkipPermissions", "--output-format", "json"],
            cwd=project, env=full_env, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=60,
            preexec_fn=_without_cap_sys_ptrace if os.geteuid() == 0 else None,
        )
        assert run.returncode == 0, run.stderr
        [result] = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
        sent = json.dumps(server.requests)
    export = subprocess.run(
        [sys.executable, "-m", "repl", "--export", json.loads(run.stdout)["session_id"]],
        cwd=project, env=full_env, capture_output=True, text=True, timeout=60,
    )
    assert export.returncode == 0, export.stderr
    assert not any(secret in sent for secret in secret_list)
    assert result.startswith('<tool_result name="run_bash">\nexit status 0\n'), result
    report = json.loads(result.splitlines()[2])
    return report, export.stdout


def with_password(url: str, password: str) -> str:
    """``url`` with ``password`` in its user part (the test server trusts, and ignores it)."""
    parts = urlsplit(url)
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user or 'postgres'}:{password}@{host}"))


@pytest.mark.slow
def test_a_command_reaches_no_secret_of_the_harness(tmp_path: Path, stores: Stores) -> None:
    """The command reads ``/proc/$PPID/environ`` and ``cmdline`` of the harness and of every
    ancestor, the harness's memory and open files, its own environment and descriptors.
    (Before: ``OPENAI_API_KEY=`` and the store URL's password in the harness's environ.)"""
    key, password = f"sk-test-{secrets.token_hex(16)}", f"pw-{secrets.token_hex(12)}"
    env = {"OPENAI_API_KEY": key, "OPENAI_ORG_ID": "org-kept", **stores.env}
    if stores.url is not None:
        env["AGENT_HARNESS_STORE"] = with_password(stores.url, password)
    report, export = probe_the_harness(tmp_path, env, [key, password])

    assert report["own_environment_has_secret"] is False
    assert sorted(report["own_fds"]) == ["0", "1", "2"], report["own_fds"]
    assert report["own_fds"]["0"] == "/dev/null"
    ancestors = report["ancestors"]
    [harness] = [a for a in ancestors if "memory" in a]
    assert ancestors[0] is harness, ancestors  # the command's parent is the harness
    assert " -m repl -p probe " in harness["cmdline"]
    for ancestor in ancestors:
        assert ancestor["cmdline_has_secret"] is False, ancestor
        assert ancestor["environ_has_secret"] is False, ancestor
    # root reads any environ (scrubbed); anyone else is refused the harness's
    assert harness["environ"] == ("read" if os.geteuid() == 0 else "PermissionError")
    if not report["cap_sys_ptrace"]:  # with it, any memory is readable: the stated limit
        assert harness["memory"] == "PermissionError", harness
    assert harness["memory"] != "found" or report["cap_sys_ptrace"]
    assert harness["fds"] in ("PermissionError", "listed")
    assert not harness.get("fd_has_secret"), harness
    assert key not in export and password not in export


def armed(pid: int) -> bool:
    """Whether process ``pid`` has armed its stdin as its lifeline (``O_ASYNC``)."""
    try:
        with open(f"/proc/{pid}/fdinfo/0") as f:
            flags = next(line for line in f if line.startswith("flags:"))
    except (OSError, StopIteration):
        return False
    return bool(int(flags.split()[1], 8) & os.O_ASYNC)


@pytest.mark.anyio
async def test_the_grep_worker_gets_no_secret(
    sandbox: Path, memory_dir: Path, session: ToolSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-secret")
    monkeypatch.setenv("AGENT_HARNESS_STORE", "postgresql://u:pw-worker@db/x")
    (sandbox / "evil.txt").write_text("a" * 60 + "b\n")
    ctx: ToolContext = session.context(sandbox, memory_dir)
    async with anyio.create_task_group() as tg:
        tg.start_soon(TOOLS["grep"].run, ctx, {"pattern": CATASTROPHIC})
        with anyio.fail_after(20):  # until the worker has its request and searches
            while not (workers := [  # noqa: ASYNC110 (nothing to wait on but /proc)
                    pid for pid in descendants_running_grep(os.getpid()) if armed(pid)]):
                await anyio.sleep(0.01)
        environ = Path(f"/proc/{workers[0]}/environ").read_bytes()  # noqa: ASYNC240
        tg.cancel_scope.cancel()
    assert b"PATH=" in environ
    assert b"sk-worker-secret" not in environ and b"pw-worker" not in environ
