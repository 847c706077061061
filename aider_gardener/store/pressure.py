"""The pressure report: how much context the gardener tracks, what compression saved, and what
to evict next.

It answers the user's question "why is my context full and what can go?" from the store alone;
the Aider integration adds the live prompt's numbers (and may pass the model's context window as
``budget``). Eviction candidates are the lowest-priority active entries that are not pinned,
with the tokens their summaries occupy, because the summary is what sits in context.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Callable, Protocol, TypeVar

T = TypeVar("T")


class StoreView(Protocol):
    """What the report reads of a store: a ``Store`` (``db.py``), or the MCP server's view of
    one with another session as its own (``clients/mcp_server.py``)."""

    scope: str
    session_id: str

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` in a read transaction."""


# An eviction is worth recommending when it frees at least this share of the tracked summary
# tokens and this many tokens in absolute terms (evicting 80 tokens is never worth a sentence).
EVICT_SHARE = 0.20
EVICT_MIN_TOKENS = 1000
HIGH_PRESSURE = 0.80  # of the budget
POOR_RATIO = 0.70


def context_pressure(
    store: StoreView, limit: int = 5, budget: int | None = None, scope: str | None = None
) -> dict[str, Any]:
    """``{"entries", "tokens_original", "tokens_summary", "ratio", "saved", "by_class",
    "eviction_candidates", "recommendation", "scope", "session_id", "pinned",
    "pending_embeddings", "project"}``; ``by_class`` maps class to ``{count, original, summary,
    ratio}``, candidates are ``{id, cls, tokens, priority, path, command}`` lowest priority
    first. Counts cover active entries in ``scope`` (default: the store's own): "session" is
    what this session ingested or met again, which is what a person at the chat asks about even
    when recall searches the whole project. ``project`` is the whole store's ``{entries,
    tokens_original, tokens_summary}`` (active entries), for one line of context."""
    scope = scope or store.scope
    if scope == "session":
        scope_sql = " AND e.id IN (SELECT entry_id FROM entry_sessions WHERE session_id = ?)"
        scope_args: tuple = (store.session_id,)
    else:
        scope_sql, scope_args = "", ()

    def q(c: sqlite3.Connection) -> tuple[list, list, int, int, tuple]:
        by_class = c.execute(
            "SELECT cls, count(*), coalesce(sum(tokens_original), 0),"
            " coalesce(sum(tokens_summary), 0) FROM entries e WHERE active = 1"
            + scope_sql
            + " GROUP BY cls ORDER BY sum(tokens_original) DESC",
            scope_args,
        ).fetchall()
        candidates = c.execute(
            "SELECT id, cls, tokens_summary, priority, path, command FROM entries e"
            " WHERE active = 1 AND pinned = 0"
            + scope_sql
            + " ORDER BY priority ASC, tokens_summary DESC LIMIT ?",
            (*scope_args, int(limit)),
        ).fetchall()
        pinned = c.execute(
            "SELECT count(*) FROM entries e WHERE active = 1 AND pinned = 1" + scope_sql,
            scope_args,
        ).fetchone()[0]
        pending = c.execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0]
        project = c.execute(
            "SELECT count(*), coalesce(sum(tokens_original), 0),"
            " coalesce(sum(tokens_summary), 0) FROM entries WHERE active = 1"
        ).fetchone()
        return by_class, candidates, pinned, pending, project

    rows, cand_rows, pinned, pending, project = store.read(q)
    classes = {
        cls: {"count": n, "original": o, "summary": s, "ratio": _ratio(s, o)}
        for cls, n, o, s in rows
    }
    total_o = sum(v["original"] for v in classes.values())
    total_s = sum(v["summary"] for v in classes.values())
    count = sum(v["count"] for v in classes.values())
    candidates = [
        {
            "id": eid,
            "cls": cls,
            "tokens": tokens,
            "priority": round(prio, 2),
            "path": path,
            "command": command,
        }
        for eid, cls, tokens, prio, path, command in cand_rows
    ]
    report: dict[str, Any] = {
        "entries": count,
        "tokens_original": total_o,
        "tokens_summary": total_s,
        "ratio": _ratio(total_s, total_o),
        "saved": total_o - total_s,
        "by_class": classes,
        "eviction_candidates": candidates,
        "scope": scope,
        "session_id": store.session_id,
        "pinned": pinned,
        "pending_embeddings": pending,
        "project": dict(zip(("entries", "tokens_original", "tokens_summary"), project)),
    }
    if budget:
        report["budget"] = budget
    report["recommendation"] = recommend(report, budget)
    return report


def _ratio(summary: int, original: int) -> float:
    return round(summary / original, 4) if original else 1.0


def recommend(report: dict[str, Any], budget: int | None = None) -> str:
    """One line a person can act on, from the most to the least urgent finding."""
    n = report["entries"]
    if not n:
        return "Nothing tracked yet."
    summary = report["tokens_summary"]
    candidates = report["eviction_candidates"]
    freed = sum(c["tokens"] for c in candidates)
    ids = ", ".join(c["id"] for c in candidates[:3]) + (", …" if len(candidates) > 3 else "")
    if budget and summary >= HIGH_PRESSURE * budget:
        return (
            f"High pressure: summaries use {summary:,} of {budget:,} tokens; evict "
            f"{len(candidates)} low-priority entries ({ids}) to free ~{freed:,} tokens."
        )
    if freed >= EVICT_MIN_TOKENS and freed >= EVICT_SHARE * summary:
        return (
            f"Evict {len(candidates)} low-priority entries ({ids}) to free ~{freed:,} tokens; "
            "recall brings any of them back by id."
        )
    if report["ratio"] > POOR_RATIO and report["tokens_original"] >= EVICT_MIN_TOKENS:
        return (
            f"Compression saves little here (ratio {report['ratio']:.2f}): most tracked text is "
            "kept verbatim; dropping or pinning by hand is the remaining lever."
        )
    return (
        f"Healthy: {n} entries at ratio {report['ratio']:.2f} save ~{report['saved']:,} "
        "tokens; no action needed."
    )
