"""The gardener as an MCP server: the project's store, over stdio, for any MCP client.

    gardener-mcp [--root DIR] [--store PATH] [--no-vectors] [--chroma-url URL]

It serves the store an Aider session in the same repository uses (``<git root>/.aider.gardener/``,
found as ``clients/project.py`` says), so an output Aider stored can be recalled from Claude Code
and the other way round. Tools (``TOOLS``): ``recall``, ``expand``, ``forget``, ``pin``,
``checkpoint``, ``context_pressure``. It is the process that lives as long as the client, beside
hooks that live for one event: it preloads the embedding model (recall is full-text until then)
and drains the embedding queue the hooks leave. Clients wait for the handshake before their first
request, so ``_Front`` answers it from constants before the ``mcp`` library and the store load.
Never crash: bad input or an unusable store is a one-line tool error, and only the MCP protocol
goes to stdout (fd 1 points at stderr before anything loads).

Usage, tools, start-up and measurements: docs/decisions/023-mcp-server.md
"""

import argparse
import functools
import inspect
import json
import logging
import os
import queue
import re
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO, Callable, NamedTuple

from ..redact import redact, redact_range

if TYPE_CHECKING:  # quoted where used: no __future__ annotations here (FastMCP reads them)
    from ..store.db import Store
    from ..store.recall import RecallHit


log = logging.getLogger(__name__)

SERVER_NAME = "aider-gardener"
ENTRY_ID = re.compile(r"^[a-z2-7]{10}$")
HANDLE = re.compile(r"^(?:id=)?([a-z2-7]{10})\]?$")
RECALL_LIMIT = 5
MAX_RECALL_LIMIT = 20
PAGE_CHARS = 20_000  # one expand page: ~5k tokens, a size a model's context takes in stride
MAX_PAGE_CHARS = 200_000
FULL_CHARS = PAGE_CHARS  # per hit with full=True; the rest through expand
FULL_TOTAL_CHARS = 3 * PAGE_CHARS  # all hits' originals together: a reply stays ~15k tokens
MATCH_LINES = 3
MATCH_CHARS = 200
MATCH_SCAN_LINES = 300  # lines looked at per query term (see _matching_lines)
SCAN_CHARS = 4_000_000  # matching lines are looked for in this much of an original
REOPEN_AFTER = 2.0  # seconds between attempts to reopen a store that was unusable
SIGNAL_WAIT = 0.05  # seconds a signal's exit waits for an open under way
# Seconds after ``initialize`` before the library loads and the store opens, unless a request
# needs them sooner: that work is seconds of CPU, and the client is still starting meanwhile
# (``claude -p`` sends its first request well after the handshake, the later the busier the
# cores).
SETTLE = 1.5

INSTRUCTIONS = (
    "aider-gardener keeps every large tool output of this project in a local store, compressed,"
    " under a 10-letter id (shown as `id=...` or `[full output stored: id=...]`). Use `recall`"
    " to search it by words, identifiers, paths or error codes (and by meaning once the"
    " embedding model is loaded), `expand` to read an original in full, `pin` to keep one,"
    " `forget` to hide one, `checkpoint` to save the session's facts before a long task or a"
    " compaction, and `context_pressure` to see how full the context and the store are."
)


# The tools as clients see them: their descriptions, arguments and hints, in one place. FastMCP
# builds the tools from ``build_server``'s signatures, which take their descriptions from here;
# ``tool_list`` renders the same table as FastMCP lists it, for the front to answer ``tools/list``
# before the library has loaded (``test_the_front_answers_as_the_library_does`` holds the two
# equal, so a change here or in a signature that is not made in both fails there).
_REQUIRED = object()


class _Arg(NamedTuple):
    name: str
    kind: str  # JSON schema type
    description: str
    default: Any = _REQUIRED
    nullable: bool = False


class _Tool(NamedTuple):
    description: str
    args: tuple[_Arg, ...]
    annotations: dict[str, bool]
    dict_result: bool = True  # returns a dict: FastMCP declares an object output schema


_READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
_WRITES = {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}
_DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}
_ID = _Arg("id", "string", "the entry id")

TOOLS: dict[str, _Tool] = {
    "recall": _Tool(
        "Search the project's stored tool outputs, errors and conversation (full-text and"
        " by meaning): ids, class, score, token cost, summary and the matching lines; a"
        " request, its reply and the run's output come as one hit (exchange).",
        (
            _Arg("query", "string", "words, identifiers, paths, error codes, or entry ids"),
            _Arg(
                "class",
                "string",
                "only these content classes, comma separated: log, code, structured, prose,"
                " error, prompt, edit",
                None,
                nullable=True,
            ),
            _Arg("limit", "integer", "hits to return (1-20)", RECALL_LIMIT),
            _Arg(
                "full",
                "boolean",
                "include each hit's original (long ones cut; see expand)",
                False,
            ),
        ),
        _READ_ONLY,
    ),
    "expand": _Tool(
        "The full original text of a stored entry, exactly as stored but for secrets"
        " (keys, tokens, passwords: redacted); long ones in pages (pass next_offset as"
        " offset for the next page).",
        (
            _ID._replace(description="the entry id, e.g. t5ifzcaz3j"),
            _Arg("offset", "integer", "first character to return", 0),
            _Arg("length", "integer", "characters per page", PAGE_CHARS),
        ),
        _READ_ONLY,
        dict_result=False,
    ),
    "forget": _Tool(
        "Hide a stored entry and every stored copy of it from recall and expand"
        " (undo=true brings them back).",
        (_ID, _Arg("undo", "boolean", "restore instead", False)),
        _DESTRUCTIVE,
    ),
    "pin": _Tool(
        "Pin a stored entry: never evicted, never expires (undo=true unpins).",
        (_ID, _Arg("undo", "boolean", "unpin instead", False)),
        _WRITES,
    ),
    "checkpoint": _Tool(
        "Save a verified checkpoint of the session's facts (files, errors, decisions, next"
        " steps) as markdown next to the store; Aider's /resume can load it.",
        (_Arg("note", "string", "a note to keep with it", None, nullable=True),),
        _WRITES,
    ),
    "context_pressure": _Tool(
        "How full the context and the store are: entries and tokens stored vs summarized"
        " (this session and the project), eviction candidates, the client's last context"
        " usage when known.",
        (),
        _READ_ONLY,
    ),
}


