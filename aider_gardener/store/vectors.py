"""The vector side of recall: chunk embeddings in chromadb, queried by cosine similarity.

Embedded chromadb (``PersistentClient`` in ``.aider.gardener/chroma``) by default; with
``--gardener-chroma-url http://HOST:PORT`` a Chroma server holds the vectors instead, so a team
or a bigger machine can keep them. Embeddings are always computed here, by the packaged MiniLM
model, and passed to chromadb explicitly: chromadb's default embedding function would try to
download a model.

Vectors are an accelerator, never a dependency. Every chromadb or connection error marks the index
unhealthy, logs one line, and makes ``query`` return ``[]``, so recall carries on with FTS5 alone;
the embedding worker leaves chunks pending and calls ``probe`` now and then, which brings a
restarted server back into use. A missing model or chromadb is permanent for the process and
``open_index`` returns ``None`` for it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

from . import embeddings, model_choice
from .embeddings import EmbeddingsUnavailable
from .runtime import import_chromadb

log = logging.getLogger(__name__)

COLLECTION_ENV = "GARDENER_CHROMA_COLLECTION"
EMBEDDED_COLLECTION = "gardener"
# A Chroma server must answer within these, or recall would hang with it (httpx's default in
# chromadb is no timeout at all).
CONNECT_TIMEOUT = 2.0
REQUEST_TIMEOUT = 10.0
_QUERY_MAX = 1000
QUERY_CACHE = 32  # query embeddings kept (see ``_query_vector``)
# A query is embedded from its first 512 characters (~130 word pieces of English): the cost of
# one embedding grows with its length (decision 090), and full-text search reads only the first
# 24 terms of a request anyway. Questions (LoCoMo, the replay probes) are far shorter: unchanged.
QUERY_EMBED_CHARS = 512


class VectorIndex:
    """Chunk vectors of one project. Thread-safe; no method raises for chromadb trouble."""

    def __init__(
        self,
        connect: Callable[[], Any],
        collection: str,
        where: str,
        writer_lock: Path | None = None,
        server: bool = False,
    ) -> None:
        self._connect = connect
        self.server = server  # a Chroma server (``where`` is its URL), not a local folder
        self.last_error: str | None = None  # the backend's last failure, for messages
        self._writer_lock = writer_lock
        self._writer_fd: int | None = None  # held flock, or _NO_LOCKING where flock is missing
        self._writer_mutex = threading.Lock()
        self.collection_name = collection
        self.where = where  # for messages: a folder or a URL
        self._client: Any = None
        self._collection: Any = None
        self._lock = threading.Lock()
        self.healthy = True
        self.permanent_failure: str | None = None
        self._warned = False
        self._query_cache: OrderedDict[str, Any] = OrderedDict()
        self._query_lock = threading.Lock()
        # Query embeddings run on long-lived threads: starting a thread per request blocked in
        # Thread.start() on a loaded machine (decision 090). Two, so a late query never queues
        # the next one.
        self._query_pool: ThreadPoolExecutor | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def warm(self) -> bool:
        """Load the model and open the collection now (the worker does this on start, so the
        first recall does not pay for it). False when vectors are unusable."""
        try:
            embeddings.load()
        except EmbeddingsUnavailable as err:
            self._fail_permanently(str(err))
            return False
        return self._open() is not None

    def probe(self) -> bool:
        """Is the backend reachable again? Re-enables an index that lost its server."""
        if self.permanent_failure:
            return False
        try:
            with self._lock:
                if self._client is None:
                    self._collection = None
                client = self._client or self._connect()
                client.heartbeat()
                self._client = client
                if self._collection is None:
                    self._collection = self._get_collection(client)
        except Exception as err:  # noqa: BLE001 - still down
            self._unhealthy(err)
            return False
        if not self.healthy:
            log.warning("gardener: %s is back; recall uses vectors again", self._backend())
            self._warned = False
        self.healthy = True
        self.last_error = None
        return True

    def _backend(self) -> str:
        if self.server:
            return f"Chroma server {self.where} (--gardener-chroma-url)"
        return f"vector store at {self.where}"

    def describe_failure(self) -> str:
        """Why vectors do not answer, naming what failed: the model, or the server or folder
        that holds the vectors (a dead ``--gardener-chroma-url`` was reported as a model that
        could not be loaded)."""
        if self.permanent_failure:
            return f"the embedding model could not be loaded ({self.permanent_failure})"
        error = f" ({self.last_error})" if self.last_error else ""
        if self.server:
            return f"the Chroma server at {self.where} does not answer{error}"
        return f"the vector store at {self.where} could not be opened{error}"

    def can_write(self) -> bool:
        """Embedded chromadb is not safe with two writing processes, so the first gardener on a
        project holds a lock file and embeds; the others only query. The embedding queue is in
        the shared SQLite file, so the writer also embeds what the other sessions ingest."""
        if self._writer_lock is None or self._writer_fd is not None:
            return True
        with self._writer_mutex:  # the worker thread and drain() may ask at the same moment
            if self._writer_fd is None:
                self._writer_fd = _try_lock(self._writer_lock)
            return self._writer_fd is not None

    def release_writer(self) -> None:
        """Let another session become the writer (the worker calls this when it stops)."""
        with self._writer_mutex:
            if self._writer_fd is not None and self._writer_fd >= 0:
                os.close(self._writer_fd)  # closing the descriptor releases the flock
            self._writer_fd = None

    def close(self) -> None:
        with self._query_lock:
            pool, self._query_pool = self._query_pool, None
        if pool is not None:
            pool.shutdown(wait=False)  # a queued query still resolves its future
        with self._lock:
            self._collection = None
            self._client = None
        self.release_writer()

    # --- the interface recall and the worker use -------------------------------------------

    def add(
        self,
        chunk_ids: Sequence[str],
        entry_ids: Sequence[str],
        texts: Sequence[str],
        between: Callable[[], None] | None = None,
    ) -> None:
        """Embed and upsert chunks. Upsert, not add: a chunk embedded just before a crash (and so
        still pending in SQLite) is simply written again. Errors other than chromadb's or a
        missing model propagate, so the worker can mark just those chunks failed. ``between``
        runs before each forward pass (the worker pauses or stops there; what it raises
        propagates and nothing is written)."""
        if not chunk_ids or not self.healthy:
            return
        try:
            vectors = embeddings.embed_array(list(texts), between=between)
        except EmbeddingsUnavailable as err:
            self._fail_permanently(str(err))
            return
        col = self._open()
        if col is None:
            return
        if between is not None:
            # chromadb's upsert holds the GIL for its whole call (a fixed cost, decision 089):
            # every Python thread stops meanwhile, so it waits for the foreground too
            between()
        try:
            col.upsert(
                ids=list(chunk_ids),
                embeddings=vectors,
                metadatas=[{"entry_id": e} for e in entry_ids],
            )
        except Exception as err:  # noqa: BLE001 - any backend failure: degrade to FTS5
            self._unhealthy(err)

    def query(
        self,
        text: str,
        k: int,
        entry_filter: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
    ) -> list[tuple[str, str, float]]:
        """The k chunks nearest to ``text``: (chunk_id, entry_id, cosine similarity), best first.
        ``entry_filter`` restricts the search to those entries; ``exclude`` leaves entries out
        (forgotten ones: filtered by chromadb, their chunks would otherwise take up the k slots
        and push live entries out of the ranking)."""
        text = text[:QUERY_EMBED_CHARS]
        if k <= 0 or not text.strip() or (entry_filter is not None and not entry_filter):
            return []
        col = self._open()
        if col is None:
            return []
        try:
            vector = self._query_vector(text)
        except EmbeddingsUnavailable as err:
            self._fail_permanently(str(err))
            return []
        clauses = []
        if entry_filter is not None:
            clauses.append({"entry_id": {"$in": list(entry_filter)}})
        if exclude:
            clauses.append({"entry_id": {"$nin": list(exclude)}})  # codespell:ignore nin
        where = clauses[0] if len(clauses) == 1 else ({"$and": clauses} if clauses else None)
        try:
            res = col.query(
                query_embeddings=vector,
                n_results=min(k, _QUERY_MAX),
                where=where,
                include=["distances", "metadatas"],
            )
        except Exception as err:  # noqa: BLE001
            self._unhealthy(err)
            return []
        ids = (res.get("ids") or [[]])[0]
        metas = (res.get("metadatas") or [[]])[0]
        dists = (res.get("distances") or [[]])[0]
        return [
            (cid, (meta or {}).get("entry_id") or cid.rsplit(":", 1)[0], 1.0 - float(dist))
            for cid, meta, dist in zip(ids, metas, dists)
        ]

    @property
    def ready(self) -> bool:
        """Model loaded and collection open: a query now costs one embedding, not a load.
        Recall uses full-text search alone until then rather than wait for the worker."""
        return (
            self.healthy
            and not self.permanent_failure
            and self._collection is not None
            and embeddings.loaded()
        )

    def prefetch(self, text: str) -> bool:
        """Start embedding query ``text`` in a thread of its own, so that the request's other
        gardener work (ingest, eviction, full-text search) runs meanwhile on the other core;
        ``query`` with the same text then waits for it, or finds it done. Only when the index
        is ``ready`` (never starts a load). Returns whether the vector is on its way."""
        text = text[:QUERY_EMBED_CHARS]
        if not text.strip() or not self.ready:
            return False
        with self._query_lock:
            if text in self._query_cache:
                return True
            future: Future = Future()
            self._remember(text, future)

        def run() -> None:
            try:
                future.set_result(embeddings.embed_query(text))
            except BaseException as err:  # noqa: BLE001 - handed to whoever waits
                future.set_exception(err)

        with self._query_lock:
            if self._query_pool is None:
                self._query_pool = ThreadPoolExecutor(2, thread_name_prefix="gardener-query")
            pool = self._query_pool
        try:
            pool.submit(run)
        except RuntimeError:  # closed meanwhile: ``query`` embeds in its own thread
            with self._query_lock:
                self._query_cache.pop(text, None)
            return False
        return True

    def query_soon(self, text: str, k: int, exclude: Sequence[str] = ()) -> Future | None:
        """``query`` off the caller's thread: the search runs on the query thread as soon as the
        query's embedding lands (``prefetch``), so per-turn recall waits for the whole vector
        half, search included, only until its deadline, and never holds a thread of its own
        while it waits. None when the index is not ``ready``."""
        text = text[:QUERY_EMBED_CHARS]
        if not self.prefetch(text):
            return None
        result: Future = Future()

        def search(_: Any = None) -> None:
            try:
                result.set_result(self.query(text, k, exclude=exclude))
            except BaseException as err:  # noqa: BLE001 - handed to whoever waits
                result.set_exception(err)

        with self._query_lock:
            cached = self._query_cache.get(text)
            pool = self._query_pool
        if isinstance(cached, Future) and not cached.done():
            cached.add_done_callback(search)  # on the thread that embedded it
            return result
        try:
            if pool is None:
                raise RuntimeError("no query thread")
            pool.submit(search)
        except RuntimeError:  # closed meanwhile
            return None
        return result

    def wait_query_vector(self, text: str, timeout: float) -> bool:
        """Start embedding query ``text`` (``prefetch``) and wait at most ``timeout`` seconds
        for it: True when ``query`` with that text will not embed (the vector is cached). A
        vector that comes later is still cached when it comes."""
        if not self.prefetch(text):
            return False
        with self._query_lock:
            cached = self._query_cache.get(text[:QUERY_EMBED_CHARS])
        if not isinstance(cached, Future):
            return cached is not None
        try:
            cached.result(timeout=max(0.0, timeout))
        except Exception:  # noqa: BLE001 - too late, or failed: ``query`` finds out itself
            return False
        return True

    def _query_vector(self, text: str) -> Any:
        """The query's embedding, cached: the same request is recalled for RAG, for ``/tokens``'
        preview and again on a retry, and ``prefetch`` may have started it. One embedding is
        tens of milliseconds of one core (decision 090)."""
        with self._query_lock:
            cached = self._query_cache.get(text)
            if cached is not None:
                self._query_cache.move_to_end(text)
        if isinstance(cached, Future):
            try:
                return cached.result()
            except Exception:
                with self._query_lock:
                    if self._query_cache.get(text) is cached:
                        del self._query_cache[text]
                raise
        if cached is not None:
            return cached
        vector = embeddings.embed_query(text)
        with self._query_lock:
            self._remember(text, vector)
        return vector

    def _remember(self, text: str, value: Any) -> None:
        self._query_cache[text] = value  # the caller holds _query_lock
        self._query_cache.move_to_end(text)
        while len(self._query_cache) > QUERY_CACHE:
            self._query_cache.popitem(last=False)

    def delete_entries(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        col = self._open()
        if col is None:
            return
        try:
            col.delete(where={"entry_id": {"$in": list(ids)}})
        except Exception as err:  # noqa: BLE001
            self._unhealthy(err)

    def count(self) -> int:
        col = self._open()
        if col is None:
            return 0
        try:
            return int(col.count())
        except Exception as err:  # noqa: BLE001
            self._unhealthy(err)
            return 0

    # --- internals ----------------------------------------------------------------------------

    def _open(self) -> Any:
        if not self.healthy or self.permanent_failure:
            return None
        if self._collection is not None:
            return self._collection
        with self._lock:
            if self._collection is None:
                try:
                    self._client = self._connect()
                    self._collection = self._get_collection(self._client)
                except Exception as err:  # noqa: BLE001
                    self._client = None
                    self._unhealthy(err)
                    return None
            return self._collection

    def _get_collection(self, client: Any) -> Any:
        return client.get_or_create_collection(
            self.collection_name,
            configuration={"hnsw": {"space": "cosine"}},
            metadata={"model": model_choice.active_name()},
            embedding_function=None,
        )

    def _unhealthy(self, err: BaseException) -> None:
        self.healthy = False
        self._client = None
        self._collection = None
        self.last_error = f"{type(err).__name__}: {_first_line(err)}"
        if not self._warned:
            self._warned = True
            what, until = (
                ("does not answer", "until it does") if self.server else ("failed", "only")
            )
            log.warning(
                "gardener: %s %s (%s); recall uses full-text search %s",
                self._backend(),
                what,
                self.last_error,
                until,
            )

    def _fail_permanently(self, reason: str) -> None:
        self.permanent_failure = reason
        self.healthy = False
        if not self._warned:
            self._warned = True
            log.warning("gardener: no vectors (%s); recall uses full-text search only", reason)


def open_index(store_dir: Path, chroma_url: str | None = None) -> VectorIndex | None:
    """The project's vector index, or None (after one log line) when chromadb, torch or the
    model is not installed. Cheap: the model and the client are opened on first use."""
    try:
        if importlib.util.find_spec("chromadb") is None:
            raise EmbeddingsUnavailable("chromadb is not installed")
        model = model_choice.choose(store_dir)
        embeddings.check_available()
        embeddings.set_cache_dir(store_dir)  # the ONNX export: the user's cache, else here
        if chroma_url:
            host, port, ssl = parse_url(chroma_url)
            name = os.environ.get(COLLECTION_ENV) or server_collection_name(store_dir)
            name = model_choice.collection_name(name, model)
            return VectorIndex(lambda: _http_client(host, port, ssl), name, chroma_url, server=True)
        path = Path(store_dir) / "chroma"
        name = os.environ.get(COLLECTION_ENV) or EMBEDDED_COLLECTION
        name = model_choice.collection_name(name, model)
        lock = Path(store_dir) / "chroma.lock"
        return VectorIndex(lambda: _persistent_client(path), name, str(path), writer_lock=lock)
    except (EmbeddingsUnavailable, ValueError) as err:
        log.warning("gardener: no vectors (%s); recall uses full-text search only", err)
        return None


_NO_LOCKING = -1


def _try_lock(path: Path) -> int | None:
    """An open descriptor holding an exclusive flock on ``path``, or None if another process
    holds it (or the file cannot be created)."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; a single session is the common case
        return _NO_LOCKING
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def parse_url(url: str) -> tuple[str, int, bool]:
    """``http://HOST:PORT`` -> (host, port, ssl); a bare ``HOST:PORT`` means http."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not a Chroma server URL: {url!r} (expected http://HOST:PORT)")
    ssl = parts.scheme == "https"
    return parts.hostname, parts.port or (443 if ssl else 8000), ssl


def server_collection_name(store_dir: Path) -> str:
    """One collection per project on a shared server: the project folder's name (readable in
    the server's listing) plus a hash of its path (two checkouts named "app" stay apart)."""
    root = Path(store_dir).resolve().parent
    slug = re.sub(r"[^a-zA-Z0-9_-]+", "-", root.name).strip("-_")[:40] or "project"
    digest = hashlib.blake2b(str(root).encode("utf-8", "replace"), digest_size=4).hexdigest()
    return f"gardener-{slug}-{digest}"


def _settings():
    import_chromadb()
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def _persistent_client(path: Path) -> Any:
    chromadb = import_chromadb()

    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=_settings())


def _http_client(host: str, port: int, ssl: bool) -> Any:
    chromadb = import_chromadb()
    import httpx

    client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=_settings())
    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):
        session.timeout = httpx.Timeout(REQUEST_TIMEOUT, connect=CONNECT_TIMEOUT)
    return client


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else ""
