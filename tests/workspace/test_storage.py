"""What the workspace store keeps and how big it grows: a changed file kept as a delta of its
earlier version (never a chain), read back exactly, its base kept by a collection; the quota
(the oldest snapshots of other sessions dropped first, a snapshot that cannot fit said once,
never kept); ``--doctor``'s usage per project."""

from __future__ import annotations

import io
import random
import zlib
from pathlib import Path

import anyio
import pytest

from actors.core.config import Settings
from actors.core.events import Event, EventSink, Notice
from actors.core.ids import new_session_id
from actors.store import SessionStore
from actors.workspace import Workspace, open_objects
from actors.workspace._diff import Trees
from actors.workspace._housekeeping import make_room, report
from actors.workspace.keeper import Request, WorkspaceClient, WorkspaceKeeper
from repl.files_report import doctor_snapshots

WORDS = ["def", "class", "return", "value", "result", "data", "items", "path", "name"]


def _text(rng: random.Random, lines: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
            for _ in range(lines)]


def _rows(workspace: Workspace) -> list[tuple[bytes, int, int, bytes | None]]:
    with workspace.objects.db.read() as conn:
        rows = conn.execute("SELECT id, codec, stored, base FROM workspace_objects").fetchall()
    return [(bytes(i), int(c), int(s), bytes(b) if b is not None else None)
            for i, c, s, b in rows]


def test_a_rewritten_file_is_kept_as_a_delta_of_its_first_version(
    tmp_path: Path, memory: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    rng = random.Random(7)
    lines = _text(rng, 3000)  # about 100 KB: 7 segments
    whole = zlib.compress("\n".join(lines).encode(), 6)
    workspace = Workspace(project, memory, open_objects(memory))
    versions = []
    for turn in range(10):
        lines[rng.randrange(len(lines))] = f"changed at turn {turn}"
        lines.insert(rng.randrange(len(lines)), f"inserted at turn {turn}")
        text = "\n".join(lines).encode()
        (project / "big.py").write_bytes(text)
        versions.append((workspace.snapshot().root, text))
    rows = _rows(workspace)
    bases = {base for _i, codec, _s, base in rows if codec == 2}
    deltas = [stored for _i, codec, stored, _b in rows if codec == 2]
    assert len(deltas) == 9 and len(bases) == 1  # every version a delta of the first
    whole_rows = {i for i, codec, _s, _b in rows if codec != 2}
    assert bases <= whole_rows  # never a chain: a base is stored whole
    assert max(deltas) < len(whole) / 10
    trees = Trees(workspace.objects)
    for root, text in versions:  # each reads back exactly
        [(_path, entry)] = list(trees.files(root))
        assert workspace.objects.load(entry.oid) == text
    # A collection that keeps only the last version keeps the base it needs.
    workspace.objects.collect([versions[-1][0]], grace_seconds=-10)
    [(_path, entry)] = list(Trees(workspace.objects).files(versions[-1][0]))
    assert workspace.objects.load(entry.oid) == versions[-1][1]
    assert workspace.objects.stored_bytes() == sum(s for _i, _c, s, _b in _rows(workspace))


def _session(store: SessionStore, project: Path) -> str:
    session = new_session_id()
    store.create_session(session, [{"role": "system", "content": "s"}],
                         project_root=str(project))
    return session


def test_room_is_made_from_the_oldest_snapshots_of_other_sessions_first(
    tmp_path: Path, memory: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    rng = random.Random(3)
    workspace = Workspace(project, memory, open_objects(memory))
    marks = workspace.objects.marks
    for session in ("other", "mine"):
        for turn in range(4):  # new incompressible content: each snapshot adds 20 KB
            (project / "data.bin").write_bytes(rng.randbytes(20_000))
            marks.add(session, "message", turn + 1, workspace.snapshot().root)
    full = workspace.objects.stored_bytes()
    quota = full - 30_000
    room = make_room(workspace.objects, quota, "mine", grace_seconds=-10)
    assert room.fits and room.after <= quota < room.before
    left = [(m.session_id, m.message) for m in marks.of_session("other")]
    assert left and len(left) < 4 and left[-1] == ("other", 4)  # its newest stays
    assert [m.message for m in marks.of_session("mine")] == [1, 2, 3, 4]
    # Past what the other sessions can give, this session's oldest go (never its newest).
    room = make_room(workspace.objects, 1, "mine", grace_seconds=-10)
    assert not room.fits
    assert [m.message for m in marks.of_session("mine")] == [4]
    assert [m.message for m in marks.of_session("other")] == [4]


@pytest.mark.anyio
async def test_a_snapshot_that_does_not_fit_the_quota_is_said_once_and_not_kept(
    tmp_path: Path, memory: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.bin").write_bytes(random.Random(1).randbytes(50_000))
    store = SessionStore(memory)
    session = _session(store, project)
    send, receive = anyio.create_memory_object_stream[Request](8)
    events_send, events_receive = anyio.create_memory_object_stream[Event](16)
    keeper = WorkspaceKeeper(project=project, memory_dir=memory, store=store,
                             session_id=session, events=EventSink(events_send),
                             quota=10_000)
    async with anyio.create_task_group() as tg:
        await tg.start(keeper.run, receive)
        client = WorkspaceClient(send)
        first = await client.snapshot("message")
        (project / "b.bin").write_bytes(random.Random(2).randbytes(50_000))
        second = await client.snapshot("message")
        client.close()
    events_send.close()
    assert first is not None and second is not None
    assert "over their quota of 9.8 KB" in first.unkept and second.unkept
    async with events_receive:
        said = [e.text for e in [e async for e in events_receive] if isinstance(e, Notice)]
    assert len(said) == 1 and said[0].startswith("A workspace snapshot could not be kept")
    assert "--snapshot-quota" in said[0]
    objects = open_objects(memory)
    assert objects.marks.of_session(session) == []  # neither was kept
    objects.close()
    store.close()


def test_doctor_shows_the_snapshots_per_project(tmp_path: Path, memory: Path) -> None:
    store = SessionStore(memory)
    projects = {}
    for name, size in (("small", 1_000), ("large", 40_000)):
        project = tmp_path / name
        project.mkdir()
        (project / "data.bin").write_bytes(random.Random(size).randbytes(size))
        session = _session(store, project)
        workspace = Workspace(project, memory, open_objects(memory))
        workspace.objects.marks.add(session, "message", 1, workspace.snapshot().root)
        workspace.close()
        workspace.objects.close()
        projects[name] = str(project)
    objects = open_objects(memory)
    found = report(objects, store.exists, lambda sid: store.info(sid).project_root)
    objects.close()
    assert [p for p, _size, _n in found.projects] == [projects["large"], projects["small"]]
    out = io.StringIO()
    settings = Settings(memory_dir=memory, sandbox_dir=tmp_path)
    assert doctor_snapshots(settings, repair=False, out=out) == 0
    lines = out.getvalue().splitlines()
    assert "quota 1.0 GB" in lines[0]
    assert lines[1].startswith(f"  {projects['large']}: ") and "(1 session)" in lines[1]
    assert lines[2].startswith(f"  {projects['small']}: ")
    store.close()

