"""``/tokens``, ``/context-pressure`` and ``/evict``: the prompt as the next request carries it.

One measurement serves all three, so they cannot disagree with each other or with the request:
the chunks come from ``format_messages()`` inside ``coder.garden_preview()`` (the view, the
session-state block and the recall pair, built without ingesting, evicting, checkpointing or
writing to the store), and every count is Aider's own ``main_model.token_count`` over message
lists, the count Aider prints as "Tokens: N sent". The rows add up to that total exactly: the
per-request framing (the reply priming litellm adds once) is counted with the system prompt.

The budget is shown as configured; the state block's share of it is shown beside it, because
eviction pays for the block out of the budget and a netted figure (1,500 shown as 1,226) reads
as a bug. Recommendations name only things the user can do: a chat command that exists
(``/drop``, ``/evict``, ``/soft-restart``, ``/clear``) or a restart flag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator

from aider.utils import is_image_file

from .eviction import Plan, Step, history_tokens, plan
from .incremental import HEADER as INCREMENTAL_HEADER
from .keeper import STATE_HEADER
from .rag import HEADER as RECALL_HEADER
from .session import GardenerSession, framing, model_name, window_of

if TYPE_CHECKING:
    from ..store.db import Store
    from .seams import CoderLike


HIGH_SHARE = 0.80  # of the window: above it the recommendation is about the biggest part
SHOW_NEXT = 3  # lowest-priority messages listed as what /evict takes first

SYSTEM, EXAMPLES, READONLY, REPO = "system prompt", "examples", "read-only files", "repo map"
STATE, HISTORY, RECALLED, FILES = "session state", "chat history", "recalled context", "chat files"
ORDER = (SYSTEM, EXAMPLES, READONLY, REPO, STATE, HISTORY, RECALLED, FILES)


def _counter(coder: CoderLike):
    """Tokens of a message list as Aider counts a request, without the once-per-request
    framing (returned second, so the parts can carry it once)."""
    count = coder.main_model.token_count
    base = int(count([]) or 0)

    def tokens(messages: list) -> int:
        return max(0, int(count(list(messages)) or 0) - base) if messages else 0

    return tokens, base


def gardener_label(msg: dict) -> str | None:
    content = msg.get("content")
    if msg.get("role") != "user" or not isinstance(content, str):
        return None
    if content.startswith(STATE_HEADER):
        return STATE
    if content.startswith(RECALL_HEADER):
        return RECALLED
    if content.startswith(INCREMENTAL_HEADER):
        return "summary of earlier turns"
    return None


def labelled(messages: Iterable[dict]) -> Iterator[tuple[dict, str | None]]:
    """Each message with its ``gardener_label``; the assistant half of a gardener pair (the
    reply to the state or recall block) takes the user half's. ``measure`` and the status line
    split the history by this, so they count the same messages as state and recall."""
    pending: str | None = None
    for msg in messages:
        label = gardener_label(msg)
        if label is None and pending and msg.get("role") == "assistant":
            label = pending
        pending = label
        yield msg, label


def measure(coder: CoderLike, session: GardenerSession) -> dict[str, Any]:
    """The prompt a request sent now would carry, by part and by history class; no side
    effects (``garden_preview``). ``total`` is ``main_model.token_count`` of its messages."""
    with coder.garden_preview():
        chunks = coder.format_messages()
    tokens, base = _counter(coder)
    parts = dict.fromkeys(ORDER, 0)
    parts[SYSTEM] = tokens(chunks.system) + tokens(chunks.reminder) + base
    parts[EXAMPLES] = tokens(chunks.examples)
    parts[READONLY] = tokens(chunks.readonly_files)
    parts[REPO] = tokens(chunks.repo)
    parts[FILES] = tokens(chunks.chat_files)
    by_class: dict[str, list[int]] = {}
    for msg, label in labelled(list(chunks.done) + list(chunks.cur)):
        n = tokens([msg])
        if label in (STATE, RECALLED):
            parts[label] += n
            continue
        parts[HISTORY] += n
        meta = session.meta(msg)
        if label is None:
            if meta is None:
                label = "untracked"
            else:
                label = f"{meta.cls} ({meta.state})" if meta.state != "full" else meta.cls
        row = by_class.setdefault(label, [0, 0])
        row[0] += 1
        row[1] += n
    messages = chunks.all_messages()
    total = int(coder.main_model.token_count(messages) or 0) + _pending_reminder(coder, chunks)
    parts[SYSTEM] += total - sum(parts.values())  # non-additive tokenizers: keep rows exact
    original = 0
    frame = framing(coder)
    for lst in (coder.done_messages, coder.cur_messages):
        for msg in lst:
            meta = session.meta(msg)
            original += meta.tokens_full + frame if meta is not None else tokens([msg])
    configured = session.configured_budget(coder)
    keeper = session.keeper
    state_share = keeper.state_tokens(coder) if keeper is not None else 0
    return {
        "model": model_name(coder),
        "window": window_of(coder),
        "messages": messages,
        "parts": parts,
        "history_by_class": by_class,
        "history_original": original,
        "total": total,
        "budget": configured,
        "budget_set": bool(session.config.budget),
        "state_share": state_share,
        "history_limit": session.budget(coder),
        "history_counted": history_tokens(session, coder),
        "history_pinned": history_tokens(session, coder) - history_tokens(session, coder, False),
        "recall_ids": _recall_ids(messages),
        "forecast": forecast(coder, session),
    }


def _pending_reminder(coder: CoderLike, chunks: Any) -> int:
    """Models with ``reminder: user`` get the system reminder appended to the user's message
    (Aider's ``format_chat_chunks``): between turns there is no such message yet, but the next
    request will carry the reminder in it, so it is counted with the system prompt."""
    model = coder.main_model
    reminder = getattr(coder.gpt_prompts, "system_reminder", "")
    if getattr(model, "reminder", None) != "user" or not reminder:
        return 0
    if chunks.cur and chunks.cur[-1].get("role") == "user":
        return 0  # already in it
    return int(model.token_count("\n\n" + coder.fmt_system_prompt(reminder)) or 0)


def _recall_ids(messages: list) -> list[str]:
    import re

    for msg in messages:
        if gardener_label(msg) == RECALLED:
            return re.findall(r"^--- id=(\w+)", msg["content"], re.M)
    return []


def forecast(coder: CoderLike, session: GardenerSession) -> tuple[str, Plan]:
    """What ``/evict`` would do now, from the plan ``/evict`` itself runs: over the budget,
    ``/evict`` alone; within it (or when the last turns hold it all), ``/evict N``, whose steps
    for any N are the first ones of this list. Read only."""
    limit = session.budget(coder)
    if history_tokens(session, coder, pinned=False) > limit:
        todo = plan(session, coder)
        if todo.steps:
            return "/evict", todo
    return "/evict N", plan(session, coder, 0)


def describe_step(step: Step) -> str:
    """``ID class old -> new (-N)`` for one step of a plan; a dropped pair is named by its
    user message."""
    meta = step.metas[0]
    name = meta.entry_id or "(filler)"
    if step.action == "drop":
        return f"{name} {meta.kind} + reply dropped (-{step.freed:,})"
    return f"{name} {meta.cls} {meta.state} -> {step.action} (-{step.freed:,})"


def recommendation(live: dict[str, Any], coder: CoderLike) -> str:
    """One line naming a command (or a restart flag) that acts on the biggest problem."""
    window, total, parts = live["window"], live["total"], live["parts"]
    over = live["history_counted"] - live["history_pinned"] > live["history_limit"]
    if window and total >= HIGH_SHARE * window:
        where, size = max(parts.items(), key=lambda kv: kv[1])
        head = f"High pressure: the prompt uses {total:,} of {window:,} tokens, most of it {where}"
        head += f" ({size:,})"
        if where in (FILES, READONLY):
            big = _largest_files(coder)
            return head + f"; /drop {big} to free it." if big else head + "; /drop files."
        if where == REPO:
            return head + f"; restart with a smaller --map-tokens (now {size:,})."
        if where in (HISTORY, STATE, RECALLED):
            return (
                head + "; /evict N frees N tokens now, /soft-restart checkpoints and clears the"
                " chat (the store keeps everything)."
            )
        return head + "; /drop files or /clear the chat."
    if over:
        return (
            f"History ({live['history_counted']:,} tokens) is over the gardener budget"
            f" ({live['budget']:,}, of which the session state takes {live['state_share']:,});"
            " /evict now, or the next request evicts down to it."
        )
    return "Healthy: no action needed."


def _largest_files(coder: CoderLike) -> str:
    sizes = []
    for fname in list(coder.abs_fnames) + list(coder.abs_read_only_fnames):
        try:
            text = coder.io.read_text(fname, silent=True) or ""
        except TypeError:  # an io without ``silent``
            text = coder.io.read_text(fname) or ""
        sizes.append((len(text), coder.get_rel_fname(fname)))
    sizes.sort(reverse=True)
    return " ".join(name for _, name in sizes[:2])


def _budget_line(live: dict[str, Any]) -> str:
    """The numbers of the rows above (eviction counts the history as the request does); the
    configured figure is shown as configured."""
    source = "--gardener-budget" if live["budget_set"] else "Aider's chat history size"
    pinned = live["history_pinned"]
    outside = f", of which {pinned:,} pinned, outside the budget" if pinned else ""
    return (
        f"Gardener budget {live['budget']:,} tokens ({source}) for the session state"
        f" ({live['state_share']:,}) and the chat history ({live['history_counted']:,}{outside}):"
        f" history is evicted above {live['history_limit']:,}."
    )


def _forecast_line(live: dict[str, Any]) -> str | None:
    command, todo = live["forecast"]
    if not todo.steps:
        return None
    shown = "; ".join(describe_step(st) for st in todo.steps[:SHOW_NEXT])
    more = len(todo.steps) - SHOW_NEXT
    if command == "/evict":
        freed = sum(st.freed for st in todo.steps)
        rest = f"; {more} more" if more > 0 else ""
        return f"/evict now would take, in this order: {shown}{rest} (frees {freed:,})."
    return f"First to go with /evict N, in this order: {shown}" + ("; …" if more > 0 else "") + "."


def show_pressure(coder: CoderLike, session: GardenerSession, io: Any) -> None:
    """``/context-pressure``: read only; this session's prompt and this session's entries."""
    live = session.attempt("pressure", measure, coder, session)
    if live is None:
        io.tool_error("Could not measure the live prompt.")
        return
    store = session.store  # opened by the first request; a report never opens (creates) it
    store_report = {}
    if store is not None:
        from ..store.pressure import context_pressure

        store_report = (
            session.attempt("pressure", context_pressure, store, 5, None, "session", default={})
            or {}
        )
    window = live["window"]

    def row(tokens: int, label: str, note: str = "") -> None:
        share = f"{100 * tokens / window:5.1f}%" if window else "     "
        io.tool_output(f"{tokens:>9,} {share}  {label}{('  ' + note) if note else ''}")

    io.tool_output(
        f"Context pressure for {live['model']}"
        + (f" (window {window:,} tokens)" if window else "")
        + ", in tokens, as the next request carries it:"
    )
    io.tool_output()
    for label, tokens in live["parts"].items():
        if label == HISTORY:
            row(tokens, HISTORY, f"(originally {live['history_original']:,})")
            for name, (count, n) in sorted(
                live["history_by_class"].items(), key=lambda kv: -kv[1][1]
            ):
                row(n, f"  {name}", f"{count} message(s)")
        elif label == RECALLED and tokens:
            row(tokens, label, "for the last message: " + ", ".join(live["recall_ids"]))
        elif tokens:
            row(tokens, label)
    io.tool_output("=" * 18)
    row(live["total"], "total prompt", "(/tokens counts the same)")
    if window:
        io.tool_output(f"{window - live['total']:>9,}         remaining in the context window")
    io.tool_output()
    io.tool_output(_budget_line(live))
    line = _forecast_line(live)
    if line:
        io.tool_output(line)
    if store_report:
        project = store_report.get("project") or {}
        io.tool_output(
            f"Store (this session): {store_report.get('entries', 0)} entries,"
            f" {store_report.get('tokens_original', 0):,} tokens kept as"
            f" {store_report.get('tokens_summary', 0):,} in summaries"
            f" (ratio {store_report.get('ratio', 1.0):.3f}); the project's store holds"
            f" {project.get('entries', 0)} entries ({project.get('tokens_original', 0):,} tokens)."
        )
        for cls, v in sorted(
            (store_report.get("by_class") or {}).items(), key=lambda kv: -kv[1]["original"]
        ):
            io.tool_output(
                f"  {cls:<10} {v['count']:>5} entries {v['original']:>9,} -> {v['summary']:>8,}"
                f"  ratio {v['ratio']:.3f}"
            )
        line = _vectors_line(store, store_report.get("pending_embeddings", 0))
        if line:
            io.tool_output(line)
    io.tool_output("Recommendation: " + recommendation(live, coder))


def _vectors_line(store: Store | None, pending: int) -> str:
    """Which model semantic recall uses and whether indexing has caught up: after a switch of
    ``--gardener-embedder`` the whole store is re-indexed, and this is where one sees how far."""
    index = getattr(store, "vectors", None)
    if index is None:
        return "Semantic recall: off (full-text search only)."
    from ..store import model_choice

    name = model_choice.active_name()
    if not index.healthy:
        return f"Semantic recall: {name}, unavailable now (full-text search only)."
    waiting = f"{pending:,} chunks waiting to be indexed" if pending else "everything indexed"
    return f"Semantic recall: {name}, {waiting}."


def show_tokens(coder: CoderLike, session: GardenerSession, io: Any) -> None:
    """Aider's ``/tokens`` table over the gardened prompt: with the state block and the recall
    pair, and the history as eviction left it, so its total is the request's."""
    live = measure(coder, session)
    model = coder.main_model
    price = model.info.get("input_cost_per_token") or 0
    parts = live["parts"]
    res = [(parts[SYSTEM], "system messages", "")]
    if parts[EXAMPLES]:
        res.append((parts[EXAMPLES], "example messages", ""))
    if parts[STATE]:
        res.append((parts[STATE], "session state", "facts kept by aider-gardener"))
    if live["history_by_class"] or parts[HISTORY]:
        res.append((parts[HISTORY], "chat history", "use /evict to shrink, /clear to clear"))
    if parts[RECALLED]:
        res.append((parts[RECALLED], "recalled context", "for the last message"))
    if parts[REPO]:
        res.append((parts[REPO], "repository map", "use --map-tokens to resize"))
    res.extend(_file_rows(coder, parts[FILES] + parts[READONLY]))

    io.tool_output(f"Context window usage for {model.name}, in tokens (the next request's):")
    io.tool_output()
    width, cost_width = 8, 9
    col_width = max(len(r[1]) for r in res)
    total_cost = 0.0
    for tk, msg, tip in res:
        cost = tk * price
        total_cost += cost
        io.tool_output(f"${cost:7.4f} {tk:>{width},} {msg.ljust(col_width)} {tip}".rstrip())
    io.tool_output("=" * (width + cost_width + 1))
    io.tool_output(f"${total_cost:7.4f} {live['total']:>{width},} tokens total")
    limit = live["window"]
    if not limit:
        return
    pad = " " * cost_width
    remaining = limit - live["total"]
    if remaining > 1024:
        io.tool_output(f"{pad}{remaining:>{width},} tokens remaining in context window")
    else:
        io.tool_error(
            f"{pad}{remaining:>{width},} tokens remaining in context window (use /drop, /evict"
            " or /clear to make space)"
        )
    io.tool_output(f"{pad}{limit:>{width},} tokens max context window size")


def _file_rows(coder: CoderLike, chunk_tokens: int) -> list[tuple[int, str, str]]:
    """A row per file, as Aider estimates it, plus the files prompt's own words, so the rows
    still add up to the tokens the file messages take."""
    if not chunk_tokens:
        return []
    model = coder.main_model
    fence = "`" * 3
    rows = []
    for fname, suffix in [(f, "") for f in coder.abs_fnames] + [
        (f, " (read-only)") for f in coder.abs_read_only_fnames
    ]:
        rel = coder.get_rel_fname(fname)
        if is_image_file(rel):
            n = int(model.token_count_for_image(fname) or 0)
        else:
            content = coder.io.read_text(fname)
            if content is None:
                continue
            n = int(model.token_count(f"{rel}\n{fence}\n{content}{fence}\n") or 0)
        rows.append((n, rel + suffix, "/drop to remove"))
    rows.sort()
    rest = chunk_tokens - sum(r[0] for r in rows)
    if rest < 0:
        return [(chunk_tokens, "chat files", "/drop to remove")]
    if rest:
        rows.insert(0, (rest, "file listing prompts", ""))
    return rows