def _describe(tool: str, arg: str) -> str:
    return next(a.description for a in TOOLS[tool].args if a.name == arg)


def tool_list() -> list[dict[str, Any]]:
    """``tools/list``'s tools, as FastMCP renders ``build_server``'s (pydantic's JSON schema of
    each signature), without importing either."""
    out = []
    for name, tool in TOOLS.items():
        props: dict[str, Any] = {}
        required = []
        for arg in tool.args:
            prop: dict[str, Any] = {"description": arg.description, "title": arg.name.title()}
            if arg.nullable:
                prop["anyOf"] = [{"type": arg.kind}, {"type": "null"}]
            else:
                prop["type"] = arg.kind
            if arg.default is _REQUIRED:
                required.append(arg.name)
            else:
                prop["default"] = arg.default
            props[arg.name] = prop
        schema: dict[str, Any] = {
            "properties": props,
            "title": f"{name}Arguments",
            "type": "object",
        }
        if required:
            schema["required"] = required
        entry: dict[str, Any] = {
            "name": name,
            "description": tool.description,
            "inputSchema": schema,
        }
        if tool.dict_result:
            entry["outputSchema"] = {
                "additionalProperties": True,
                "title": f"{name}DictOutput",
                "type": "object",
            }
        entry["annotations"] = dict(tool.annotations)
        out.append(entry)
    return out


