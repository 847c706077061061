"""Priority eviction: what replaces Aider's summarizer, without ever calling an LLM.

Aider 0.86.2's summarizer discards its result in the edit flow, empties the history when it
fails, and never summarizes ``cur_messages``. Here, before every request and over both lists:

* aging: outputs and replies older than the last ``recent_turns`` turns and not referenced
  since become their summary + recall handle, in batches worth ``BATCH_SHARE`` of the budget,
  so the prompt prefix (and providers' prompt caches) changes rarely;
* pressure: above the budget, evict down to ``LOW_WATER`` of it, lowest priority first, in
  tiers: summaries, one-line references, then whole user/assistant pairs. Prompts, open errors
  and failed approaches go last; pinned messages (outside the budget) and the last turns stay.

``plan`` computes the steps and ``evict`` applies them, so ``/context-pressure``'s forecast is
what ``/evict`` does. Roles keep whatever alternation they had (only contents change, or
adjacent pairs go). Design: docs/decisions/091-priority-and-eviction.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..store.priority import BASE, DEFAULT_BASE, RECENCY_MAX, REFERENCE_STEP
from ..tokens import count_tokens
from .ingest import EDIT_MARKERS
from .keeper import mark_messages
from .session import GardenerSession, MessageMeta, framing, model_name, reference_text, swap

if TYPE_CHECKING:
    from .seams import CoderLike


LOW_WATER = 0.8
BATCH_SHARE = 0.1
MIN_BATCH = 512
# Failed approaches (what not to try again) and unresolved errors rank above even the user's
# prompts (90), so they are the last messages evicted.
LAST_BASE = 95.0
RESOLVED_PENALTY = 40.0


@dataclass
class Slot:
    lst: list
    index: int
    meta: MessageMeta | None
    protected: bool

    @property
    def record(self) -> MessageMeta:
        """``meta`` of a slot eviction acts on: only a message without one is always protected
        (``_slots``), so every slot a step holds has it."""
        assert self.meta is not None
        return self.meta


@dataclass
class EvictionReport:
    before: int = 0
    after: int = 0
    budget: int = 0
    aged: int = 0
    summarized: int = 0
    referenced: int = 0
    dropped: int = 0


def priority(meta: MessageMeta, session: GardenerSession) -> float:
    """Turn-based twin of the store's score: base by class, a recency bonus halving every
    ``recent_turns`` turns, a reference bonus fading the same way."""
    if meta.pinned:
        return math.inf
    if meta.kind == "prompt":
        base = BASE["prompt"]
    elif meta.kind == "filler":
        base = 0.0
    else:
        base = BASE.get(meta.cls, DEFAULT_BASE)
    if meta.failed or meta.open_error:
        base = max(base, LAST_BASE)  # an open error of any class (a failing test log)
    elif meta.cls == "error" and meta.kind == "tool" and not meta.resolved:
        base = max(base, LAST_BASE)  # evicted only after everything else
    if meta.resolved:
        base -= RESOLVED_PENALTY
    span = max(1, session.config.recent_turns)
    age = max(0, session.turn - meta.turn)
    score = base + RECENCY_MAX * 0.5 ** (age / span)
    if meta.last_ref_turn >= 0:
        score += REFERENCE_STEP * 0.5 ** (max(0, session.turn - meta.last_ref_turn) / span)
    return score


def history_tokens(session: GardenerSession, coder: CoderLike, pinned: bool = True) -> int:
    """The chat history as the request counts it: each message's text plus ``framing``.
    ``pinned=False`` leaves out pinned messages, which the budget does not pay for."""
    model = model_name(coder)
    frame = framing(coder)
    total = 0
    for lst in (coder.done_messages, coder.cur_messages):
        for msg in lst:
            meta = session.meta(msg)
            if meta is not None:
                if pinned or not meta.pinned:
                    total += meta.tokens_now + frame
            elif isinstance(msg, dict) and isinstance(msg.get("content"), str):
                total += count_tokens(msg["content"], model) + frame
    return total


def _slots(session: GardenerSession, coder: CoderLike, hard: bool) -> list[Slot]:
    out = []
    recent = session.config.recent_turns
    cur = coder.cur_messages
    for lst in (coder.done_messages, cur):
        for i, msg in enumerate(lst):
            meta = session.meta(msg)
            if meta is None or meta.pinned:
                protected = True
            elif lst is cur and i == len(cur) - 1 and msg.get("role") == "user":
                protected = True  # the message being sent
            elif hard:
                protected = meta.turn == session.turn and meta.kind == "prompt"
                # what the user put back with /recall --add (checked to fit the window) stays
                # for its turns even now, or an overflow would compress it right back
                kept = meta.kind == "recall" and session.turn - meta.turn < recent
                protected = protected or kept
            else:
                protected = session.turn - meta.turn < recent
            out.append(Slot(lst, i, meta, protected))
    return out


def _can_summarize(meta: MessageMeta) -> bool:
    return (
        meta.state == "full"
        and meta.stored
        and meta.kind != "prompt"
        and meta.tokens_summary < meta.tokens_full
    )


@dataclass
class Step:
    """One thing eviction does: ``action`` is ``summary``, ``ref`` or ``drop`` (a whole
    (user, assistant) pair: ``slots`` holds both), ``tier`` says why (``aged``, ``summary``,
    ``ref``, ``pinned``: a pinned message back to its summary on overflow, ``drop``)."""

    action: str
    tier: str
    slots: tuple[Slot, ...]
    freed: int

    @property
    def metas(self) -> list[MessageMeta]:
        return [s.record for s in self.slots]


@dataclass
class Plan:
    steps: list[Step]
    before: int
    budget: int
    target: int
    hard: bool


def plan(session: GardenerSession, coder: CoderLike, hard_target: int | None = None) -> Plan:
    """What ``evict`` will do, in the order it does it, changing nothing. ``/evict`` runs this
    plan and ``/context-pressure`` lists its first steps, so the forecast is the act.

    Pinned messages are outside the budget (the user chose them, and ``/pin`` put an original
    in full only when it fitted the window): a pin never makes eviction take the user's prompts
    or open errors. Only a hard target (the window would overflow, or ``/evict N``) may put a
    pinned original back to its summary, and that comes before any pair is dropped."""
    hard = hard_target is not None
    if session.keeper is not None:
        mark_messages(session)  # what the facts know about failures and fixes, as priorities
    budget = session.budget(coder)
    total = before = history_tokens(session, coder)
    outside = 0 if hard else total - history_tokens(session, coder, pinned=False)
    slots = _slots(session, coder, hard)
    recent = session.config.recent_turns
    over = total - outside > budget or (hard_target is not None and total > hard_target)
    target = hard_target if hard_target is not None else int(budget * LOW_WATER) + outside
    steps: list[Step] = []
    now = {id(s.meta): s.meta.tokens_now for s in slots if s.meta is not None}
    state = {id(s.meta): s.meta.state for s in slots if s.meta is not None}

    def take(action: str, tier: str, slot: Slot, freed: int) -> None:
        nonlocal total
        total -= freed
        now[id(slot.meta)] -= freed
        state[id(slot.meta)] = action
        steps.append(Step(action, tier, (slot,), freed))

    def summarizable(slot: Slot) -> bool:
        return state[id(slot.meta)] == "full" and _can_summarize(slot.record)

    aged = [
        s
        for s in slots
        if not s.protected
        and _can_summarize(s.record)
        and session.turn - s.record.last_ref_turn >= recent
    ]
    savings = sum(s.record.tokens_full - s.record.tokens_summary for s in aged)
    if aged and (over or savings >= max(MIN_BATCH, int(budget * BATCH_SHARE))):
        for s in aged:
            take("summary", "aged", s, s.record.tokens_full - s.record.tokens_summary)
    if not over:
        return Plan(steps, before, budget, target, hard)
    candidates = sorted(
        (s for s in slots if not s.protected and s.meta is not None),
        key=lambda s: priority(s.record, session),
    )
    for s in candidates:  # tier 1
        if total <= target:
            break
        if summarizable(s):
            take("summary", "summary", s, s.record.tokens_full - s.record.tokens_summary)
    model = model_name(coder)
    for s in candidates:  # tier 2
        if total <= target:
            break
        meta = s.record
        if not meta.stored or meta.kind == "filler" or state[id(meta)] == "ref":
            continue
        ref = count_tokens(reference_text(replace(meta, state=state[id(meta)])), model)
        if ref < now[id(meta)]:
            take("ref", "ref", s, now[id(meta)] - ref)
    if hard:  # a pin yields its full text before anyone's prompt is dropped for it
        for s in slots:
            if total <= target:
                break
            if s.meta is not None and s.meta.pinned and summarizable(s):
                take("summary", "pinned", s, s.meta.tokens_full - s.meta.tokens_summary)
    if total > target:  # tier 3
        frame = framing(coder)
        for a, b in _pairs(session, slots):
            if total <= target:
                break
            freed = now[id(a.meta)] + now[id(b.meta)] + 2 * frame
            total -= freed
            steps.append(Step("drop", "drop", (a, b), freed))
    return Plan(steps, before, budget, target, hard)


def evict(
    session: GardenerSession,
    coder: CoderLike,
    hard_target: int | None = None,
    todo: Plan | None = None,
) -> EvictionReport:
    """Age and, if over budget (or above ``hard_target`` on overflow), evict in place: the
    steps of ``plan`` (``todo`` when the caller made it just now), in its order."""
    todo = todo if todo is not None else plan(session, coder, hard_target)
    report = apply(session, coder, todo)
    ev = session.events
    ev.aged += report.aged
    ev.summarized += report.summarized
    ev.referenced += report.referenced
    ev.dropped += report.dropped
    ev.hard = ev.hard or todo.hard
    return report


def apply(session: GardenerSession, coder: CoderLike, todo: Plan) -> EvictionReport:
    report = EvictionReport(before=todo.before, budget=todo.budget)
    model = model_name(coder)
    checkpointed = False
    drops = []
    for step in todo.steps:
        if step.action in ("ref", "drop") and not checkpointed:
            checkpointed = True
            if session.keeper is not None:
                # tiers 2-3 lose detail from the prompt: keep the thread on disk first
                session.attempt("checkpoint", session.keeper.auto_checkpoint, coder, "eviction")
        s = step.slots[0]
        if step.action == "summary":
            swap(session, s.lst, s.index, s.record, "summary")
            if step.tier == "aged":
                report.aged += 1
            else:
                report.summarized += 1
        elif step.action == "ref":
            s.record.tokens_ref = count_tokens(reference_text(s.record), model)
            swap(session, s.lst, s.index, s.record, "ref")
            report.referenced += 1
        else:
            drops.append(step.slots)
    for a, b in sorted(drops, key=lambda p: p[0].index, reverse=True):
        del a.lst[a.index : a.index + 2]
        session.discard(a.record)
        session.discard(b.record)
        report.dropped += 2
    report.after = history_tokens(session, coder)
    return report


def _droppable(meta: MessageMeta) -> bool:
    return meta.stored or meta.kind == "filler"


def _pairs(session: GardenerSession, slots: list[Slot]) -> list[tuple[Slot, Slot]]:
    """Tier 3's candidates: whole (user, assistant) pairs, lowest priority first. Everything
    dropped is in the store; recall brings it back."""
    by_list: dict[int, list[Slot]] = {}
    for s in slots:
        by_list.setdefault(id(s.lst), []).append(s)
    pairs = []
    for group in by_list.values():
        i = 0
        while i + 1 < len(group):
            a, b = group[i], group[i + 1]
            if (
                a.lst[a.index].get("role") == "user"
                and b.lst[b.index].get("role") == "assistant"
                and not a.protected
                and not b.protected
                and _droppable(a.record)
                and _droppable(b.record)
            ):
                prio = max(priority(a.record, session), priority(b.record, session))
                pairs.append((prio, a, b))
                i += 2
            else:
                i += 1
    pairs.sort(key=lambda p: p[0])
    return [(a, b) for _prio, a, b in pairs]


def rewrite_for_switch(session: GardenerSession, messages: list) -> list:
    """What Aider's ``summarize_all`` is for on an edit-format switch: old replies written in the
    previous edit format would teach the new coder the wrong format. Instead of an LLM summary
    (which also breaks alternation: it returns a lone user message), replies containing edit
    blocks are swapped for their summaries (``edited path: +A -R lines``); a new list."""
    out = list(messages)
    for i, msg in enumerate(out):
        meta = session.meta(msg)
        if meta is None or meta.kind != "reply" or not _can_summarize(meta):
            continue
        if EDIT_MARKERS.search(meta.original):
            swap(session, out, i, meta, "summary")
    return out


class GardenerSummary:
    """Stands in for Aider's ``ChatSummary`` on gardened coders: the same interface, no LLM.
    History size is managed by ``evict`` before each request, so nothing here is ever "too
    big", and ``summarize_all`` (called by ``Coder.create`` on a mode switch) rewrites instead
    of summarizing."""

    def __init__(self, session: GardenerSession, model: Any, max_tokens: int = 1024) -> None:
        self.session = session
        self.models = [model]
        self.max_tokens = max_tokens
        self.token_count = model.token_count

    def too_big(self, messages: list) -> bool:
        return False

    def tokenize(self, messages: list) -> list:
        return [(self.token_count(msg), msg) for msg in messages]

    def summarize(self, messages: list, depth: int = 0) -> list:
        return list(messages)

    summarize_real = summarize

    def summarize_all(self, messages: list) -> list:
        return self.session.attempt(
            "mode switch", rewrite_for_switch, self.session, messages, default=list(messages)
        )
