"""The gardener as an MCP server: the project's store, over stdio, for any MCP client.

Usage::

    gardener-mcp [--root DIR] [--store PATH] [--no-vectors] [--chroma-url URL]
    aider-gardener mcp ...                     # the same server

    claude mcp add gardener -- /path/to/aider-gardener/.venv/bin/gardener-mcp   # Claude Code
    # any client's config: {"command": "gardener-mcp", "args": ["--root", "/path/to/repo"]}

It serves the store an Aider session in the same repository uses (``<git root>/.aider.gardener/``,
found from ``--root``, else ``$CLAUDE_PROJECT_DIR``, else the working directory; ``--store`` or
``$AIDER_GARDENER_STORE`` as ``--gardener-store``), so an output Aider stored can be recalled from
Claude Code and the other way round. Tools:

``recall(query, class?, limit?, full?)``
    Hybrid search (FTS5 + embeddings, ``store/recall.py``): per hit its id, class, score, token
    cost (original and summary), where it came from, the summary, the lines that matched, and
    the best-matching chunk when vectors found it; ``full`` gives originals (cut at 20k
    characters each and 60k in all, with the offset ``expand`` continues from).
``expand(id, offset?, length?)``
    The stored original verbatim (its own content block, exactly as stored), paged when large.
``forget(id, undo?)``
    As Aider's ``/forget``: hides the entry and every stored copy of it; ``undo`` restores.
``pin(id, undo?)``
    As ``/pin``: never evicted, never expires; ``undo`` unpins.
``checkpoint(note?)``
    A continuity checkpoint in ``<store>/checkpoints/`` (Aider's ``/checkpoints`` and ``/resume``
    read it), reported only after it was read back and parsed.
``context_pressure()``
    What the store holds (entries, tokens stored vs summarized, in the session being written
    and in the project; eviction candidates; pending embeddings) and, when the Claude Code hooks
    recorded one, the client's last real context usage.

Why a long-lived process matters: hooks are one process per event and only write SQLite,
leaving the new chunks pending; this server is the process that lives as long as the client, so
it preloads the embedding model in the background (recall is full-text until it is ready, as in
Aider) and runs the embedding worker that drains the queue.

Measured (2 busy cores, load 9-17): a recall over real stdio, the 15 files of the shared
``tool_outputs`` in the store, two servers on it (``--no-vectors`` and the default, model loaded
and queue drained), 20 distinct queries alternating between them: median 20.0 ms (p95 41.5)
full-text only, 32.2 ms (p95 67.1) hybrid; the store's own recall in process took 1.5 / 11.0 ms
of that, the rest is the tool (matching lines, JSON) and the round trip. On a fresh store the
first model load exports the ONNX file once (``store/embeddings.py``): the server answered
hybrid after ~100 s there, full-text meanwhile.
Those figures predate the rerank: ``recall`` is an explicit recall, so, like ``/recall``, it reads
the fused top 20 again with ``store/rerank.py`` once the model is loaded (LoCoMo R@5 0.751 ->
0.796; ~0.35 s per query idle, ~1 s at load 2-4.5); ``GARDENER_RERANK=off`` in the server's
environment skips it.

Never crash: a tool with bad input (unknown id, empty query, unknown class) or a store that is
locked or unusable answers with a one-line tool error and the server keeps serving; a store that
could only be opened in memory is reported, closed and opened again on the next call. Only the
MCP protocol goes to stdout: the process's own fd 1 is pointed at stderr before anything loads,
so a library's print cannot corrupt the stream.
"""

import argparse
import functools
import inspect
import logging
import os
import re
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from io import TextIOWrapper
from pathlib import Path
from typing import Annotated, Any, Callable

from ..redact import redact, redact_range

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