class GardenerTools:
    """The tools' logic over one project store, independent of the MCP transport (the server
    below only maps it to tools); every method raises ``ToolError`` with a one-line message for
    anything the caller should be told."""

    def __init__(
        self,
        root: str | None = None,
        store: str | None = None,
        vectors: bool = True,
        chroma_url: str | None = None,
    ) -> None:
        self.root = root
        self.location = store
        self.vectors = vectors
        self.chroma_url = chroma_url
        self._store: Store | None = None
        self._lock = threading.Lock()
        self._failed_at = 0.0
        self._failure = ""
        self._closed = False
        self._started = False
        self._start_lock = threading.Lock()
        self.session_id: str | None = None  # set at the first open: store.db is no light import

    # -- the store ---------------------------------------------------------------------------

    def open(self) -> Any:
        """The store, opened on first use (``start`` opens it early, in the background)."""
        with self._lock:
            return self._open()

    def _open(self) -> Any:
        """``open`` with ``_lock`` held."""
        if self._closed:
            raise _error("the server is shutting down")
        if self._store is not None:
            return self._store
        if self._failure and time.monotonic() - self._failed_at < REOPEN_AFTER:
            raise _error(self._failure)
        from .project import open_project_store

        if self.session_id is None:
            from ..store.db import new_session_id

            self.session_id = "mcp-" + new_session_id()
        try:
            store = open_project_store(
                self.root,
                self.location,
                vectors=self.vectors,
                worker=True,
                session_id=self.session_id,
                chroma_url=self.chroma_url,
            )
        except Exception as err:  # noqa: BLE001 - e.g. an unusable --store path
            return self._fail(f"cannot open the store ({type(err).__name__}: {err})")
        if self._closed:  # close() gave up waiting for this open
            _close_quietly(store)
            raise _error("the server is shutting down")
        if store.degraded:
            # An in-memory stand-in would answer "nothing stored" for everything: say why
            # instead, and try the real one again on a later call.
            reason = re.sub(r"^gardener: ", "", store.degraded).split(";")[0]
            _close_quietly(store)
            return self._fail(f"the store is unavailable: {reason}; try again shortly")
        self._store, self._failure = store, ""
        return store

    def _fail(self, message: str) -> Any:
        self._failure, self._failed_at = message, time.monotonic()
        raise _error(message)

    def start(self, go: threading.Event | None = None) -> None:
        """Open the store (and start the model load and the embedding worker) in the
        background, once, when the client has initialized (the thread waits for ``go``, see
        ``SETTLE``). The lock is taken here, so a client that leaves at once still finds the
        open under way and ``close`` waits for it, as before the front existed. The model's
        one-time export is announced on stderr, the client's log."""
        with self._start_lock:
            if self._started or self._closed:
                return
            self._started = True
        self._lock.acquire()

        def run() -> None:
            try:
                _yield_cpu()
                if go is not None:
                    go.wait()
                if self.vectors:
                    from ..store import embeddings

                    embeddings.announce = _say
                self._open()
            except Exception as err:  # noqa: BLE001 - the first tool call reports it
                log.info("gardener: store not opened at start: %s", err)
            finally:
                self._lock.release()

        threading.Thread(target=run, name="gardener-open", daemon=True).start()

    def close(self, wait: float | None = None) -> None:
        """Close the store; ``wait``: at most this long for an open under way (then it closes
        what it opened itself, if the process lives that long), None: as long as it takes."""
        if not self._lock.acquire(timeout=-1 if wait is None else wait):
            self._closed = True
            return
        try:
            self._closed = True
            store, self._store = self._store, None
        finally:
            self._lock.release()
        if store is not None:
            _close_quietly(store)

    def _entry(self, store: "Store", entry_id: str, *, active: bool = True) -> Any:
        """The entry a handle names; a tool error for a malformed, unknown or (``active``)
        hidden one."""
        eid = _parse_id(entry_id)
        entry = store.get(eid)
        if entry is None:
            if store.read(lambda c: c.execute("SELECT 1").fetchone()) is None:
                raise _error("the store could not be read; try again")
            raise _error(f"No stored entry {eid}.")
        if active and not entry.active:
            raise _error(_hidden_note(entry))
        return entry

    def _by_id(self, store: "Store", words: list[str]) -> list[Any] | None:
        """The entries a query of ids names, or None when it is a search: as Aider's
        ``/recall``, a ten-letter word the store does not know ("exceptions") is searched for,
        unless it was written as a handle (``id=...``)."""
        if not words or not all(HANDLE.match(w) for w in words):
            return None
        ids = list(dict.fromkeys(m.group(1) for w in words if (m := HANDLE.match(w))))
        known = {i: store.get(i) for i in ids}
        if not any(known.values()) and not any(w.startswith("id=") for w in words):
            return None
        return [self._entry(store, i) for i in ids]

    # -- tools -------------------------------------------------------------------------------

    def recall(
        self, query: str, cls: str | None = None, limit: int = RECALL_LIMIT, full: bool = False
    ) -> dict[str, Any]:
        if not isinstance(query, str) or not query.strip():
            raise _error(
                "recall needs a query: words, an identifier, a path, an error code or an id"
            )
        classes = _classes(cls)
        limit = max(1, min(int(limit or RECALL_LIMIT), MAX_RECALL_LIMIT))
        store = self.open()
        search = _search_mode(store)
        by_id = self._by_id(store, query.split())
        if by_id is not None:  # ids, as /recall ID does
            hits: list[tuple[Any, RecallHit | None]] = [(e, None) for e in by_id]
            entries_by_id: dict[str, Any] = {}
            search = "by id"
        else:
            from ..store.recall import recall

            found = recall(store, query, classes=classes, limit=limit, rerank=True)  # as /recall
            parts = [e for h in found for e in getattr(h, "exchange", ())]
            entries_by_id = store.get_entries([h.entry_id for h in found] + parts)
            hits = [(entries_by_id[h.entry_id], h) for h in found if h.entry_id in entries_by_id]
        if full and hits:
            store.touch([e.id for e, _ in hits])
        out, room = [], FULL_TOTAL_CHARS
        for e, h in hits:
            out.append(_hit(e, h, query, min(FULL_CHARS, room) if full else 0))
            room = max(0, room - len(out[-1].get("original", "")))
            rest = getattr(h, "exchange", ()) if h is not None else ()
            if rest:  # the rest of its exchange (``store/exchanges.py``)
                out[-1]["exchange"] = [
                    _part(entries_by_id[e], query) for e in rest if e in entries_by_id
                ]
        result: dict[str, Any] = {"query": query, "search": search, "hits": out}
        if not out:
            result["message"] = f"Nothing stored matches {query!r}."
        else:
            result["message"] = (
                f"{len(out)} hit(s); expand(id) returns an original verbatim, pin(id) keeps it."
            )
        return result

    def expand(self, entry_id: str, offset: int = 0, length: int = PAGE_CHARS) -> dict[str, Any]:
        store = self.open()
        entry = self._entry(store, entry_id)
        text = entry.original
        total = len(text)
        offset = int(offset or 0)
        if offset < 0 or (offset >= total and total):
            raise _error(f"offset {offset} is outside id={entry.id}'s {total:,} characters")
        length = max(1, min(int(length or PAGE_CHARS), MAX_PAGE_CHARS))
        end = min(total, offset + length)
        store.touch([entry.id])
        # the model reads this: secrets stay in the store, for the user's /show
        page, secrets = redact_range(text, offset, end)
        meta = {
            "id": entry.id,
            "class": str(entry.cls),
            "source": _origin(entry),
            "tokens": int(entry.tokens_original),
            "offset": offset,
            "end": end,
            "total_chars": total,
            "next_offset": end if end < total else None,
            "binary": entry.raw is not None,
            "secrets_redacted": secrets,
        }
        return {"meta": meta, "text": page}

    def forget(self, entry_id: str, undo: bool = False) -> dict[str, Any]:
        store = self.open()
        if undo:
            entry = self._entry(store, entry_id, active=False)
            if entry.active:
                return {"id": entry.id, "message": f"id={entry.id} is not forgotten."}
            copies = store.copies_of(entry.id)
            if not store.restore(entry.id):
                raise _error(f"could not restore {entry.id}: the store refused (locked?)")
            return {
                "id": entry.id,
                "restored": [entry.id, *copies],
                "message": f"Restored id={entry.id}{_and_copies(copies)}; recall shows it again.",
            }
        entry = self._entry(store, entry_id, active=False)
        if not entry.active:
            raise _error(_hidden_note(entry).replace("is forgotten", "is already forgotten"))
        if not store.forget(entry.id):
            raise _error(f"could not forget {entry.id}: the store refused (locked?)")
        copies = store.copies_of(entry.id)
        return {
            "id": entry.id,
            "hidden": [entry.id, *copies],
            "message": (
                f"Forgot id={entry.id}{_and_copies(copies)}: recall and expand no longer show"
                f" it; forget(id, undo=true) brings it back."
            ),
        }

    def pin(self, entry_id: str, undo: bool = False) -> dict[str, Any]:
        store = self.open()
        entry = self._entry(store, entry_id)
        ok = store.unpin(entry.id) if undo else store.pin(entry.id)
        after = store.get(entry.id)
        if not ok or after is None or bool(after.pinned) == bool(undo):
            raise _error(f"could not {'unpin' if undo else 'pin'} {entry.id}: the store refused")
        what = "Unpinned" if undo else "Pinned"
        rest = "it may be evicted and expire again" if undo else "it never expires"
        return {"id": entry.id, "pinned": not undo, "message": f"{what} id={entry.id}: {rest}."}

    def checkpoint(self, note: str | None = None) -> dict[str, Any]:
        from ..continuity.checkpoint import CheckpointError, describe_counts
        from .project import write_client_checkpoint

        store = self.open()
        note = (note or "").strip() or None
        try:
            path, parsed = write_client_checkpoint(store, note)
        except (CheckpointError, OSError, ValueError) as err:
            raise _error(f"checkpoint not saved: {err}") from err
        return {
            "path": str(path),
            "name": path.name,
            "created": parsed.created,
            "session": parsed.session,
            "verified": bool(parsed.verified),
            "facts": len(parsed.facts),
            "message": (
                f"Checkpoint saved and verified: {path} ({describe_counts(parsed.facts)}); Aider's"
                " /checkpoints lists it and /resume loads it."
            ),
        }

    def context_pressure(self) -> dict[str, Any]:
        from ..store.pressure import context_pressure as report
        from .project import latest_client_session

        store = self.open()
        project = report(store, 5, None, "project")
        if not project:
            raise _error("the store could not be read; try again")
        sid = latest_client_session(store, exclude=(store.session_id,))
        session = None
        if sid:
            view = _SessionView(store, sid)
            s = report(view, 5, None, "session")
            session = {k: s.get(k) for k in ("session_id", "entries", "tokens_original")}
            session.update(
                tokens_summary=s.get("tokens_summary"), saved=s.get("saved"), ratio=s.get("ratio")
            )
        usage = _client_usage(store.dir)
        out = {
            "store": str(store.path or store.dir),
            "search": _search_mode(store),
            "session": session,
            "project": {
                k: project.get(k)
                for k in ("entries", "tokens_original", "tokens_summary", "saved", "ratio")
            },
            "by_class": project.get("by_class", {}),
            "pinned": project.get("pinned", 0),
            "pending_embeddings": project.get("pending_embeddings", 0),
            "embedding_model": _model_name(store),
            "model_export": _model_export(),
            "eviction_candidates": project.get("eviction_candidates", []),
            "client_context": usage,
            "recommendation": project.get("recommendation", ""),
        }
        out["message"] = _pressure_line(out)
        return out


