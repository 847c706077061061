"""The chromadb index: embedded (PersistentClient) and a real ``chroma run`` server, including
the server going away mid-session."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from aider_gardener.store import Store, worker
from aider_gardener.store.recall import recall
from aider_gardener.store.vectors import VectorIndex, open_index, parse_url, server_collection_name
from aider_gardener.types import Source

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

DOCS = {
    "aaaa": "The deploy script pushes container images to the registry every night.",
    "bbbb": "TypeError: unsupported operand type(s) for +: 'int' and 'str' in parse_config",
    "cccc": "Grandma's tomato soup needs fresh basil and a pinch of sugar.",
}


def _add_docs(index: VectorIndex) -> None:
    ids = list(DOCS)
    index.add([f"{i}:0" for i in ids], ids, [DOCS[i] for i in ids])


def vector_warnings(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("aider_gardener.store.vectors") and r.levelno >= logging.WARNING
    ]


# --- embedded ---------------------------------------------------------------------------------


@pytest.fixture
def index(tmp_path):
    idx = open_index(tmp_path / "gs")
    assert idx is not None
    yield idx
    idx.close()


def test_query_finds_by_meaning_with_cosine_similarity(index):
    _add_docs(index)
    assert index.count() == 3
    hits = index.query("how do we ship docker builds?", k=3)
    assert [h[1] for h in hits][0] == "aaaa"
    assert hits[0][0] == "aaaa:0"
    sims = [h[2] for h in hits]
    assert sims == sorted(sims, reverse=True)
    assert all(-1.0 <= s <= 1.0 for s in sims)
    assert sims[0] > 0.3 > sims[-1]


def test_entry_filter_and_delete(index):
    _add_docs(index)
    hits = index.query("docker images registry", k=3, entry_filter=["cccc"])
    assert [h[1] for h in hits] == ["cccc"]
    assert index.query("anything", k=3, entry_filter=[]) == []
    index.delete_entries(["aaaa"])
    assert index.count() == 2
    assert "aaaa" not in [h[1] for h in index.query("docker images registry", k=3)]


def test_upsert_makes_adding_twice_harmless(index):
    _add_docs(index)
    _add_docs(index)  # e.g. embedded, then killed before the chunks were marked done
    assert index.count() == 3


def test_vectors_persist_in_the_store_folder(tmp_path):
    first = open_index(tmp_path / "gs")
    _add_docs(first)
    first.close()
    assert (tmp_path / "gs" / "chroma").is_dir()
    again = open_index(tmp_path / "gs")
    try:
        assert again.count() == 3
        assert again.query("tomato soup recipe", k=1)[0][1] == "cccc"
    finally:
        again.close()


def test_blank_query_and_zero_k_return_nothing(index):
    _add_docs(index)
    assert index.query("   ", k=5) == []
    assert index.query("docker", k=0) == []


def test_only_one_process_writes_embedded_chroma(tmp_path):
    a = open_index(tmp_path / "gs")
    b = open_index(tmp_path / "gs")
    try:
        assert a.can_write()
        assert not b.can_write()
        a.release_writer()
        assert b.can_write()
    finally:
        a.close()
        b.close()


def test_backend_errors_degrade_and_log_once(caplog):
    def broken():
        raise ConnectionRefusedError("no server here")

    idx = VectorIndex(broken, "gardener", "http://127.0.0.1:9")
    with caplog.at_level(logging.WARNING):
        assert idx.query("anything", 5) == []
        assert idx.query("anything again", 5) == []
        idx.add(["x:0"], ["x"], ["text"])
        idx.delete_entries(["x"])
        assert idx.count() == 0
    assert idx.healthy is False
    assert len(vector_warnings(caplog)) == 1
    assert "full-text search only" in vector_warnings(caplog)[0]
    assert idx.probe() is False


def test_open_index_without_chromadb_says_so_and_returns_none(tmp_path, monkeypatch, caplog):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "chromadb" else real(name, *a)
    )
    with caplog.at_level(logging.WARNING):
        assert open_index(tmp_path / "gs") is None
    assert vector_warnings(caplog) == [
        "gardener: no vectors (chromadb is not installed); recall uses full-text search only"
    ]


def test_parse_url():
    assert parse_url("http://127.0.0.1:8123") == ("127.0.0.1", 8123, False)
    assert parse_url("https://chroma.example.org") == ("chroma.example.org", 443, True)
    assert parse_url("localhost:9000") == ("localhost", 9000, False)
    assert parse_url("http://box") == ("box", 8000, False)
    with pytest.raises(ValueError):
        parse_url("ftp://box:21")


def test_server_collection_names_are_per_project(tmp_path):
    a = server_collection_name(tmp_path / "one" / "app" / ".aider.gardener")
    b = server_collection_name(tmp_path / "two" / "app" / ".aider.gardener")
    assert a != b
    assert a.startswith("gardener-app-")
    assert a == server_collection_name(tmp_path / "one" / "app" / ".aider.gardener")
    assert all(c.isalnum() or c in "-_" for c in a) and 3 <= len(a) <= 63


def test_bad_url_gives_no_index(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        assert open_index(tmp_path / "gs", "ftp://nowhere") is None
    assert len(vector_warnings(caplog)) == 1


# --- a real Chroma server -------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chroma_cli() -> Path:
    cli = Path(sys.executable).parent / "chroma"
    if not cli.exists():
        pytest.skip("the chroma CLI is not installed next to python")
    return cli


class ChromaServer:
    def __init__(self, path: Path, port: int) -> None:
        self.path, self.port = path, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self, wait: float = 180.0) -> None:
        self.proc = subprocess.Popen(
            [str(_chroma_cli()), "run", "--path", str(self.path), "--host", "127.0.0.1"]
            + ["--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chroma run exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("chroma run did not answer its heartbeat")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def server(tmp_path):
    srv = ChromaServer(tmp_path / "server-data", _free_port())
    srv.start()
    yield srv
    srv.kill()


def test_server_mode_indexes_and_queries(tmp_path, server):
    idx = open_index(tmp_path / "proj" / ".aider.gardener", server.url)
    assert idx is not None and idx.where == server.url
    _add_docs(idx)
    assert idx.count() == 3
    assert idx.query("tomato soup recipe", k=1)[0][1] == "cccc"
    assert not (tmp_path / "proj" / ".aider.gardener" / "chroma").exists()  # nothing local
    assert idx.can_write()  # a server serializes writers itself: no lock file needed


def _indexed(store) -> int:
    return store.read(
        lambda c: c.execute("SELECT count(*) FROM chunks WHERE embedded = 1").fetchone()[0]
    )


def test_store_survives_the_server_going_away(tmp_path, server, caplog, monkeypatch):
    monkeypatch.setattr(worker, "PROBE_INTERVAL", 3600.0)  # only drain() may find it back
    store = Store(tmp_path / "gs", chroma_url=server.url)
    try:
        assert store.vectors is not None
        for text in DOCS.values():
            store.ingest(text, Source(role="tool", command="echo"))
        store.drain(120)  # whatever the background worker has not embedded yet
        assert store.pending_count() == 0
        indexed = _indexed(store)  # the three outputs, and the gist of the one that failed
        assert store.vectors.count() == indexed == 4
        hits = recall(store, "how do we ship docker builds?")
        assert hits and "vector" in hits[0].via

        server.kill()
        with caplog.at_level(logging.WARNING):
            hits = recall(store, "parse_config TypeError")  # must not raise
            again = recall(store, "parse_config TypeError")
        assert hits and hits[0].text.startswith("TypeError")
        assert hits[0].via == "fts"
        assert [h.entry_id for h in again] == [h.entry_id for h in hits]
        assert store.vectors.healthy is False
        assert len(vector_warnings(caplog)) == 1

        late = store.ingest("A note written while the server was down.", Source(role="user"))
        assert store.drain(5) == 0  # nothing can be embedded: stays pending
        assert store.pending_count() >= 1
        assert recall(store, "note written while the server was down")[0].entry_id == late.id

        server.start()  # same data folder and port: the server comes back
        assert store.drain(120) == 1  # drain probes, finds it back, embeds the backlog
        assert store.vectors.healthy is True
        assert store.pending_count() == 0
        assert store.vectors.count() == _indexed(store) == indexed + 1
        hits = recall(store, "how do we ship docker builds?")
        assert "vector" in hits[0].via
    finally:
        store.close()


def test_a_dead_server_is_named_not_the_embedding_model(tmp_path, caplog):
    """A ``--gardener-chroma-url`` nothing answers at: the lines name that URL (the worker's
    note blamed the embedding model: "could not be loaded (vector store unavailable)")."""
    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    with caplog.at_level(logging.WARNING):
        store = Store(tmp_path / "gs", chroma_url=url)
        try:
            note = store.ingest("A note about the config parser.", Source(role="user"))
            said: list[str] = []
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                said += [n for n in worker.take_notes(store) if "loading the embedding" not in n]
                if said:
                    break
                time.sleep(0.1)
            assert len(said) == 1, said
            assert f"the Chroma server at {url} does not answer" in said[0]
            assert "could not be loaded" not in said[0] and "embedding model" not in said[0]
            hits = recall(store, "config parser")
            assert hits[0].entry_id == note.id and hits[0].via == "fts"
        finally:
            store.close()
    warned = vector_warnings(caplog)
    assert len(warned) == 1 and url in warned[0] and "--gardener-chroma-url" in warned[0]


# --- issue 15: the query embedding ------------------------------------------------------------


def test_a_prefetched_query_is_embedded_once_and_found_the_same(index, monkeypatch):
    from aider_gardener.store import embeddings

    _add_docs(index)
    expected = index.query("how do we ship docker builds?", k=3)
    calls: list[list[str]] = []
    real = embeddings.embed_query

    def counting(text):
        calls.append([text])
        return real(text)

    monkeypatch.setattr(embeddings, "embed_query", counting)
    assert index.ready
    assert index.prefetch("which soup needs basil?")
    first = index.query("which soup needs basil?", k=3)
    again = index.query("which soup needs basil?", k=3)
    assert first == again and first[0][1] == "cccc"
    assert calls == [["which soup needs basil?"]]  # the prefetch's, nothing more
    assert index.query("how do we ship docker builds?", k=3) == expected  # cached earlier
    assert len(calls) == 1


def test_a_long_query_is_embedded_from_its_head(index, monkeypatch):
    from aider_gardener.store import embeddings
    from aider_gardener.store.vectors import QUERY_EMBED_CHARS

    _add_docs(index)
    head = "why does parse_config raise TypeError for int and str? "
    long_query = head + "x" * (QUERY_EMBED_CHARS * 3)
    seen: list[str] = []
    real = embeddings.embed_query
    monkeypatch.setattr(embeddings, "embed_query", lambda text: seen.append(text) or real(text))
    hits = index.query(long_query, k=3)
    assert hits[0][1] == "bbbb"
    assert seen == [long_query[:QUERY_EMBED_CHARS]]


def test_an_index_that_is_not_open_yet_is_not_ready_and_prefetches_nothing(tmp_path):
    idx = open_index(tmp_path / "gs")
    try:
        assert not idx.ready  # nothing opened: a query now would open chromadb in the caller
        assert idx.prefetch("anything") is False
    finally:
        idx.close()


def test_a_search_started_soon_finds_what_a_query_finds(index):
    """``query_soon`` is ``query`` on the query thread (per-turn recall waits for it only until
    its deadline): the same chunks, whether the query's vector was in flight, cached or new;
    excluded entries stay out."""
    _add_docs(index)
    asked = "which soup needs basil?"
    expected = index.query(asked, k=3)
    assert expected[0][1] == "cccc"
    index._query_cache.clear()
    soon = index.query_soon(asked, 3)  # the embedding is in flight: searched when it lands
    assert soon is not None and soon.result(timeout=60) == expected
    cached = index.query_soon(asked, 3)  # the vector is cached: searched on the pool
    assert cached is not None and cached.result(timeout=60) == expected
    left_out = index.query_soon(asked, 3, exclude=["cccc"])
    assert left_out is not None
    assert [h[1] for h in left_out.result(timeout=60)] == [h[1] for h in expected if h[1] != "cccc"]


def test_a_search_is_not_started_before_the_index_is_ready(tmp_path):
    idx = open_index(tmp_path / "gs")
    try:
        assert idx.query_soon("anything", 3) is None  # full text answers meanwhile
    finally:
        idx.close()


def test_chromadb_opens_without_the_grpc_tracing_exporter(tmp_path):
    """Issue 15 (a session's RSS): chromadb's OpenTelemetry gRPC exporter (grpc, protobuf:
    ~11 MB) is imported only if tracing really constructs it."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys; from pathlib import Path;"
        " from aider_gardener.store import runtime, vectors;"
        " client = vectors._persistent_client(Path(sys.argv[1]));"
        " client.get_or_create_collection('probe-collection').count();"
        " before = 'grpc' in sys.modules;"
        " exporter = sys.modules[runtime._OTLP_EXPORTER].OTLPSpanExporter("
        "endpoint='http://127.0.0.1:9', insecure=True);"
        " print(json.dumps({'grpc_before': before, 'grpc_after': 'grpc' in sys.modules,"
        " 'exporter': type(exporter).__name__}))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "chroma")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == {"grpc_before": False, "grpc_after": True, "exporter": "OTLPSpanExporter"}
