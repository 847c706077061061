"""Keep the chat history under its budget by compressing and evicting, not by an LLM summary.

``EvictingSummary`` is a drop-in for ``aider.history.ChatSummary`` (``--history-eviction``).
Aider's summarizer rewrites old turns as prose with the weak model: a paid call per overflow, a
wait, and the exact strings the next request needs (test ids, error codes, path:line) are often
lost. Here, lowest priority first, until the history is back under ``LOW_WATER`` of the budget:

1. a message is replaced by its compressed form (``aider.gardener.compress``), which keeps
   failing test ids, exception lines, paths and error codes;
2. then by a one-line reference to it;
3. then the oldest user/assistant pairs are dropped.

Priority is the class of the message (the user's own words and errors highest, logs lowest, see
``store.priority.BASE``) plus a bonus for being recent. The last ``keep_recent`` turns are never
touched. With a store, originals are stored first and summaries name their id, so ``recall``
can bring any of them back; without one, the handle line is left out.
"""

from aider.history import ChatSummary

from .ingest import message_source
from .pipeline import compress
from .store.priority import BASE, DEFAULT_BASE, RECENCY_MAX
from .types import HANDLE_PREFIX

LOW_WATER = 0.8


class EvictingSummary(ChatSummary):
    def __init__(self, models=None, max_tokens=1024, store=None, keep_recent=2):
        super().__init__(models, max_tokens)
        self.store = store
        self.keep_recent = keep_recent

    def summarize(self, messages, depth=0):
        messages = self.evict(list(messages))
        if messages and messages[-1]["role"] != "assistant":
            messages.append(dict(role="assistant", content="Ok."))
        return messages

    def summarize_all(self, messages):
        """Used when the edit format changes: every message in its compressed form."""
        return [self.compressed(msg)[0] for msg in messages]

    def evict(self, messages):
        sizes = [self.token_count(msg) for msg in messages]
        if sum(sizes) <= self.max_tokens:
            return messages
        target = int(self.max_tokens * LOW_WATER)
        protected = max(0, len(messages) - 2 * self.keep_recent)
        order = sorted(range(protected), key=lambda i: self.priority(messages, i, protected))

        for tier in (self.compressed, self.reference):
            for i in order:
                if sum(sizes) <= target:
                    return messages
                if not isinstance(messages[i].get("content"), str):
                    continue
                smaller, _ = tier(messages[i])
                size = self.token_count(smaller)
                if size < sizes[i]:
                    messages[i], sizes[i] = smaller, size

        # Drop whole leading pairs, so the user/assistant alternation stays as it was.
        while sum(sizes) > target and protected >= 2:
            del messages[:2], sizes[:2]
            protected -= 2
        return messages

    def priority(self, messages, i, count):
        msg = messages[i]
        if not isinstance(msg.get("content"), str):
            return float("inf")
        text, source = message_source(msg)
        if source.role == "user":
            cls = "prompt"
        elif source.role == "tool":
            cls = str(compress(text, source).cls)
        else:
            cls = str(compress(text, source).cls) if len(text) > 200 else "prose"
        return BASE.get(cls, DEFAULT_BASE) + RECENCY_MAX * (i + 1) / max(count, 1)

    def compressed(self, msg):
        if not isinstance(msg.get("content"), str):
            return msg, None
        text, source = message_source(msg)
        if self.store is not None:
            entry = self.store.ingest(text, source)
            summary, entry_id = entry.summary, entry.id if entry.stored else None
        else:
            result = compress(text, source)
            summary, entry_id = result.summary, None
        if entry_id is None:
            summary = "\n".join(
                line for line in summary.splitlines() if not line.startswith(HANDLE_PREFIX)
            )
        if text is not msg["content"]:  # command output: keep the command it came from
            summary = f"Output of `{source.command}` (compressed):\n\n{summary}"
        return dict(msg, content=summary), entry_id

    def reference(self, msg):
        smaller, entry_id = self.compressed(msg)
        first = (msg["content"].strip().splitlines() or [""])[0][:80]
        where = f"; recall id={entry_id}" if entry_id else ""
        tokens = self.token_count(msg["content"])
        return (
            dict(msg, content=f"[{msg['role']} message evicted, {tokens} tokens{where}: {first}]"),
            entry_id,
        )
