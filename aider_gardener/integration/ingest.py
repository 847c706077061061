"""Ingest: every message that enters ``done_messages`` or ``cur_messages`` is classified,
compressed and stored, and gets a record in the session's side table.

Rather than hooking each of the many places Aider appends to those lists (the prompt, the
reply, ``/run``, ``/web``, suggested shell commands, reflections, interrupts), ``sync`` walks
both lists before every request and ingests whatever it has no record of. Walking is cheap (an
identity lookup per message); only new messages cost a compression.

Command output above ``--gardener-max-output`` tokens is swapped for its summary as soon as it
is seen, so it never reaches the model whole. When the store cannot keep an original (disk
full, read-only, locked) the output still enters compressed, with a line that says so
(``unkept_line``); an entry a busy store could not write is written by a later ``sync``, and
its summary then gets its handle back. Why: docs/decisions/092-big-outputs-in-the-chat.md.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..redact import find_secrets, redact
from ..store.priority import extract_keys
from ..tokens import count_tokens
from ..types import ContentClass, Source, handle_line
from .keeper import tracker_of
from .session import GardenerSession, Hint, MessageMeta, model_name, swap

if TYPE_CHECKING:
    from ..store.db import Store
    from .seams import CoderLike


# Aider's prompts.run_output, the shape /run and /test output enters the chat in.
RUN_OUTPUT = re.compile(
    r"\AI ran this command:\n\n(?P<command>.*?)\n\nAnd got this output:\n\n(?P<output>.*)\Z",
    re.DOTALL,
)
WEB_OUTPUT = re.compile(r"\AHere is the content of (?P<url>\S+?):\n\n(?P<output>.*)\Z", re.DOTALL)
SHELL_OUTPUT = re.compile(r"\AOutput from (?P<command>[^\n]+)\n(?P<output>.*)\Z", re.DOTALL)
# SEARCH/REPLACE, patch and unified-diff markers: a reply holding them is an edit Aider applied.
EDIT_MARKERS = re.compile(
    r"^(?:<{5,9} SEARCH|>{5,9} REPLACE|\*\*\* Begin Patch|@@ .* @@|--- \S+\n\+\+\+ )", re.MULTILINE
)

FILLER_MAX_CHARS = 80
MAX_KEYS = 64
# The head of the message ``/recall --add`` puts in the chat (commands_recall.py), and its blocks.
RECALL_HEADER = "Recalled from the gardener store at my request:"
RECALLED_ID = re.compile(r"^--- id=([a-z2-7]{10}) \(", re.MULTILINE)
# A message names what it refers to early (the paths and names of what it discusses or edits);
# scanning only its head bounds the cost of reference detection on 100 kB replies.
REF_SCAN_CHARS = 8000


# What stands for the handle line in a summary whose original the store could not keep.
UNKEPT = {
    "busy": (
        "[original not stored yet: the gardener store is locked by another process; it is"
        " stored when the lock is released]"
    ),
    "full": (
        "[original not kept: the gardener store could not be written (disk full or I/O error);"
        " only this summary is in the chat]"
    ),
    "read-only": (
        "[original not kept: the gardener store is read-only; only this summary is in the chat]"
    ),
}
UNKEPT_DEFAULT = (
    "[original not kept: the gardener store could not write it; only this summary is in the chat]"
)


def unkept_line(reason: str | None) -> str:
    return UNKEPT.get(reason or "", UNKEPT_DEFAULT)


def sync(session: GardenerSession, coder: CoderLike) -> list[MessageMeta]:
    """Give every message in the coder's history a record (ingesting new ones), throttle large
    command output, and forget records of messages that left the lists. Returns new records."""
    new: list[MessageMeta] = []
    seen: set[int] = set()
    late = session.attempt("store", flush_pending, session, default=None) or {}
    model = model_name(coder)
    for lst in (coder.done_messages, coder.cur_messages):
        for i, msg in enumerate(lst):
            seen.add(id(msg))
            meta = session.meta(msg)
            if meta is not None:
                if late and meta.pending_id in late:
                    session.attempt("store", stored_late, session, lst, i, meta, late, model)
                    seen.add(id(meta.msg))  # a summary that got its handle is a new dict
                continue
            if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
                continue  # images, function calls: left exactly as Aider made them
            meta = session.attempt("ingest", ingest_message, session, coder, msg)
            if meta is None:
                continue
            new.append(meta)
            if should_throttle(session, meta):
                session.attempt("throttle", fit_summary, meta, session.config.max_output, coder)
            if meta.secret or (
                should_throttle(session, meta) and meta.tokens_summary < meta.tokens_full
            ):
                swap(session, lst, i, meta, "summary")
                seen.add(id(meta.msg))
                session.events.throttled += 1
                session.stats["throttled"] += 1
    session.prune(seen)
    return new


def flush_pending(session: GardenerSession) -> dict[str, Any]:
    """Entries a busy store kept in memory, written now if it is free: entry id -> what the
    record should become (an ``Entry``, or None when the store gave it up)."""
    store = session.store
    if store is None or not getattr(store, "unwritten_count", lambda: 0)():
        return {}
    written, dropped = store.flush_unwritten()
    out: dict[str, Any] = {e.id: e for e in written}
    out.update((eid, None) for eid in dropped)
    return {eid: value for eid, value in out.items() if eid in session.pending}


def stored_late(
    session: GardenerSession,
    lst: list,
    index: int,
    meta: MessageMeta,
    late: dict[str, Any],
    model: str,
) -> None:
    """A message whose entry the busy store wrote now (or gave up): its record becomes what
    it would have been at ingest, and a summary in the chat gets the handle (or says the
    original is not kept after all)."""
    entry = late.get(meta.pending_id) if meta.pending_id is not None else None
    session.pending.pop(meta.pending_id or "", None)
    meta.pending_id = None
    old_line = meta.unkept
    if entry is None:
        meta.unkept = unkept_line("error") if old_line else ""
    else:
        meta.entry_id, meta.stored, meta.unkept = entry.id, True, ""
        meta.cls = str(entry.cls)
        if entry.id not in meta.keys:
            meta.keys = (entry.id,) + meta.keys
            session.key_index.setdefault(entry.id, []).append(meta)
    if old_line and old_line in meta.summary:
        new_line = meta.unkept or handle_line(meta.entry_id or "")
        meta.summary = meta.summary.replace(old_line, new_line)
        meta.tokens_summary = count_tokens(meta.summary, model)
        if meta.state == "summary":
            swap(session, lst, index, meta, "summary")


def should_throttle(session: GardenerSession, meta: MessageMeta) -> bool:
    """Command output above ``--gardener-max-output`` enters as its summary, cut to fit (an
    output the compressors cannot shrink, e.g. 300 distinct failures, is cut too), also when
    the store could not keep its original (the summary then says so instead of citing it)."""
    return (
        meta.kind == "tool"
        and (meta.stored or bool(meta.unkept))
        and meta.state == "full"
        and meta.tokens_full > session.config.max_output
    )


# Lines a summary cut to --gardener-max-output keeps first: the facts the pipeline guarantees
# (exception names, error codes, path:line, failing tests), as the prose compressor ranks them.
CRITICAL_LINE = re.compile(
    r"\b[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b"
    r"|\b(?:E\d{4}|TS\d{4,5}|CS\d{4})\b|\.[A-Za-z]{1,5}[:(]\d"
    r"|\w::\w|^\s*(?:FAILED|ERROR)\b|--- FAIL|\berror\b",
    re.I,
)


def fit_summary(meta: MessageMeta, limit: int, coder: CoderLike) -> None:
    """Cut a throttled output's summary to at most ``limit`` tokens, message text and handle
    line included. The compressors bound a summary by what its content needs, not by the
    user's ``--gardener-max-output``: a 28k-token pytest log with many distinct warnings
    compressed to ~2k tokens and entered whole. Lines naming errors, exceptions, failing tests
    or ``path:line`` are kept first, then the summary's head and tail; what is left out is said
    in one line with the way to get it (``/show ID``). The store keeps the full summary and the
    original; when it could not (``meta.unkept``), that line says so instead of the handle."""
    model = model_name(coder)
    if meta.tokens_summary <= limit or not (meta.entry_id or meta.unkept):
        return
    handle = handle_line(meta.entry_id) if meta.stored and meta.entry_id else meta.unkept
    text = meta.summary
    at = text.rfind(handle)
    if at >= 0:
        body, tail = text[:at], text[at:]
    else:  # the compressors kept it all: the output itself is cut, and gets its handle
        body, tail = text, handle
    m = RUN_OUTPUT.match(meta.original)
    head = ""
    if m and body.startswith(meta.original[: m.start("output")]):
        head = meta.original[: m.start("output")]
        body = body[len(head) :]
    lines = body.splitlines()
    cost = [count_tokens(line, model) + 1 for line in lines]
    if meta.stored:
        way = f"/show {meta.entry_id} prints the whole output"
    elif meta.pending_id:  # still true once the late write has happened
        way = f"/show {meta.pending_id} prints the whole output once the store is free"
    else:
        way = "the whole output could not be kept"
    note = "[{n} of {total} summary lines left out to fit --gardener-max-output {limit}; " + way
    note += "]"
    fixed = count_tokens(head + tail, model) + count_tokens(note, model) + 8
    room = limit - fixed
    order = [i for i, line in enumerate(lines) if CRITICAL_LINE.search(line)]
    critical = set(order)
    rest = [i for i in range(len(lines)) if i not in critical]
    ends: list[int] = []
    while rest:  # head and tail alternately: a log's start and its final counts
        ends.append(rest.pop(0))
        if rest:
            ends.append(rest.pop())
    keep: set[int] = set()
    for i in order[:1] + ends[:2] + order[1:] + ends[2:]:
        if cost[i] <= room:
            keep.add(i)
            room -= cost[i]
    while True:
        kept = [lines[i] for i in sorted(keep)]
        dropped = len(lines) - len(kept)
        line = note.format(n=dropped, total=len(lines), limit=limit)
        fitted = head + "\n".join(kept + [line]) + "\n" + tail
        tokens = count_tokens(fitted, model)
        if tokens <= limit or not keep:
            break
        keep.discard(max(keep, key=lambda i: (i not in critical, cost[i])))
    if tokens < meta.tokens_summary:
        meta.summary, meta.tokens_summary = fitted, tokens


def classify_message(role: str, content: str, hint: Hint | None) -> tuple[str, str | None, str]:
    """(kind, command, body to store) for a message without other provenance."""
    if hint is not None and hint.kind is not None:
        body = content
        m = RUN_OUTPUT.match(content)
        if m and hint.kind == "tool":
            body = m.group("output")
        return hint.kind, hint.command, body
    if role == "assistant":
        if len(content) <= FILLER_MAX_CHARS and "\n" not in content.strip():
            return "filler", None, content
        return "reply", None, content
    if role != "user":
        return "filler", None, content
    if content.startswith(RECALL_HEADER):
        return "recall", "/recall", content
    m = RUN_OUTPUT.match(content)
    if m:
        return "tool", m.group("command").strip(), m.group("output")
    m = WEB_OUTPUT.match(content)
    if m:
        return "tool", f"/web {m.group('url')}", m.group("output")
    m = SHELL_OUTPUT.match(content)
    if m and len(content) > 200:
        return "tool", m.group("command").strip(), content
    return "prompt", None, content


def ingest_message(session: GardenerSession, coder: CoderLike, msg: dict) -> MessageMeta:
    content: str = msg["content"]
    role = str(msg.get("role") or "user")
    hint = session.hints.pop(content, None)
    if hint is not None and hint.meta is not None:
        meta = hint.meta  # the same text moved to a new dict (e.g. /test output re-sent)
        session.discard(meta)
        meta.msg = msg
        if hint.starts_turn and not meta.starts_turn:
            session.turn += 1
            meta.turn, meta.starts_turn = session.turn, True
        session.add(meta)
        return meta
    kind, command, body = classify_message(role, content, hint)
    starts_turn = hint.starts_turn if hint is not None else (kind == "prompt")
    turn = session.turn
    if starts_turn:
        session.turn = turn = turn + 1
    elif kind in ("tool", "notice", "recall") and role == "user":
        turn += 1  # output added between requests is what the *next* request is about
    elif kind == "filler" and role == "assistant":
        turn = max(turn, session.last_user_turn)  # "Ok." ages with the message it answers
    if role == "user":
        session.last_user_turn = turn
    model = model_name(coder)
    meta = MessageMeta(
        msg=msg,
        original=content,
        role=role,
        kind=kind,
        cls=(hint.cls if hint and hint.cls else ("prompt" if kind == "prompt" else "prose")),
        turn=turn,
        starts_turn=starts_turn,
        command=command,
        summary=content,
    )
    if kind == "filler":
        meta.tokens_full = meta.tokens_summary = count_tokens(content, model)
        session.add(meta)
        return meta
    if kind == "recall":
        # ``/recall --add`` records its message itself; one without a record (history the
        # table lost) is never stored again: it points at the entries it holds instead.
        meta.tokens_full = meta.tokens_summary = count_tokens(content, model)
        ids = tuple(dict.fromkeys(RECALLED_ID.findall(content)))
        meta.entry_id, meta.stored, meta.keys = (ids[0] if ids else None), bool(ids), ids
        session.add(meta)
        return meta

    store = session.open_store(coder)
    entry = None
    if store is not None and body.strip():
        source = Source(role="tool" if kind in ("tool", "notice") else role, command=command)
        forced = ContentClass.PROMPT if kind == "prompt" else None
        if kind == "reply" and EDIT_MARKERS.search(body):
            forced = ContentClass.EDIT  # provenance: Aider applies these blocks as edits
        if hint is not None and hint.cls:
            forced = ContentClass(hint.cls)
        entry = session.attempt("store", store.ingest, body, source, cls=forced)
    meta.tokens_full = count_tokens(content, model)
    stored = entry is not None and getattr(entry, "stored", False)
    if entry is not None and not stored and getattr(entry, "not_stored", None):
        # compressed all the same: a store that cannot keep the original must not let a
        # 100k-line output into the chat whole; the handle would cite an id that is not there
        meta.unkept = unkept_line(entry.not_stored)
        meta.cls = str(entry.cls)
        if entry.not_stored == "busy":
            meta.pending_id = entry.id
            session.pending[entry.id] = meta
    if stored or meta.unkept:
        assert entry is not None  # both come from an entry: meta is new, unkept set above
        if stored:
            meta.entry_id = entry.id
            meta.stored = True
            meta.cls = str(entry.cls)
        summary = entry.summary if stored else _without_handle(entry, meta.unkept)
        if summary != entry.original and body in content:
            head, _, tail = content.partition(body)
            meta.summary = head + summary + (tail if tail.strip() else "")
            meta.tokens_summary = count_tokens(meta.summary, model)
            if meta.tokens_summary >= meta.tokens_full:
                meta.summary, meta.tokens_summary = content, meta.tokens_full
        else:
            meta.tokens_summary = meta.tokens_full
    else:
        meta.tokens_summary = meta.tokens_full
    if kind == "tool":
        _keep_secrets_out(session, meta, content, model)
    meta.keys = tuple(extract_keys(meta.summary if meta.stored else content, MAX_KEYS))
    if meta.entry_id and meta.entry_id not in meta.keys:
        meta.keys = (meta.entry_id,) + meta.keys
    note_references(session, meta, store)
    session.attempt("facts", observe, session, meta, body)
    if kind == "tool" and meta.cls == "error" and session.last_reply is not None:
        session.last_reply.failed = True  # the approach just tried did not work: keep it
    if kind == "reply":
        session.last_reply = meta
    session.add(meta)
    return meta


def _keep_secrets_out(
    session: GardenerSession, meta: MessageMeta, content: str, model: str
) -> None:
    """A key on the command line or in the output must not reach the model through the chat:
    an output small enough to stay whole is looked at whole, and with a secret in it enters as
    its redacted summary at once (``sync``); a larger one enters as its summary anyway, whose
    command line is redacted here. The store keeps the original for the user's /show."""
    if meta.tokens_full <= session.config.max_output:
        if not find_secrets(content):
            return
        meta.secret = True
    safe = redact(meta.summary)
    if safe == meta.summary and not meta.secret:
        return
    if meta.secret and meta.stored and meta.entry_id:
        handle = handle_line(meta.entry_id)
        if handle not in safe:
            safe = safe.rstrip("\n") + "\n" + handle
    meta.summary = safe
    meta.tokens_summary = count_tokens(safe, model)


