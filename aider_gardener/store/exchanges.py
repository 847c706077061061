"""A request, the reply to it and the output of what the reply ran fold into one recall hit.

The store indexes each turn with the turn it answers, so a question about an exchange finds
its parts side by side, and which of them ranks first is close to a coin toss: "do you use
SKU along with id" is the user's words and the reply's subject at once, and "git push got
interrupted" is the reply that proposed the push and the ``^C`` after it. Asked an hour later,
the user wants the exchange. An explicit recall (``/recall``, the MCP tool) shows it as one hit,
the best-ranked part first and the others under it, which also frees slots for something else.
Per-turn recall keeps entries apart: it spends a token budget on each entry it injects, and
the part already in the chat is not worth injecting again.
Measured: docs/decisions/095-recall-by-meaning.md ("Fourth pass").
"""

from __future__ import annotations

from typing import Any, Mapping

MAX_PARTS = 3  # what was asked (or the output answered), the reply, the output of its command


def exchanges(
    head: list[str], entries: Mapping[str, Any], before: Mapping[str, str]
) -> dict[str, str]:
    """Each entry of ``head`` in an exchange with another -> its exchange's best-ranked entry.
    ``before`` maps an entry to the one stored just before it in its session. Two ranked
    entries are parts of one exchange when one follows the other and the later is the
    assistant's reply to a prompt or an output, or a tool's output after a reply; an exchange
    has at most ``MAX_PARTS`` parts, joined best-ranked link first."""
    rank = {eid: i for i, eid in enumerate(head)}
    links = []
    for eid in head:
        prev = before.get(eid)
        if prev is None or prev not in rank or prev == eid:
            continue
        later, earlier = _role(entries.get(eid)), _role(entries.get(prev))
        if (later == "assistant" and earlier != "assistant") or (
            later == "tool" and earlier == "assistant"
        ):
            links.append((min(rank[eid], rank[prev]), prev, eid))
    group: dict[str, list[str]] = {}
    for _, a, b in sorted(links):
        ga, gb = group.get(a, [a]), group.get(b, [b])
        if ga is gb or len(ga) + len(gb) > MAX_PARTS:
            continue
        merged = ga + gb
        for eid in merged:
            group[eid] = merged
    return {eid: min(g, key=rank.__getitem__) for eid, g in group.items()}


def fold(
    ordered: list[str], exchange_of: Mapping[str, str]
) -> tuple[list[str], dict[str, list[str]]]:
    """``ordered`` with each exchange in the place of its best-ranked part, and for that part
    the others, in rank order."""
    kept: list[str] = []
    rest: dict[str, list[str]] = {}
    for eid in ordered:
        first = exchange_of.get(eid, eid)
        if first == eid:
            kept.append(eid)
        elif first in kept:
            rest.setdefault(first, []).append(eid)
        else:  # its best part is not among ``ordered``: it stands for itself
            kept.append(eid)
    return kept, rest


def _role(entry: Any) -> str | None:
    return getattr(entry, "role", None) if entry is not None else None
