"""IncrementalContext mode: a rolling compiled summary of old turns + the last N turns verbatim.

Eviction lets the prompt grow up to the budget and then cuts; this mode keeps it about constant
from the first turn on: everything before the last ``recent_turns`` turns is represented by one
compiled message, a line or two per message (the user's words, the first line of each reply
and output summary, each with its recall handle), capped at ``COMPILED_SHARE`` of the budget with
the oldest lines falling off first. Lines are compiled once per message and reused, so the
compiled text only grows at its end and stays a stable prompt prefix between batches.

It is a view: the shared history lists keep every message, so switching mode (or ``/recall``)
loses nothing; only the request is built from the view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..redact import redact
from ..tokens import count_tokens
from .session import GardenerSession, MessageMeta, model_name

if TYPE_CHECKING:
    from .seams import CoderLike


COMPILED_SHARE = 0.25
LOW_WATER = 0.5
LINE_CHARS = 240

HEADER = (
    "Summary of our earlier conversation, compiled by aider-gardener (each [id=...] is stored in"
    " full; the user can /recall it):"
)
REPLY = "Ok."


def _line(meta: MessageMeta) -> str:
    return redact(_raw_line(meta))  # a command line or output may hold a key


def _raw_line(meta: MessageMeta) -> str:
    text = meta.summary if meta.stored else meta.original
    first = ""
    for raw in text.splitlines():
        raw = raw.strip()
        if raw and not raw.startswith("[full output stored"):
            first = raw
            break
    if len(first) > LINE_CHARS:
        first = first[: LINE_CHARS - 1] + "…"
    handle = f" [id={meta.entry_id}]" if meta.entry_id else ""
    if meta.kind == "prompt":
        return f"- (turn {meta.turn}) You said: {first}{handle}"
    if meta.kind == "reply":
        return f"  I replied: {first}{handle}"
    if meta.kind == "tool":
        what = f"`{meta.command}`" if meta.command else "a command"
        return f"  Output of {what} ({meta.cls}, {meta.tokens_full:,} tokens): {first}{handle}"
    return f"  {first}{handle}"


def compile_summary(session: GardenerSession, old: list[dict], cap: int, model: str) -> str:
    metas, lines = [], []
    for msg in old:
        meta = session.meta(msg)
        if meta is None or meta.kind == "filler":
            continue
        line = session.compiled.get(meta)
        if line is None:
            line = session.compiled[meta] = _line(meta)
        metas.append(meta)
        lines.append(line)
    costs = [count_tokens(line, model) + 1 for line in lines]
    # Lines before the floor were cut earlier. When the text outgrows the cap, cut down to
    # LOW_WATER of it in one step, so the compiled prefix changes once per batch, not per turn.
    floor = session.compiled_floor
    start = metas.index(floor) if floor in metas else 0
    total = sum(costs[start:])
    if total > cap:
        while total > LOW_WATER * cap and start < len(lines):
            total -= costs[start]
            start += 1
        session.compiled_floor = metas[start] if start < len(metas) else None
    head = HEADER
    if start:
        head += f"\n({start} older lines omitted; /recall finds them.)"
    return head + "\n" + "\n".join(lines[start:])


def incremental_view(session: GardenerSession, coder: CoderLike, chunks: Any) -> Any:
    """Rebuild ``chunks.done``/``chunks.cur`` (new lists) from the compiled summary and the
    last turns; the shared lists are not touched."""
    done, cur = coder.done_messages, coder.cur_messages
    history = list(done) + list(cur)
    starts = []
    for i, msg in enumerate(history):
        meta = session.meta(msg)
        if meta is not None and meta.starts_turn and msg.get("role") == "user":
            starts.append(i)
    n = session.config.recent_turns
    if len(starts) <= n:
        return chunks
    boundary = starts[-n]
    for i, msg in enumerate(history[:boundary]):
        # what the user put back with /recall --add stays verbatim for its turns, as in eviction
        meta = session.meta(msg)
        if meta is not None and meta.kind == "recall" and session.turn - meta.turn < n:
            if msg.get("role") == "user":
                boundary = i
                break
    model = model_name(coder)
    cap = int(session.budget(coder) * COMPILED_SHARE)
    summary = compile_summary(session, history[:boundary], cap, model)
    pair = [dict(role="user", content=summary), dict(role="assistant", content=REPLY)]
    if boundary <= len(done):
        chunks.done = pair + list(done[boundary:])
    else:
        chunks.done = pair
        chunks.cur = list(chunks.cur[boundary - len(done) :])
    return chunks