def _without_handle(entry: Any, line: str) -> str:
    """The entry's summary with ``line`` where its handle was (the original when the
    compressors kept it all)."""
    summary, handle = entry.summary, handle_line(entry.id)
    if summary == entry.original or not summary.rstrip().endswith(handle):
        return summary
    return summary.rstrip()[: -len(handle)] + line


def note_references(session: GardenerSession, meta: MessageMeta, store: Store) -> None:
    """A prompt or reply that names an earlier message's paths, identifiers, error codes or id
    keeps that message out of aging for a few more turns (and raises its stored priority)."""
    if meta.kind not in ("prompt", "reply"):
        return
    head = meta.original[:REF_SCAN_CHARS]
    keys = extract_keys(head, 256)
    for key in keys:
        for other in session.key_index.get(key, ()):
            if other is not meta and session.live(other):
                other.last_ref_turn = session.turn
    if store is not None and keys:
        exclude = [meta.entry_id] if meta.entry_id else []
        session.attempt("reference", store.note_reference, head, exclude)


def observe(session: GardenerSession, meta: MessageMeta, body: str) -> None:
    """Hand a new message to the fact tracker (continuity): the user's words, the model's reply,
    or a command's output."""
    facts = tracker_of(session)
    if meta.kind == "prompt":
        facts.on_prompt(meta.original, meta.turn, meta.entry_id)
    elif meta.kind == "reply":
        facts.on_reply(meta.original, meta.turn, meta.entry_id)
    elif meta.kind == "tool":
        status = session.exit_codes.pop((meta.command or "").strip(), None)
        facts.on_output(meta.command, body, meta.turn, meta.entry_id, exit_code=status)