INSTRUCTIONS = (
    "aider-gardener keeps every large tool output of this project in a local store, compressed,"
    " under a 10-letter id (shown as `id=...` or `[full output stored: id=...]`). Use `recall`"
    " to search it by words, identifiers, paths or error codes (and by meaning once the"
    " embedding model is loaded), `expand` to read an original in full, `pin` to keep one,"
    " `forget` to hide one, `checkpoint` to save the session's facts before a long task or a"
    " compaction, and `context_pressure` to see how full the context and the store are."
)


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
        self._store: Any = None
        self._lock = threading.Lock()
        self._failed_at = 0.0
        self._failure = ""
        self._closed = False
        from ..store.db import new_session_id

        self.session_id = "mcp-" + new_session_id()

    # -- the store ---------------------------------------------------------------------------

    def open(self) -> Any:
        """The store, opened on first use (``start`` opens it early, in the background)."""
        with self._lock:
            if self._closed:
                raise _error("the server is shutting down")
            if self._store is not None:
                return self._store
            if self._failure and time.monotonic() - self._failed_at < REOPEN_AFTER:
                raise _error(self._failure)
            from .project import open_project_store

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

    def start(self) -> None:
        """Open the store (and start the model load and the embedding worker) in the
        background, so the client's handshake does not wait for it."""

        def run() -> None:
            try:
                self.open()
            except Exception as err:  # noqa: BLE001 - the first tool call reports it
                log.info("gardener: store not opened at start: %s", err)

        threading.Thread(target=run, name="gardener-open", daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            store, self._store = self._store, None
        if store is not None:
            _close_quietly(store)

    def _entry(self, store: Any, entry_id: str, *, active: bool = True) -> Any:
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

    def _by_id(self, store: Any, words: list[str]) -> list[Any] | None:
        """The entries a query of ids names, or None when it is a search: as Aider's
        ``/recall``, a ten-letter word the store does not know ("exceptions") is searched for,
        unless it was written as a handle (``id=...``)."""
        if not words or not all(HANDLE.match(w) for w in words):
            return None
        ids = list(dict.fromkeys(HANDLE.match(w).group(1) for w in words))
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
            hits = [(e, None) for e in by_id]
            search = "by id"
        else:
            found = store.recall(query, classes=classes, limit=limit, rerank=True)  # as /recall
            entries_by_id = store.get_entries([h.entry_id for h in found])
            hits = [(entries_by_id[h.entry_id], h) for h in found if h.entry_id in entries_by_id]
        if full and hits:
            store.touch([e.id for e, _ in hits])
        out, room = [], FULL_TOTAL_CHARS
        for e, h in hits:
            out.append(_hit(e, h, query, min(FULL_CHARS, room) if full else 0))
            room = max(0, room - len(out[-1].get("original", "")))
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


def _close_quietly(store: Any) -> None:
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


def _model_name(store: Any) -> str | None:
    """The store's embedding model (``model_choice``), None without vectors."""
    if getattr(store, "vectors", None) is None:
        return None
    from ..store import model_choice

    return model_choice.active_name()


def _search_mode(store: Any) -> str:
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
    instead of per line and term: on a 1.5 MB build log 50-70 ms per hit that way, more than
    the recall itself. A line holding every term is still found through the rarest one."""
    from ..store.db import query_stems

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
        lines, matched, capped = _matching_lines(entry.original, query)
        if lines:
            out["matching_lines"] = lines
            out["lines_matched"] = f"{matched}+" if capped else matched
        if getattr(hit, "excerpt", ""):
            out["excerpt"] = redact(hit.excerpt)
    if full:
        text = entry.original
        out["original"] = redact_range(text, 0, min(full, len(text)))[0]
        if len(text) > full:
            out["truncated"] = True
            out["next_offset"] = full
            out["total_chars"] = len(text)
    return out


class _SessionView:
    """The store as ``pressure.context_pressure`` reads it, with another session as its own:
    the figures for the session a hook is writing, not for this server's."""

    def __init__(self, store: Any, session_id: str) -> None:
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

    read_only = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
    writes = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)

    # ``class`` is the argument's name for clients; Python needs another name for it, so the
    # schema comes from this signature and the call arrives with the alias as its keyword.
    def _recall_signature(
        query: Annotated[
            str, Field(description="words, identifiers, paths, error codes, or entry ids")
        ],
        cls: Annotated[
            str | None,
            Field(
                alias="class",
                description=(
                    "only these content classes, comma separated: log, code, structured, prose,"
                    " error, prompt, edit"
                ),
            ),
        ] = None,
        limit: Annotated[int, Field(description="hits to return (1-20)")] = RECALL_LIMIT,
        full: Annotated[
            bool, Field(description="include each hit's original (long ones cut; see expand)")
        ] = False,
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
        recall,
        name="recall",
        description=(
            "Search the project's stored tool outputs, errors and conversation (full-text and"
            " by meaning): ids, class, score, token cost, summary and the matching lines."
        ),
        annotations=read_only,
    )

    @app.tool(
        description=(
            "The full original text of a stored entry, exactly as stored but for secrets"
            " (keys, tokens, passwords: redacted); long ones in pages (pass next_offset as"
            " offset for the next page)."
        ),
        annotations=read_only,
    )
    async def expand(
        id: Annotated[str, Field(description="the entry id, e.g. t5ifzcaz3j")],
        offset: Annotated[int, Field(description="first character to return")] = 0,
        length: Annotated[int, Field(description="characters per page")] = PAGE_CHARS,
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
        return CallToolResult(
            content=[
                TextContent(type="text", text=head),
                TextContent(type="text", text=page["text"]),
            ],
            structuredContent=meta,
        )

    @app.tool(
        description=(
            "Hide a stored entry and every stored copy of it from recall and expand"
            " (undo=true brings them back)."
        ),
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False),
    )
    async def forget(
        id: Annotated[str, Field(description="the entry id")],
        undo: Annotated[bool, Field(description="restore instead")] = False,
    ) -> dict[str, Any]:
        return await call(tools.forget, id, bool(undo))

    @app.tool(
        description="Pin a stored entry: never evicted, never expires (undo=true unpins).",
        annotations=writes,
    )
    async def pin(
        id: Annotated[str, Field(description="the entry id")],
        undo: Annotated[bool, Field(description="unpin instead")] = False,
    ) -> dict[str, Any]:
        return await call(tools.pin, id, bool(undo))

    @app.tool(
        description=(
            "Save a verified checkpoint of the session's facts (files, errors, decisions, next"
            " steps) as markdown next to the store; Aider's /resume can load it."
        ),
        annotations=writes,
    )
    async def checkpoint(
        note: Annotated[str | None, Field(description="a note to keep with it")] = None,
    ) -> dict[str, Any]:
        return await call(tools.checkpoint, note)

    @app.tool(
        description=(
            "How full the context and the store are: entries and tokens stored vs summarized"
            " (this session and the project), eviction candidates, the client's last context"
            " usage when known."
        ),
        annotations=read_only,
    )
    async def context_pressure() -> dict[str, Any]:
        return await call(tools.context_pressure)

    return app


