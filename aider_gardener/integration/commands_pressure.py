"""``/tokens``, ``/context-pressure`` and ``/evict``: how full the window is, and making room.

A mixin of ``GardenCommands`` (commands.py). ``/tokens`` and ``/context-pressure`` only measure
(report.py builds the prompt in ``garden_preview``: nothing is ingested, evicted, checkpointed or
written), so running them twice shows the same numbers and their totals are the next request's.
``/evict`` is the one that acts, when the user decides to rather than at the next request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .eviction import evict, history_tokens, plan
from .ingest import sync

if TYPE_CHECKING:
    from .seams import CoderLike


MAX_LISTED = 12


class PressureCommands:
    if TYPE_CHECKING:  # given by GardenCommands (commands.py) and Aider's Commands
        io: Any
        coder: CoderLike

    def cmd_tokens(self, args):
        "Report on the number of tokens used by the current chat context"
        session = getattr(self.coder, "_garden", None)
        if session is None:
            return super().cmd_tokens(args)
        from .report import show_tokens

        # a failure in the gardener's table must still leave the user Aider's own
        if (
            session.attempt("tokens", show_tokens, self.coder, session, self.io, default=False)
            is False
        ):
            return super().cmd_tokens(args)

    def cmd_context_pressure(self, args):
        "Show how full the context window is, by part and by class, and what to do about it"
        from .report import show_pressure

        session = getattr(self.coder, "_garden", None)
        if session is None:
            self.io.tool_error("The gardener is off in this session (--gardener-mode off).")
            return
        show_pressure(self.coder, session, self.io)

    def cmd_evict(self, args):
        "Evict chat history now: to the gardener budget, or /evict N to free N tokens"
        # Without N: what the next request would do, now (age old outputs, then evict down to
        # 80% of the budget; the last --gardener-recent-turns turns are kept). With N: the
        # lowest-priority messages of any turn but the current prompt, until N tokens are
        # freed, tier by tier (summary, one-line reference, dropping the pair). Everything
        # evicted stays in the store; /recall ID brings it back.
        session = getattr(self.coder, "_garden", None)
        if session is None:
            self.io.tool_error("The gardener is off in this session (--gardener-mode off).")
            return
        text = (args or "").strip().replace(",", "")
        if text and not (text.isdigit() and int(text) > 0):
            self.io.tool_error("Usage: /evict [TOKENS]  (a positive number of tokens to free)")
            return
        session.attempt("evict", _evict, self.coder, session, self.io, int(text) if text else None)


def _nothing(io: Any, session: Any, before: int, amount: int | None) -> None:
    recent = session.config.recent_turns
    more = "" if amount is not None else "; /evict N takes from the last turns too"
    io.tool_output(
        f"Nothing could be evicted: the history ({before:,} tokens) is the last {recent}"
        f" turn(s), pinned messages and one-line references{more}."
    )


def _request(coder: CoderLike, session: Any) -> int | None:
    """The next request's tokens, as ``/tokens`` counts them (None if it cannot be measured)."""
    from .report import measure

    live = session.attempt("pressure", measure, coder, session)
    return None if live is None else live["total"]


def _evict(coder: CoderLike, session: Any, io: Any, amount: int | None) -> None:
    """Run eviction's own plan (the one ``/context-pressure`` lists) and report what it did:
    "freed" is what the whole next request lost, recalled context and all, not the sum of the
    messages' savings, which overstated it (decision 091)."""
    sync(session, coder)
    before = history_tokens(session, coder)
    pinned = before - history_tokens(session, coder, pinned=False)
    limit = session.budget(coder)
    if amount is None and before - pinned <= limit:
        outside = f", of which {pinned:,} pinned, outside the budget" if pinned else ""
        io.tool_output(
            f"History ({before:,} tokens{outside}) is within the gardener budget (evicted above"
            f" {limit:,}); nothing to evict. /evict N frees N tokens now."
        )
        return
    target = None if amount is None else max(0, before - amount)
    todo = plan(session, coder, target)
    if not todo.steps:
        # nothing eviction may touch: say so before it writes its tier-2 checkpoint for nothing
        return _nothing(io, session, before, amount)
    request = _request(coder, session)
    was = {id(meta): (meta.state, meta.tokens_now) for step in todo.steps for meta in step.metas}
    order = list(dict.fromkeys(meta for step in todo.steps for meta in step.metas))
    evict(session, coder, target, todo)
    after = history_tokens(session, coder)
    changed = []
    for meta in order:
        state, tokens = was[id(meta)]
        if not session.live(meta):
            changed.append((meta, state, "dropped", tokens, 0))
        elif meta.state != state:
            changed.append((meta, state, meta.state, tokens, meta.tokens_now))
    now = _request(coder, session)
    if request is not None and now is not None:
        head = f"the next request {request:,} -> {now:,} tokens (freed {request - now:,});"
    else:
        head = ""
    io.tool_output(
        f"Evicted {len(changed)} message(s): {head} history {before:,} -> {after:,} tokens"
        f" (evicted above {limit:,}):"
    )
    for meta, old, new, was_n, now_n in changed[:MAX_LISTED]:
        name = meta.entry_id or "(filler)"
        io.tool_output(f"  {name:<12} {meta.cls:<10} {old} -> {new}  {was_n:,} -> {now_n:,} tokens")
    if len(changed) > MAX_LISTED:
        io.tool_output(f"  ... and {len(changed) - MAX_LISTED} more")
    io.tool_output("All of it is in the store: /recall ID brings an entry back.")
