"""``/context-pressure``: the live prompt against the model's window, and the store's report.

The prompt is counted as Aider will send it (``format_messages()``), split by chunk (system
prompt and examples, repo map, read-only and chat files, history by class and state, recalled
context), so the user sees where the window goes and what the gardener can still take out.
"""

from __future__ import annotations

from typing import Any

from ..tokens import count_tokens
from .ingest import model_name
from .session import GardenerSession, window_of


def _tokens(messages: list, model: str) -> int:
    total = 0
    for msg in messages or ():
        content = msg.get("content")
        if isinstance(content, str):
            total += count_tokens(content, model) + 4
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += count_tokens(part["text"], model)
            total += 4
    return total


def live_pressure(coder: Any, session: GardenerSession) -> dict[str, Any]:
    """Token counts of the prompt Aider would send now, by chunk and by history class."""
    model = model_name(coder)
    chunks = coder.format_messages()
    parts = {
        "system prompt": _tokens(chunks.system, model) + _tokens(chunks.reminder, model),
        "examples": _tokens(chunks.examples, model),
        "read-only files": _tokens(chunks.readonly_files, model),
        "repo map": _tokens(chunks.repo, model),
        "chat files": _tokens(chunks.chat_files, model),
    }
    by_class: dict[str, list[int]] = {}
    history = 0
    shared = {id(m) for m in list(coder.done_messages) + list(coder.cur_messages)}
    for msg in list(chunks.done) + list(chunks.cur):
        n = _tokens([msg], model)
        history += n
        meta = session.meta(msg)
        if meta is not None:
            key = f"{meta.cls} ({meta.state})" if meta.state != "full" else meta.cls
        elif id(msg) in shared:
            key = "untracked"
        else:
            key = "gardener context"  # the recall pair or the incremental summary
        row = by_class.setdefault(key, [0, 0])
        row[0] += 1
        row[1] += n
    total = sum(parts.values()) + history
    original = 0
    for lst in (coder.done_messages, coder.cur_messages):
        for msg in lst:
            meta = session.meta(msg)
            original += meta.tokens_full if meta is not None else _tokens([msg], model)
    return {
        "model": model,
        "window": window_of(coder),
        "budget": session.budget(coder),
        "parts": parts,
        "history": history,
        "history_original": original,
        "history_by_class": by_class,
        "total": total,
    }


def recommendation(live: dict[str, Any], store_report: dict[str, Any]) -> str:
    window = live["window"]
    if window and live["total"] >= 0.8 * window:
        biggest = max(live["parts"].items(), key=lambda kv: kv[1])
        if biggest[1] >= live["history"]:
            return (
                f"High pressure: the prompt uses {live['total']:,} of {window:,} tokens, most of"
                f" it {biggest[0]} ({biggest[1]:,}); /drop files or lower --map-tokens."
            )
        return (
            f"High pressure: the prompt uses {live['total']:,} of {window:,} tokens; lower"
            " --gardener-budget or /clear."
        )
    if live["history"] > live["budget"]:
        return (
            f"History ({live['history']:,} tokens) is over the gardener budget"
            f" ({live['budget']:,}); the next request will evict down to it."
        )
    return store_report.get("recommendation") or "Healthy: no action needed."


def show_pressure(coder: Any, session: GardenerSession, io: Any) -> None:
    live = session.attempt("pressure", live_pressure, coder, session)
    store = session.open_store(coder)
    store_report = (
        session.attempt("pressure", store.context_pressure, 5, live and live["budget"], default={})
        if store is not None
        else {}
    ) or {}
    if live is None:
        io.tool_error("Could not measure the live prompt.")
        return
    window = live["window"]

    def row(tokens: int, label: str, note: str = "") -> None:
        share = f"{100 * tokens / window:5.1f}%" if window else "     "
        io.tool_output(f"{tokens:>9,} {share}  {label}{('  ' + note) if note else ''}")

    io.tool_output(
        f"Context pressure for {live['model']}"
        + (f" (window {window:,} tokens)" if window else "")
        + ", in tokens:"
    )
    io.tool_output()
    for label, tokens in live["parts"].items():
        if tokens:
            row(tokens, label)
    row(
        live["history"],
        "chat history",
        f"(originally {live['history_original']:,}; gardener budget {live['budget']:,})",
    )
    for label, (count, tokens) in sorted(
        live["history_by_class"].items(), key=lambda kv: -kv[1][1]
    ):
        row(tokens, f"  {label}", f"{count} message(s)")
    io.tool_output("=" * 18)
    row(live["total"], "total prompt")
    if window:
        io.tool_output(f"{window - live['total']:>9,}         remaining in the context window")
    if store_report:
        io.tool_output()
        io.tool_output(
            f"Store ({store_report.get('scope')} scope): {store_report.get('entries', 0)}"
            f" entries, {store_report.get('tokens_original', 0):,} tokens stored as"
            f" {store_report.get('tokens_summary', 0):,} in summaries"
            f" (ratio {store_report.get('ratio', 1.0):.3f})"
        )
        for cls, v in sorted(
            (store_report.get("by_class") or {}).items(), key=lambda kv: -kv[1]["original"]
        ):
            io.tool_output(
                f"  {cls:<10} {v['count']:>5} entries {v['original']:>9,} -> {v['summary']:>8,}"
                f"  ratio {v['ratio']:.3f}"
            )
        cands = store_report.get("eviction_candidates") or []
        if cands:
            io.tool_output(
                "Eviction candidates: "
                + ", ".join(f"{c['id']} ({c['cls']}, {c['tokens']:,} tok)" for c in cands)
            )
    io.tool_output("Recommendation: " + recommendation(live, store_report))