def _protocol_stdout() -> Any:
    """The MCP stream on a private copy of stdout, with fd 1 itself pointed at stderr: a print
    from any library (or a child process inheriting fd 1) then lands in the client's log instead
    of corrupting the JSON-RPC stream."""
    import anyio

    fd = os.dup(sys.stdout.fileno())
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    stream = TextIOWrapper(os.fdopen(fd, "wb", buffering=0), encoding="utf-8", newline="\n")
    return anyio.wrap_file(stream)


async def _serve(app: Any, stdout: Any) -> None:
    from mcp.server.stdio import stdio_server

    server = app._mcp_server  # FastMCP.run_stdio_async, with our stdout
    async with stdio_server(stdout=stdout) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


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
    stdout = _protocol_stdout()
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    from .. import offline  # noqa: F401  (before chromadb, tiktoken, Hugging Face load)

    tools = GardenerTools(args.root, args.store, args.vectors, args.chroma_url)
    app = build_server(tools)
    tools.start()

    def on_signal(signum: int, _frame: Any) -> None:
        # Not an exception into the event loop: stdin's reader thread sits in a blocking read
        # that the loop's shutdown would wait for, forever. Close the store (the worker stops
        # at its next forward pass, the vector writer's lock is released) and leave.
        tools.close()
        logging.shutdown()
        os._exit(128 + signum)

    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), on_signal)
    import anyio

    try:
        anyio.run(_serve, app, stdout)  # returns when the client closes stdin
    finally:
        tools.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