# -- helpers -------------------------------------------------------------------------------------


def _error(message: str) -> Exception:
    from mcp.server.fastmcp.exceptions import ToolError

    return ToolError(message)


def _close_quietly(store: "Store") -> None:
    try:
        store.close()
    except Exception as err:  # noqa: BLE001
        log.debug("gardener: closing the store failed: %s", err)


def _parse_id(text: Any) -> str:
    raw = str(text or "").strip().strip("`'\"")
    m = HANDLE.match(raw)
    if not m:
        raise _error(
            f"{raw!r} is not an entry id (10 letters a-z and digits 2-7, as in `id=t5ifzcaz3j`)"
        )
    return m.group(1)


def _classes(cls: str | None) -> list[str] | None:
    if cls is None or not str(cls).strip():
        return None
    from ..types import ContentClass

    known = [c.value for c in ContentClass]
    wanted = [c.strip().lower() for c in str(cls).split(",") if c.strip()]
    bad = [c for c in wanted if c not in known]
    if bad:
        raise _error(f"unknown class {', '.join(bad)}; one of {', '.join(known)}")
    return wanted


def _hidden_note(entry: Any) -> str:
    reason = entry.deleted_reason or ""
    if reason.startswith("copy:"):
        first = reason[len("copy:") :]
        return (
            f"id={entry.id} is forgotten (a copy of {first}); forget({first}, undo=true) brings"
            " it back."
        )
    if reason == "ttl":
        return f"id={entry.id} expired unused; forget({entry.id}, undo=true) brings it back."
    return f"id={entry.id} is forgotten; forget({entry.id}, undo=true) brings it back."


def _and_copies(copies: list[str]) -> str:
    if not copies:
        return ""
    return f" and {len(copies)} cop{'y' if len(copies) == 1 else 'ies'} of it"


def _origin(entry: Any) -> str | None:
    """The command or path an entry came from, as the model may see it (a key typed on the
    command line stays in the store)."""
    origin = getattr(entry, "command", None) or getattr(entry, "path", None) or None
    return redact(origin) if origin else None


def _model_name(store: "Store") -> str | None:
    """The store's embedding model (``model_choice``), None without vectors."""
    if getattr(store, "vectors", None) is None:
        return None
    from ..store import model_choice

    return model_choice.active_name()


def _model_export() -> dict[str, Any] | None:
    """The embedding model's one-time export, when this process started or waits for one."""
    embeddings = sys.modules.get("aider_gardener.store.embeddings")
    return embeddings.export_status() if embeddings is not None else None


def _yield_cpu(nice: int = 10) -> None:
    """Lower this thread's priority (Linux schedules threads apart): the library's import and
    the store's open (the numeric stack, then the model in threads of their own) are seconds
    of CPU that competed with the client itself for a 2-core machine's cores while it was
    getting its first request out."""
    if not (hasattr(os, "setpriority") and sys.platform.startswith("linux")):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError:
        pass


def _say(line: str) -> None:
    """One line to stderr, which MCP clients keep as the server's log."""
    print(line, file=sys.stderr, flush=True)


def _search_mode(store: "Store") -> str:
    index = getattr(store, "vectors", None)
    if index is None:
        return "full-text"
    worker = getattr(store, "_worker", None)
    state = getattr(worker, "model_state", "")
    if not getattr(index, "healthy", False) or state == "failed":
        return "full-text (vector index unavailable)"
    if state != "ready" or not getattr(index, "ready", False):
        return "full-text (embedding model loading)"
    return "hybrid"


