"""Replay a real ``.aider.chat.history.md`` through a gardened coder, turn by turn.

Aider's own parser (``split_chat_history_markdown``) splits the file into user, assistant and
tool messages; each user message starts a turn, tool output seen during a turn enters the next
one as Aider's ``/run`` output pair. The driver does per turn what Aider does around a request
(append the prompt, let the gardener work, append the reply, move the exchange to
``done_messages``) but calls the gardener's steps directly, so they can be timed alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aider_gardener.integration.eviction import evict, history_tokens
from aider_gardener.integration.ingest import sync
from aider_gardener.integration.rag import recall_pair


@dataclass
class Turn:
    prompt: str
    reply: str = ""
    outputs: list[str] = field(default_factory=list)


def turns_from_history(path: Path, limit: int | None = None) -> list[Turn]:
    from aider.utils import split_chat_history_markdown

    text = path.read_text(encoding="utf-8", errors="replace")
    turns: list[Turn] = []
    for msg in split_chat_history_markdown(text, include_tool=True):
        role, content = msg["role"], msg["content"]
        if role == "user":
            turns.append(Turn(prompt=content))
        elif turns and role == "assistant":
            turns[-1].reply += content
        elif turns and role == "tool":
            turns[-1].outputs.append(content)
        if limit and len(turns) > limit:
            break
    return [t for t in turns[:limit] if t.prompt.strip()]


def begin_turn(coder: Any, turn: Turn, previous: Turn | None) -> None:
    """What enters the chat before the gardener works on a request."""
    cur = coder.cur_messages
    for out in previous.outputs if previous else ():
        cur += [
            dict(
                role="user",
                content=f"I ran this command:\n\n/run\n\nAnd got this output:\n\n{out}",
            ),
            dict(role="assistant", content="Ok."),
        ]
    cur.append(dict(role="user", content=turn.prompt))


def gardener_work(coder: Any) -> int:
    """Ingest + eviction + RAG for the pending request; returns history tokens after."""
    session = coder.gardener
    sync(session, coder)
    evict(session, coder)
    recall_pair(session, coder, coder.cur_messages[-1]["content"])
    return history_tokens(session, coder)


def end_turn(coder: Any, turn: Turn) -> None:
    coder.cur_messages.append(dict(role="assistant", content=turn.reply or "Ok."))
    coder.done_messages += coder.cur_messages
    coder.cur_messages = []
