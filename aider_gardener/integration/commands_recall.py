"""The store's chat commands: ``/recall QUERY [--add]``, ``/forget ID``, ``/pin ID``.

A mixin of ``GardenCommands`` (commands.py); it uses ``self.coder``, ``self.io``, ``self.gardener``
and ``self._store()`` from there.
"""

from __future__ import annotations

import re
from typing import Any

from .ingest import swap
from .session import Hint

ENTRY_ID = re.compile(r"^[a-z2-7]{10}$")
RECALL_LIMIT = 5
PREVIEW_LINES = 3


class RecallCommands:
    def cmd_recall(self, args):
        "Search what the gardener stored: /recall QUERY [--add] (--add puts originals in the chat)"
        words = args.split()
        add = "--add" in words
        query = " ".join(w for w in words if w != "--add").strip()
        if not query:
            self.io.tool_error("Usage: /recall QUERY [--add]  (QUERY may be an entry id)")
            return
        store = self._store()
        if store is None:
            return
        hits = self._recall(store, query, add)
        if not hits:
            self.io.tool_output(f"Nothing stored matches {query!r}.")
            return
        for hit in hits:
            where = f"  {hit.source_path}" if hit.source_path else ""
            self.io.tool_output(f"{hit.entry_id}  {hit.cls:<10} score {hit.score:.3f}{where}")
            lines = [line for line in hit.text.splitlines() if line.strip()]
            for line in lines[:PREVIEW_LINES]:
                self.io.tool_output(f"    {line[:160]}")
            if len(lines) > PREVIEW_LINES:
                self.io.tool_output(f"    … {len(lines) - PREVIEW_LINES} more lines")
        if add:
            self._add_recalled(hits)

    def _recall(self, store: Any, query: str, full: bool) -> list:
        if ENTRY_ID.match(query):
            entry = store.get(query)
            if entry is not None:
                from ..store import RecallHit

                if full:
                    store.touch([entry.id])
                text = entry.original if full else entry.summary
                return [RecallHit(entry.id, entry.cls, 1.0, text, entry.path, entry.created)]
        return store.recall(query, limit=RECALL_LIMIT, full=full)

    def _add_recalled(self, hits: list) -> None:
        blocks = [f"--- id={h.entry_id} ({h.cls})\n{h.text.rstrip()}" for h in hits]
        content = "Recalled from the gardener store at my request:\n\n" + "\n\n".join(blocks)
        session = self.gardener
        session.hint(content, Hint(kind="recall", command="/recall"))
        self.coder.cur_messages += [
            dict(role="user", content=content),
            dict(role="assistant", content="Ok."),
        ]
        self.io.tool_output(f"Added {len(hits)} recalled original(s) to the chat.")

    def cmd_forget(self, args):
        "Forget a stored entry by id: recall no longer shows it (the store can restore it)"
        entry_id = args.strip()
        if not ENTRY_ID.match(entry_id):
            self.io.tool_error("Usage: /forget ID  (the id from a [full output stored: id=…] line)")
            return
        store = self._store()
        if store is None:
            return
        if store.forget(entry_id):
            self.io.tool_output(f"Forgot {entry_id}; recall will no longer show it.")
        else:
            self.io.tool_error(f"No active stored entry {entry_id}.")

    def cmd_pin(self, args):
        "Pin a stored entry by id: it is never evicted and never expires"
        entry_id = args.strip()
        if not ENTRY_ID.match(entry_id):
            self.io.tool_error("Usage: /pin ID  (the id from a [full output stored: id=…] line)")
            return
        store = self._store()
        if store is None:
            return
        ok = store.pin(entry_id)
        restored = self.gardener.attempt("pin", self._pin_in_history, entry_id, default=0)
        if ok or restored:
            extra = f"; restored {restored} message(s) in the chat to full text" if restored else ""
            self.io.tool_output(f"Pinned {entry_id}{extra}.")
        else:
            self.io.tool_error(f"No stored entry {entry_id}.")

    def _pin_in_history(self, entry_id: str) -> int:
        session = self.gardener
        restored = 0
        for lst in (self.coder.done_messages, self.coder.cur_messages):
            for i, msg in enumerate(lst):
                meta = session.meta(msg)
                if meta is None or meta.entry_id != entry_id:
                    continue
                meta.pinned = True
                if meta.state != "full":
                    swap(session, lst, i, meta, "full")
                    restored += 1
        return restored