def _matching_lines(text: str, query: str) -> tuple[list[dict[str, Any]], int, bool]:
    """The lines sharing the most query terms (in their order in the original), how many lines
    matched, and whether that count stopped at a bound (a term on more than
    ``MATCH_SCAN_LINES`` lines is looked for on its first ones only).

    Each term is found with ``str.find``, jumping to the end of its line, and the lines found
    are then scored on every term, so the Python loop runs once per matching line and term
    instead of per line and term, which on a large build log cost more than the recall itself.
    A line holding every term is still found through the rarest one."""
    from ..store.query import query_stems

    terms = query_stems(query)
    if not terms:
        return [], 0, False
    body = text[:SCAN_CHARS]
    low = body.lower()
    spans: dict[int, int] = {}  # line start -> line end, of the lines holding a term
    capped = False
    if len(low) != len(body):  # a character whose lower case is longer ("İ"): line by line
        start = 0
        for piece in body.split("\n"):
            if any(t in piece.lower() for t in terms):
                spans[start] = start + len(piece)
            start += len(piece) + 1
    else:
        for term in terms:
            pos, seen = low.find(term), 0
            while pos >= 0:
                if seen == MATCH_SCAN_LINES:
                    capped = True
                    break
                start = low.rfind("\n", 0, pos) + 1
                end = low.find("\n", pos)
                end = len(low) if end < 0 else end
                spans[start] = end
                seen += 1
                pos = low.find(term, end + 1)
    scored, line, last = [], 1, 0
    for start in sorted(spans):
        line += body.count("\n", last, start)
        last = start
        here = body[start : spans[start]].lower()
        scored.append((-sum(1 for t in terms if t in here), line, start))
    best = sorted(sorted(scored)[:MATCH_LINES], key=lambda s: s[1])
    lines = [{"line": n, "text": _clip(redact(body[a : spans[a]]))} for _s, n, a in best]
    return lines, len(scored), capped


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= MATCH_CHARS else line[: MATCH_CHARS - 1] + "…"


def _iso(ts: float | None) -> str | None:
    if not ts:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _hit(entry: Any, hit: Any, query: str, full: int) -> dict[str, Any]:
    """One hit as the tool returns it; ``full``: how many characters of the original to
    include (0: none, the summary is the hit)."""
    out: dict[str, Any] = {
        "id": entry.id,
        "class": str(entry.cls),
        "score": round(float(hit.score), 5) if hit is not None else None,
        "tokens": int(entry.tokens_original),
        "tokens_summary": int(entry.tokens_summary),
        "source": _origin(entry),
        "created": _iso(entry.created),
        "pinned": bool(entry.pinned),
        "found_by": (hit.via or None) if hit is not None else "id",
        "summary": redact(entry.summary),  # a store written before redaction may hold one
    }
    if hit is not None:
        out.update(_lines_matching(entry.original, query))
        if getattr(hit, "excerpt", ""):
            out["excerpt"] = redact(hit.excerpt)
        if getattr(hit, "duplicates", ()):
            out["near_copies"] = list(hit.duplicates)
    if full:
        text = entry.original
        out["original"] = redact_range(text, 0, min(full, len(text)))[0]
        if len(text) > full:
            out["truncated"] = True
            out["next_offset"] = full
            out["total_chars"] = len(text)
    return out


def _part(entry: Any, query: str) -> dict[str, Any]:
    """Another part of a hit's exchange, as a hit names it: enough to tell what it is and to
    expand it."""
    return {
        "id": entry.id,
        "role": entry.role,
        "class": str(entry.cls),
        "tokens": int(entry.tokens_original),
        "summary": redact(entry.summary),
        **_lines_matching(entry.original, query),
    }


def _lines_matching(text: str, query: str) -> dict[str, Any]:
    """A hit's or a part's fields for the lines of ``text`` that match ``query``, if any."""
    lines, matched, capped = _matching_lines(text, query)
    if not lines:
        return {}
    return {"matching_lines": lines, "lines_matched": f"{matched}+" if capped else matched}


class _SessionView:
    """The store as ``pressure.context_pressure`` reads it, with another session as its own:
    the figures for the session a hook is writing, not for this server's."""

    def __init__(self, store: "Store", session_id: str) -> None:
        self._store = store
        self.session_id = session_id
        self.scope = "session"

    def read(self, fn: Callable[[Any], Any]) -> Any:
        return self._store.read(fn)


def _client_usage(store_dir: Path) -> dict[str, Any] | None:
    """The client's last real context usage, as the Claude Code hooks recorded it; None when
    no hook did (or the hooks module is not there)."""
    try:
        from .transcript import load_usage  # the hooks helper's module
    except Exception:  # noqa: BLE001 - absent, or broken: the store's figures still stand
        return None
    try:
        usage = load_usage(Path(store_dir))
    except Exception as err:  # noqa: BLE001
        log.debug("gardener: reading the client's usage failed: %s", err)
        return None
    if usage is None:
        return None
    used = int(getattr(usage, "used", 0) or 0)
    window = int(getattr(usage, "window", 0) or 0)
    at = getattr(usage, "at", None)
    if isinstance(at, datetime):
        at = at.timestamp()
    out: dict[str, Any] = {
        "used": used,
        "window": window or None,
        "percent": round(100.0 * used / window, 1) if window else None,
        "model": getattr(usage, "model", None),
        # Claude Code's own estimate after a compaction, not an API usage
        "estimated": bool(getattr(usage, "estimated", False)),
    }
    if isinstance(at, (int, float)) and at > 0:
        out["at"] = _iso(float(at))
        out["age_seconds"] = round(max(0.0, time.time() - float(at)), 1)
    elif at:
        out["at"] = str(at)
    return out


def _k(n: int | None) -> str:
    n = int(n or 0)
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _pressure_line(report: dict[str, Any]) -> str:
    parts = []
    usage = report.get("client_context")
    if usage and usage.get("window"):
        parts.append(
            f"context {_k(usage['used'])} of {_k(usage['window'])} tokens"
            f" ({usage['percent']:.0f} %)"
        )
    session = report.get("session")
    if session and session.get("entries"):
        parts.append(
            f"this session stored {session['entries']} outputs,"
            f" {_k(session['tokens_original'])} tokens summarized to"
            f" {_k(session['tokens_summary'])}"
        )
    project = report["project"]
    parts.append(
        f"project: {project.get('entries') or 0} entries, {_k(project.get('tokens_original'))}"
        f" tokens stored as {_k(project.get('tokens_summary'))} of summaries"
    )
    export = report.get("model_export")
    if export and export.get("state") in ("exporting", "waiting"):
        parts.append(
            f"the embedding model is being prepared once for this machine (process"
            f" {export.get('pid')}, {export.get('seconds', 0):.0f} s so far); recall is full-text"
            " until it is done"
        )
    line = "; ".join(parts) + "."
    if usage and usage.get("percent") and usage["percent"] >= 70:
        line += " Consider checkpoint() now and recall() instead of re-running commands."
    return line + " " + (report.get("recommendation") or "")


# -- the MCP server ------------------------------------------------------------------------------


def build_server(tools: GardenerTools) -> Any:
    """The FastMCP server exposing ``tools``. Each tool runs in a worker thread: the store
    serializes its own access, and the event loop stays free for the client's pings and
    cancellations while a big original is read."""
    from anyio import to_thread
    from mcp.server.fastmcp import FastMCP
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import Field

    app = FastMCP(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    async def call(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await to_thread.run_sync(functools.partial(fn, *args, **kw))

    def hints(name: str) -> Any:
        return ToolAnnotations(**TOOLS[name].annotations)

    def about(tool: str, arg: str) -> Any:
        return Field(description=_describe(tool, arg))

    # ``class`` is the argument's name for clients; Python needs another name for it, so the
    # schema comes from this signature and the call arrives with the alias as its keyword.
    def _recall_signature(  # type: ignore[empty-body]  # only its signature is used
        query: Annotated[str, about("recall", "query")],
        cls: Annotated[
            str | None, Field(alias="class", description=_describe("recall", "class"))
        ] = None,
        limit: Annotated[int, about("recall", "limit")] = RECALL_LIMIT,
        full: Annotated[bool, about("recall", "full")] = False,
    ) -> dict[str, Any]: ...

    async def recall(**kw: Any) -> dict[str, Any]:
        return await call(
            tools.recall,
            kw.get("query", ""),
            kw.get("class"),
            kw.get("limit", RECALL_LIMIT),
            bool(kw.get("full", False)),
        )

    recall.__signature__ = inspect.signature(_recall_signature)  # type: ignore[attr-defined]
    recall.__annotations__ = dict(_recall_signature.__annotations__)
    app.add_tool(
        recall, name="recall", description=TOOLS["recall"].description, annotations=hints("recall")
    )

    @app.tool(description=TOOLS["expand"].description, annotations=hints("expand"))
    async def expand(
        id: Annotated[str, about("expand", "id")],
        offset: Annotated[int, about("expand", "offset")] = 0,
        length: Annotated[int, about("expand", "length")] = PAGE_CHARS,
    ) -> CallToolResult:
        page = await call(tools.expand, id, offset, length)
        meta = page["meta"]
        head = (
            f"id={meta['id']} ({meta['class']}{', ' + meta['source'] if meta['source'] else ''}):"
            f" characters {meta['offset']:,}-{meta['end']:,} of {meta['total_chars']:,}"
        )
        if meta["next_offset"] is not None:
            head += f"; expand(id, offset={meta['next_offset']}) for the next page"
        if meta["binary"]:
            head += "; the original had bytes that are not UTF-8, shown decoded"
        if meta["secrets_redacted"]:
            head += f"; {meta['secrets_redacted']} secret(s) redacted (the user's /show has them)"
        # The structured part carries the page too, as every other tool's carries all it says:
        # Codex (0.169.0) forwards a tool's structuredContent to the model instead of its text.
        return CallToolResult(
            content=[
                TextContent(type="text", text=head),
                TextContent(type="text", text=page["text"]),
            ],
            structuredContent={**meta, "message": head, "text": page["text"]},
        )

    @app.tool(description=TOOLS["forget"].description, annotations=hints("forget"))
    async def forget(
        id: Annotated[str, about("forget", "id")],
        undo: Annotated[bool, about("forget", "undo")] = False,
    ) -> dict[str, Any]:
        return await call(tools.forget, id, bool(undo))

    @app.tool(description=TOOLS["pin"].description, annotations=hints("pin"))
    async def pin(
        id: Annotated[str, about("pin", "id")],
        undo: Annotated[bool, about("pin", "undo")] = False,
    ) -> dict[str, Any]:
        return await call(tools.pin, id, bool(undo))

    @app.tool(description=TOOLS["checkpoint"].description, annotations=hints("checkpoint"))
    async def checkpoint(
        note: Annotated[str | None, about("checkpoint", "note")] = None,
    ) -> dict[str, Any]:
        return await call(tools.checkpoint, note)

    @app.tool(
        description=TOOLS["context_pressure"].description, annotations=hints("context_pressure")
    )
    async def context_pressure() -> dict[str, Any]:
        return await call(tools.context_pressure)

    return app


def _protocol_stdout() -> BinaryIO:
    """The MCP stream on a private copy of stdout, with fd 1 itself pointed at stderr: a print
    from any library (or a child process inheriting fd 1) then lands in the client's log instead
    of corrupting the JSON-RPC stream."""
    fd = os.dup(sys.stdout.fileno())
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return os.fdopen(fd, "wb", buffering=0)


# -- the front: the handshake before the MCP library has loaded ------------------------------

# What the front answers itself, as mcp 1.30 (requirements.lock) answers them; pinned by
# ``test_the_front_answers_as_the_library_does``.
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # newest last
CAPABILITIES = {
    "experimental": {},
    "prompts": {"listChanged": False},
    "resources": {"subscribe": False, "listChanged": False},
    "tools": {"listChanged": False},
}
EMPTY_LISTS = {"prompts/list": "prompts", "resources/list": "resources"}
EMPTY_LISTS["resources/templates/list"] = "resourceTemplates"
# The methods the library handles; any other request gets "method not found" from the front
# (the library would log its 17-way union's 31 validation errors and answer "invalid params").
LIBRARY_REQUESTS = frozenset(
    "ping initialize completion/complete logging/setLevel prompts/get prompts/list"
    " resources/list resources/templates/list resources/read resources/subscribe"
    " resources/unsubscribe tools/call tools/list tasks/get tasks/result tasks/list"
    " tasks/cancel".split()
)
LIBRARY_NOTIFICATIONS = frozenset(
    "notifications/cancelled notifications/progress notifications/initialized"
    " notifications/roots/list_changed notifications/tasks/status".split()
)
METHOD_NOT_FOUND = -32601
# The id under which the client's initialize is replayed to the library at the hand-over; its
# answer (the client had the front's) is dropped.
REPLAY_ID = "aider-gardener-front-initialize"


def server_version() -> str:
    """FastMCP's serverInfo.version when none is given: the installed ``mcp`` version, read
    from the name of its dist-info folder (importing ``importlib.metadata`` would be a third
    of the handshake's time), else as FastMCP reads it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("mcp")
        for folder in (spec.submodule_search_locations or []) if spec else []:
            found = sorted(Path(folder).parent.glob("mcp-*.dist-info"))
            if found:
                return found[-1].name[len("mcp-") : -len(".dist-info")]
    except (ImportError, ValueError, OSError):
        pass
    try:
        from importlib.metadata import version

        return version("mcp")
    except Exception:  # noqa: BLE001 - as FastMCP's fallback
        return "unknown"


class _Front:
    """The server's stdio, and what it answers while the ``mcp`` library loads.

    Importing ``mcp`` takes about a second on a busy machine, and clients wait for the handshake
    (Codex leaves a slow optional server's tools out of the turn). So the front answers what
    needs nothing but constants (``initialize``, ``ping``, ``tool_list``, empty prompt and
    resource lists, "method not found" for what the library does not know, such as the
    ``server/discover`` Claude Code probes first); any other message waits, in order, for the
    library, which first gets the client's ``initialize`` replayed under ``REPLAY_ID`` (its
    answer dropped), so that its session holds the client's parameters as if it had answered
    itself."""

    def __init__(
        self, out: BinaryIO, on_initialize: Callable[[], None], on_need: Callable[[], None]
    ) -> None:
        self.out = out
        self.on_initialize = on_initialize  # the client initialized: start what it will need
        self.on_need = on_need  # a request waits for the library: load it now
        self.inbox: "queue.Queue[bytes | None]" = queue.Queue()
        self.waiting: list[bytes] = []  # for the library, in arrival order
        self.initialize: dict[str, Any] | None = None  # the client's, answered by the front
        self.requests, self.notifications = LIBRARY_REQUESTS, LIBRARY_NOTIFICATIONS
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read, name="gardener-stdin", daemon=True).start()

    def _read(self) -> None:
        try:
            for line in iter(sys.stdin.buffer.readline, b""):
                self.inbox.put(line)
        except (OSError, ValueError) as err:  # stdin closed under us: as the end of input
            log.debug("gardener: reading stdin failed: %s", err)
        finally:
            self.inbox.put(None)

    def write(self, message: dict[str, Any] | str) -> None:
        data = message if isinstance(message, str) else json.dumps(message, ensure_ascii=False)
        with self._write_lock:
            self.out.write(data.encode("utf-8") + b"\n")

    def serve_until(self, ready: threading.Event) -> bool:
        """Answer what the front can until ``ready`` is set; False when the client left first."""
        while not ready.is_set():
            try:
                line = self.inbox.get(timeout=0.05)
            except queue.Empty:
                continue
            if line is None:
                return False
            self._early(line)
        return True

    def _early(self, line: bytes) -> None:
        msg = _json(line)
        method = msg.get("method") if isinstance(msg, dict) else None
        if not isinstance(method, str) or "id" not in msg:
            if method is None or method in self.notifications:
                self.waiting.append(line)  # responses, notifications, junk: the library's
            return
        rid = msg["id"]
        if method not in self.requests:
            self.write(_not_found(rid, method))
        elif method == "initialize":
            params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
            asked = params.get("protocolVersion")
            result = {
                "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
                "capabilities": CAPABILITIES,
                "serverInfo": {"name": SERVER_NAME, "version": server_version()},
                "instructions": INSTRUCTIONS,
            }
            self.initialize = msg
            self.on_initialize()  # first: a client that leaves on the answer finds it started
            self.write({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "ping":
            self.write({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif self.initialize is not None and method == "tools/list":
            self.write({"jsonrpc": "2.0", "id": rid, "result": {"tools": tool_list()}})
        elif self.initialize is not None and method in EMPTY_LISTS:
            self.write({"jsonrpc": "2.0", "id": rid, "result": {EMPTY_LISTS[method]: []}})
        else:
            self.waiting.append(line)
            self.on_need()

    def admit(self, line: bytes) -> bool:
        """After the hand-over: whether ``line`` goes to the library (an unknown request is
        answered here, an unknown notification dropped; the library would log either)."""
        msg = _json(line)
        method = msg.get("method") if isinstance(msg, dict) else None
        if not isinstance(method, str):
            return True
        if "id" not in msg:
            if method not in self.notifications:
                log.debug("gardener: notification %s ignored", method)
                return False
            return True
        if method not in self.requests:
            self.write(_not_found(msg["id"], method))
            return False
        if method == "initialize":
            self.on_initialize()
        return True


def _json(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _not_found(rid: Any, method: str) -> dict[str, Any]:
    error = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"}
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def _library_methods() -> tuple[frozenset[str], frozenset[str]]:
    """The request and notification methods the loaded library validates (the front's own
    lists are this version's, checked by the tests)."""
    import typing

    from mcp import types

    def methods(union: Any) -> frozenset[str]:
        out: set[str] = set()
        for cls in typing.get_args(union.model_fields["root"].annotation):
            out.update(typing.get_args(cls.model_fields["method"].annotation))
        return frozenset(out)

    return methods(types.ClientRequest), methods(types.ClientNotification)


class _Library:
    """The ``mcp`` library and the FastMCP app over the tools, loaded in a thread while the
    front answers the handshake."""

    def __init__(self, tools: GardenerTools) -> None:
        self.tools = tools
        self.app: Any = None
        self.methods: tuple[frozenset[str], frozenset[str]] | None = None
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self._started = False
        self._go = threading.Event()

    def start(self, go: threading.Event) -> None:
        """Begin loading, once, when ``go`` is set (see ``SETTLE``)."""
        if not self._started:
            self._started = True
            self._go = go
            threading.Thread(target=self._load, name="gardener-mcp-load", daemon=True).start()

    def _load(self) -> None:
        try:
            _yield_cpu()
            self._go.wait()
            self.app = build_server(self.tools)
            self.methods = _library_methods()
        except BaseException as err:  # noqa: BLE001 - reported by main
            self.error = err
        finally:
            self.ready.set()


async def _serve(app: Any, front: _Front) -> None:
    """The library's server over the front's stdio: what waited first (the replayed
    ``initialize``, then the rest in arrival order), then every further line."""
    import anyio
    from anyio import to_thread
    from mcp.shared.message import SessionMessage
    from mcp.types import JSONRPCMessage

    server = app._mcp_server
    to_server, server_in = anyio.create_memory_object_stream(0)
    server_out, from_server = anyio.create_memory_object_stream(0)

    async def hand(line: bytes) -> None:
        if not await to_thread.run_sync(front.admit, line):
            return
        try:
            message = JSONRPCMessage.model_validate_json(line.decode("utf-8", "replace"))
        except Exception as exc:  # noqa: BLE001 - as the library's stdio reader: to the session
            await to_server.send(exc)
            return
        await to_server.send(SessionMessage(message))

    async def read() -> None:
        async with to_server:
            if front.initialize is not None:
                replay = dict(front.initialize, id=REPLAY_ID)
                await to_server.send(SessionMessage(JSONRPCMessage.model_validate(replay)))
            for line in front.waiting:
                await hand(line)
            front.waiting = []
            while True:
                line = await to_thread.run_sync(front.inbox.get, abandon_on_cancel=True)
                if line is None:
                    return
                await hand(line)

    async def write() -> None:
        async with from_server:
            async for out in from_server:
                if getattr(out.message.root, "id", None) == REPLAY_ID:
                    continue
                data = out.message.model_dump_json(by_alias=True, exclude_none=True)
                await to_thread.run_sync(front.write, data)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(write)
        await server.run(server_in, server_out, server.create_initialization_options())
        tg.cancel_scope.cancel()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gardener-mcp",
        description="aider-gardener's MCP server (stdio) over the project's store.",
    )
    parser.add_argument(
        "--root", help="the project directory (default: $CLAUDE_PROJECT_DIR, else the cwd)"
    )
    parser.add_argument(
        "--store",
        help="store folder or .sqlite file (as --gardener-store; default .aider.gardener/)",
    )
    parser.add_argument(
        "--no-vectors",
        dest="vectors",
        action="store_false",
        help="full-text recall only: no embedding model, no worker",
    )
    parser.add_argument(
        "--chroma-url", help="a Chroma server for vectors instead of the embedded one"
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.version:
        from .. import __version__

        print(f"gardener-mcp {__version__}")
        return 0
    if args.root and not Path(args.root).expanduser().is_dir():
        print(f"gardener-mcp: --root {args.root}: not a directory", file=sys.stderr)
        return 2
    out = _protocol_stdout()
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    # Nothing heavy before the front answers: the library loads in a thread, the store (and the
    # model load and the embedding worker with it) opens once the client has initialized.
    tools = GardenerTools(args.root, args.store, args.vectors, args.chroma_url)
    library = _Library(tools)

    go = threading.Event()  # the library's load and the store's open may begin

    def initialized() -> None:
        library.start(go)
        tools.start(go)
        later = threading.Timer(SETTLE, go.set)
        later.daemon = True
        later.start()

    def needed() -> None:
        go.set()
        library.start(go)

    front = _Front(out, initialized, needed)

    def on_signal(signum: int, _frame: Any) -> None:
        # Not an exception into the event loop: stdin's reader thread sits in a blocking read
        # that the loop's shutdown would wait for, forever. Close the store (the worker stops
        # at its next forward pass, the vector writer's lock is released) and leave, without
        # waiting for an open under way: Claude Code sends SIGINT, SIGTERM 100 ms later and
        # SIGKILL 400 ms after that, and waited for all of it (the open is SQLite's to undo).
        tools.close(wait=SIGNAL_WAIT)
        _note_export_left()
        logging.shutdown()
        os._exit(128 + signum)

    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), on_signal)
    status = 0
    try:
        if front.serve_until(library.ready):  # False: the client left before it was needed
            if library.error is not None:
                log.error("gardener: the MCP library failed to load: %r", library.error)
                status = 1
            else:
                import anyio

                assert library.methods is not None  # loaded without an error
                front.requests, front.notifications = library.methods
                anyio.run(_serve, library.app, front)  # returns when the client closes stdin
    finally:
        go.set()  # an open that waited for it runs, and close waits for it, as before
        tools.close()
        _note_export_left()
    if os.environ.get("GARDENER_FAST_EXIT", "1") != "0":
        # The store is closed; what is left is the interpreter's slow teardown of onnxruntime,
        # chromadb and threads still importing or loading the model.
        from ..main import fast_exit

        fast_exit(status)
    return status


def _note_export_left() -> None:
    """One line for the client's log when this server leaves the model export it started to
    finish on its own (see the ownership note in ``store/embeddings.py``)."""
    embeddings = sys.modules.get("aider_gardener.store.embeddings")
    state = embeddings.export_status() if embeddings is not None else None
    if state and state.get("state") == "exporting" and state.get("owner") == "this process":
        print(
            f"gardener: the embedding model export (process {state.get('pid')}) goes on after"
            " this server exits; the next start uses it, or waits for it",
            file=sys.stderr,
            flush=True,
        )


if __name__ == "__main__":
    raise SystemExit(main())
