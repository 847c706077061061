"""The store's chat commands: ``/recall``, ``/show``, ``/forget``, ``/restore``, ``/pin``.

A mixin of ``GardenCommands`` (commands.py: ``self.coder``, ``io``, ``gardener``, ``_store()``).

* ``/recall QUERY`` lists the best hits with id, class, token cost, origin and the numbered lines
  that matched, so a hit can be judged without opening it; ``/recall ID [ID ...]`` lists those.
  ``--add`` puts originals in the chat only when all of them fit the room left in the window, as
  a ``recall`` message that points at its entries (never stored again), kept verbatim for
  ``--gardener-recent-turns`` user turns, then aged into summaries like any other output.
* ``/show ID`` (or ``/recall ID --full``) prints the original: through ``$PAGER`` (else ``less
  -R``) on a terminal, else its first ``SHOW_LINES`` lines, the whole written to
  ``.aider.gardener/shown/ID.txt`` (Aider's input loop owns the terminal, and a file opens in an
  editor); ``--all`` prints everything. ``/forget ID`` hides the entry and every stored copy of
  it, ``/forget --undo ID`` or ``/restore ID`` brings them back. An unknown id, malformed or
  not, is answered "No stored entry X.".
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from ..redact import redact, secret_kinds
from ..store.floor import close
from ..store.query import query_stems
from ..store.recall import recall
from ..tokens import count_tokens
from .ingest import RECALL_HEADER
from .keeper import keeper_of
from .session import MessageMeta, model_name, swap, window_of

if TYPE_CHECKING:
    from ..store.db import Store
    from .seams import CoderLike
    from .session import GardenerSession


ENTRY_ID = re.compile(r"^[a-z2-7]{10}$")
RECALL_LIMIT = 5
PREVIEW_LINES = 3
PREVIEW_CHARS = 160
# Matching lines are looked for in this much of an original (a 100 MB log must not stall the
# prompt); the rest is still there for /show.
SCAN_CHARS = 4_000_000
# /show looks for secrets in this much of an original, to say so (detection costs ~0.5 s a MB)
SECRET_SCAN_CHARS = 1_000_000
SHOW_LINES = 40
HEADER_CHARS = 100  # a hit's header line when the terminal's width is unknown
SHOWN_DIRNAME = "shown"
RECALL_REPLY = "Ok."
# What stands in the chat for a prompt or reply /forget took out (its turn must stay)
FORGOTTEN_NOTE = "[removed from the chat by /forget: id={id}]"
# The room an addition may take: up to the line above which the gardener's preflight would evict
# hard before the next request (mixin.PREFLIGHT_SHARE), minus the prompt as it would be sent now.
ROOM_SHARE = 0.95
FLAGS = ("--add", "--full", "--all", "--undo")


def _split(args: str) -> tuple[set[str], list[str]]:
    words = args.split()
    return {w for w in words if w in FLAGS}, [w for w in words if w not in FLAGS]


def matching_lines(text: str, query: str, limit: int = PREVIEW_LINES) -> tuple[list, int]:
    """([(line number, line)], how many lines matched): the lines sharing the most query
    terms, shown in their order in the original."""
    terms = query_stems(query)
    if not terms:
        return [], 0
    scored = []
    for n, line in enumerate(text[:SCAN_CHARS].splitlines(), 1):
        low = line.lower()
        score = sum(1 for t in terms if t in low)
        if score:
            scored.append((-score, n, line))
    best = sorted(sorted(scored)[:limit], key=lambda s: s[1])
    return [(n, line) for _s, n, line in best], len(scored)


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"


def _origin(entry: Any) -> str:
    if getattr(entry, "command", None):
        return f"  `{entry.command}`"
    if getattr(entry, "path", None):
        return f"  {entry.path}"
    return ""


# How another part of an exchange is named under a hit, by its role.
_PART = {"assistant": "reply", "user": "asked", "tool": "output"}


def _copies_line(ids: tuple[str, ...] | list[str]) -> str:
    """The near-copies a hit stands for (the same failure run again, a file read twice)."""
    n = len(ids)
    return _one_line(f"    (and {n} near-cop{'y' if n == 1 else 'ies'}: {' '.join(ids)})")


def _one_line(text: str) -> str:
    """``text`` as one terminal line: whitespace runs (a multi-line command) as one space, cut
    with "…" to the terminal's width less one (a full line wraps on some terminals), or to
    ``HEADER_CHARS`` when stdout is not a terminal. A hit's header named its whole command, and
    a 700-character one took four lines per hit."""
    text = re.sub(r"[ \t]*[\r\n]+[ \t]*", " ", text).rstrip()
    width = max(40, shutil.get_terminal_size((HEADER_CHARS + 1, 24)).columns - 1)
    return text if len(text) <= width else text[: width - 1] + "…"


def _facts(n: int) -> str:
    return "fact" if n == 1 else f"{n} facts"


def _hidden_note(entry: Any) -> str | None:
    """Why an inactive entry is not shown, with the way back; None for an active one."""
    if entry.active:
        return None
    reason = entry.deleted_reason or ""
    if reason.startswith("copy:"):
        root = reason[len("copy:") :]
        return f"id={entry.id} is forgotten (a copy of {root}); /restore {root} brings it back."
    if reason == "ttl":
        return f"id={entry.id} expired unused; /restore {entry.id} brings it back."
    return f"id={entry.id} is forgotten; /restore {entry.id} brings it back."


def _full_text_only(store: Store) -> str:
    """ " by full text only (...)" when vectors are on but could not answer this search, so
    a miss is not read as "nothing similar is stored"; "" otherwise."""
    index = getattr(store, "vectors", None)
    if index is None or index.ready:
        return ""
    if not index.healthy:
        describe = getattr(index, "describe_failure", None)
        why = describe() if callable(describe) else "the vector index is unavailable"
        return f" by full text only ({why})"
    return " by full text only (the embedding model is still loading)"


class RecallCommands:
    if TYPE_CHECKING:  # given by GardenCommands (commands.py) and Aider's Commands
        io: Any
        coder: CoderLike
        gardener: GardenerSession

        def _store(self) -> Store | None: ...

    # -- /recall -------------------------------------------------------------------------------

    def cmd_recall(self, args):
        "Search the gardener store: /recall QUERY|ID... [--add] [--full] (see /show)"
        usage = "Usage: /recall QUERY [--add]  |  /recall ID [ID ...] [--add]  |  /recall ID --full"
        got = self._words_and_store(args, usage)
        if got is None:
            return
        flags, words, store = got
        entries = self._entries_by_id(store, words)
        if entries is None:  # a search
            query = " ".join(words)
            hits = recall(store, query, limit=RECALL_LIMIT, rerank=True)
            note = _full_text_only(store)
            parts = {h.entry_id: h.exchange for h in hits if getattr(h, "exchange", ())}
            found = (
                store.get_entries(
                    [h.entry_id for h in hits] + [e for p in parts.values() for e in p]
                )
                if hits
                else {}
            )
            hits = [  # the nearest entries are not matches: below the floor is not listed
                h
                for h in hits
                if h.entry_id in found and close(h, query, found[h.entry_id].original)
            ]
            if not hits:
                ids = [w for w in words if ENTRY_ID.match(w)]
                for w in ids:
                    self.io.tool_error(f"No stored entry {w}.")
                if not ids:
                    self.io.tool_output(
                        f"No close match for {query!r} in this session's store{note}."
                    )
                return
            if note:
                self.io.tool_output(f"Searched{note}.")
            entries = [found[h.entry_id] for h in hits]
            excerpts = {h.entry_id: getattr(h, "excerpt", "") or h.text for h in hits}
            copies = {h.entry_id: h.duplicates for h in hits}
        else:
            query, excerpts, copies, parts, found = "", {}, {}, {}, {}
        if not entries:
            return
        for entry in entries:
            self._list_entry(entry, query, excerpts.get(entry.id, ""))
            if copies.get(entry.id):
                self.io.tool_output(_copies_line(copies[entry.id]))
            for part in parts.get(entry.id, ()):  # the rest of its exchange
                if part in found:
                    self._list_entry(found[part], query, "", part=True)
        if "--full" in flags:
            self._show(store, entries[0], "--all" in flags)
        if "--add" in flags:
            self._add_recalled(
                store, entries if not query else self._top_hit(entries, parts, found)
            )
        elif "--full" not in flags:
            self.io.tool_output(
                "/recall ID --add puts an original in the chat; /show ID prints it whole."
            )

    @staticmethod
    def _top_hit(entries: list, parts: dict, found: dict) -> list:
        """The first hit's entries, its exchange's parts with it, oldest first: what the user
        saw listed as one hit goes into the chat as one."""
        top = [entries[0], *(found[p] for p in parts.get(entries[0].id, ()) if p in found)]
        return sorted(top, key=lambda e: float(e.created or 0.0))

    def _entries_by_id(self, store: Store, words: list[str]) -> list | None:
        """The live entries named by ``words`` when they are ids the store knows (telling the
        user about unknown and forgotten ones); None when the words are a query. A word shaped
        like an id that the store does not have is searched for (a ten-letter word is
        id-shaped too); the search says "No stored entry" if it finds nothing."""
        if not all(ENTRY_ID.match(w) for w in words):
            return None
        known = {w: store.get(w) for w in dict.fromkeys(words)}
        if not any(known.values()):
            return None
        out = []
        for w, entry in known.items():
            if entry is None:
                self.io.tool_error(f"No stored entry {w}.")
            elif not entry.active:
                self.io.tool_error(_hidden_note(entry))
            else:
                out.append(entry)
        return out

    def _list_entry(self, entry: Any, query: str, excerpt: str, part: bool = False) -> None:
        """A hit: its header, then its lines that match the query, else its best part.
        ``part``: another part of the exchange above (``store/exchanges.py``), indented."""
        lead, pad = (f"  + {_PART.get(entry.role, 'with')}: ", "  ") if part else ("", "")
        self.io.tool_output(
            _one_line(
                f"{lead}{entry.id}  {entry.cls:<10} {entry.tokens_original:>7,} tokens"
                f"{_origin(entry)}"
            )
        )
        lines, matched = matching_lines(entry.original, query) if query else ([], 0)
        if lines:
            width = len(str(lines[-1][0]))
            for n, line in lines:
                self.io.tool_output(f"    {pad}{n:>{width}}: {_clip(line)}")
            if matched > len(lines):
                self.io.tool_output(f"    {pad}… {matched - len(lines):,} more matching lines")
            return
        # an id lookup, or a hit found by meaning (vectors) or stem alone: its best part
        text = excerpt or entry.summary
        shown = [line for line in text.splitlines() if line.strip()]
        for line in shown[:PREVIEW_LINES]:
            self.io.tool_output(f"    {pad}{_clip(line)}")
        total = len(entry.original.rstrip("\n").splitlines())
        if total > PREVIEW_LINES:
            self.io.tool_output(f"    {pad}({total:,} lines; /show {entry.id} prints them)")

    # -- --add ---------------------------------------------------------------------------------

    def _room(self) -> tuple[int, int, int]:
        """(tokens an addition may take, the model's input window, the prompt's tokens now).
        The prompt is counted as Aider will send it (``format_messages``, which also applies
        the eviction the next request would), like ``/context-pressure`` counts it."""
        coder = self.coder
        window = window_of(coder)
        model = model_name(coder)
        used = 0
        for msg in coder.format_messages().all_messages():
            content = msg.get("content")
            if isinstance(content, str):
                used += count_tokens(content, model) + 4
            elif isinstance(content, list):
                for part in content:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        used += count_tokens(part["text"], model)
                used += 4
        if not window:
            return 1 << 62, 0, used
        return max(0, int(ROOM_SHARE * window) - used), window, used

    def _add_recalled(self, store: Store, entries: list) -> None:
        session = self.gardener
        in_chat = self._verbatim_in_chat()
        todo = []
        for entry in entries:
            if entry.id in in_chat:
                self.io.tool_output(f"id={entry.id} is already in the chat in full.")
            else:
                todo.append(entry)
        if not todo:
            return
        model = model_name(self.coder)
        room, window, used = self._room()
        costs = [int(e.tokens_original) for e in todo]
        cost = sum(costs)
        secrets = 0
        if cost <= room:  # the store's count decides a hopeless case without tokenizing 100 MB
            blocks = []
            for e in todo:  # what goes to the model: secrets stay with the user (/show)
                text = redact(e.original.rstrip())
                secrets += text != e.original.rstrip()
                blocks.append(f"--- id={e.id} ({e.cls}){_origin(e)}\n{text}")
            content = RECALL_HEADER + "\n\n" + "\n\n".join(blocks)
            costs = [count_tokens(b, model) for b in blocks]
            cost = count_tokens(content, model) + count_tokens(RECALL_REPLY, model) + 8
        if cost > room:
            what = ", ".join(f"id={e.id} ({n:,} tokens)" for e, n in zip(todo, costs))
            self.io.tool_error(
                f"Not added: {what} would not fit. The prompt uses {used:,} of the"
                f" {window:,}-token window and {room:,} tokens are left for additions;"
                f" /show ID prints an original without adding it, /drop or /clear make room."
            )
            return
        user, reply = self._recall_messages(todo, content, model)
        self.coder.cur_messages += [user.msg, reply.msg]
        session.add(user)
        session.add(reply)
        store.touch([e.id for e in todo])
        for e, n in zip(todo, costs):
            self.io.tool_output(f"Added id={e.id} ({n:,} tokens) to the chat.")
        if secrets:
            self.io.tool_output(
                "Secrets in it were redacted in the chat; /show ID prints the original to you."
            )
        turns = session.config.recent_turns
        self.io.tool_output(
            f"Kept verbatim for the next {turns} turn{'s' if turns != 1 else ''};"
            f" {max(0, room - cost):,} tokens left for additions in the window."
        )

    def _recall_messages(
        self, entries: list, content: str, model: str
    ) -> tuple[MessageMeta, MessageMeta]:
        """The side-table records of the (user, assistant) pair, made here rather than by
        ``sync``: the text is in the store already, so it is never ingested again. The record
        points at the first entry (its handle is what a reference line cites) and its summary is
        the entries' summaries, which is what aging leaves in the chat once the kept turns
        have passed."""
        session = self.gardener
        turn = session.turn + 1  # added between requests: it belongs to the next one
        summary = (
            RECALL_HEADER
            + "\n\n"
            + "\n\n".join(
                f"--- id={e.id} ({e.cls}){_origin(e)}\n{e.summary.rstrip()}" for e in entries
            )
        )
        tokens = count_tokens(content, model)
        tokens_summary = count_tokens(summary, model)
        if tokens_summary >= tokens:
            summary, tokens_summary = content, tokens
        ids = tuple(e.id for e in entries)
        user = MessageMeta(
            msg=dict(role="user", content=content),
            original=content,
            role="user",
            kind="recall",
            cls=str(entries[0].cls),
            turn=turn,
            command="/recall",
            entry_id=ids[0],
            stored=True,
            summary=summary,
            tokens_full=tokens,
            tokens_summary=tokens_summary,
            keys=ids,  # what it holds (session.entries_in_history); a later mention refreshes it
        )
        n = count_tokens(RECALL_REPLY, model)
        reply = MessageMeta(
            msg=dict(role="assistant", content=RECALL_REPLY),
            original=RECALL_REPLY,
            role="assistant",
            kind="filler",
            cls="prose",
            turn=turn,
            summary=RECALL_REPLY,
            tokens_full=n,
            tokens_summary=n,
        )
        session.last_user_turn = turn
        return user, reply

    def _verbatim_in_chat(self) -> set[str]:
        """Entry ids whose whole original is in the chat now: a message in full, or a recalled
        block that has not aged yet."""
        out: set[str] = set()
        for meta in list(self.gardener.table.values()):
            if meta.state != "full":
                continue
            if meta.kind == "recall":
                out.update(meta.keys)
            elif meta.entry_id:
                out.add(meta.entry_id)
        return out

    # -- /show ---------------------------------------------------------------------------------

    def cmd_show(self, args):
        "Print a stored original in full: /show ID [--all] (long ones go through your pager)"
        got = self._words_and_store(
            args, "Usage: /show ID [--all]  (the id from /recall or an id=… handle)"
        )
        if got is None:
            return
        flags, words, store = got
        for w in words:
            entry = self._known(store, w)
            if entry is not None and not entry.active:
                self.io.tool_error(_hidden_note(entry))
            elif entry is not None:
                self._show(store, entry, "--all" in flags)

    def _show(self, store: Store, entry: Any, everything: bool) -> None:
        text = entry.original.rstrip("\n")
        lines = text.splitlines()
        self.io.tool_output(
            _one_line(
                f"id={entry.id}  {entry.cls}  {entry.tokens_original:,} tokens,"
                f" {len(lines):,} lines{_origin(entry)}"
            )
        )
        kinds = secret_kinds(text[:SECRET_SCAN_CHARS])
        if kinds:
            self.io.tool_warning(
                f"Contains a secret ({', '.join(kinds)}): shown to you only, redacted from all"
                f" the gardener sends to the model; /forget {entry.id} takes it out of recall"
                " (purged from the store 30 days later)."
            )
        store.touch([entry.id])
        tty = _isatty()
        height = max(10, shutil.get_terminal_size((80, SHOW_LINES + 2)).lines - 2)
        limit = height if tty else SHOW_LINES
        if everything or len(lines) <= limit:
            self.io.tool_output(text)
            return
        if tty:
            pager = _pager()
            if pager and self._page(pager, text + "\n"):
                self.io.tool_output(
                    f"(paged with {pager[0]}; /show {entry.id} --all prints it here)"
                )
                return
        self.io.tool_output("\n".join(lines[:SHOW_LINES]))
        more = len(lines) - SHOW_LINES
        rest = f"… {more:,} more lines not shown: /show {entry.id} --all prints them"
        path = _write_shown(store, entry)
        if path is not None:
            rest += f"; the whole original is in {path}"
        self.io.tool_output(rest + ".")

    def _page(self, pager: list[str], text: str) -> bool:
        """Run the pager on the text (it reads stdin and owns the terminal until it exits);
        False when it could not run."""
        try:
            sys.stdout.flush()
            subprocess.run(pager, input=text.encode("utf-8", "replace"), check=False)
            return True
        except (OSError, ValueError) as err:
            self.io.tool_warning(f"Pager {' '.join(pager)!r} failed ({err}); printing instead.")
            return False

    # -- /forget, /restore, /pin ---------------------------------------------------------------

    def cmd_forget(self, args):
        "Hide a stored entry and its copies from recall: /forget ID (/forget --undo ID restores)"
        got = self._words_and_store(args, "Usage: /forget ID [ID ...]  |  /forget --undo ID")
        if got is None:
            return
        flags, words, store = got
        if "--undo" in flags:
            return self.cmd_restore(" ".join(words))
        for w in words:
            entry = self._known(store, w)
            if entry is None:
                continue
            if not entry.active:
                self.io.tool_error(
                    _hidden_note(entry).replace("is forgotten", "is already forgotten")
                )
                continue
            if not store.forget(w):
                self.io.tool_error(f"Could not forget {w}; the store refused (see the log).")
                continue
            copies = store.copies_of(w)
            them = f"id={w} and {_copies(len(copies))}" if copies else f"id={w}"
            it = "them" if copies else "it"
            gone = {w, *copies}
            removed, tokens, kept = self.gardener.attempt(
                "forget", self._forget_in_chat, gone, default=(None, 0, 0)
            )
            facts = self.gardener.attempt(
                "forget", keeper_of(self.gardener).forget, gone, default=0
            )
            if kept:
                self.io.tool_output(
                    f"Forgot {them} in the store; the chat keeps {it} inside recalled context"
                    " that holds other entries until it is evicted (/clear removes it now)."
                )
            elif removed is None:
                self.io.tool_output(
                    f"Forgot {them}: removed from the store; the chat could not be checked, it"
                    f" may still hold {it} until evicted (/clear removes it)."
                )
            elif removed:
                self.io.tool_output(
                    f"Forgot {them}: removed from the store and from the chat ({tokens:,}"
                    f" tokens). /restore {w} brings {it} back to the store."
                )
            else:
                self.io.tool_output(
                    f"Forgot {them}: removed from the store; the chat did not hold {it}."
                    f" /restore {w} brings {it} back."
                )
            if facts:
                self.io.tool_output(
                    f"The session state no longer lists the {_facts(facts)} only {it} showed."
                )

    def _forget_in_chat(self, gone: set[str]) -> tuple[int, int, int]:
        """Take forgotten entries out of the chat: (messages taken out, tokens that freed,
        messages that must keep them). A message of its own goes: an output or a recalled
        block of only forgotten entries with the "Ok." that answers it; a prompt or a reply
        (whose other half stays) is replaced by a one-line note, so user and assistant turns
        still alternate. A recalled block that also holds live entries keeps it (counted): it
        ages into summaries later."""
        session = self.gardener
        model = model_name(self.coder)
        removed = tokens = kept = 0
        for lst in (self.coder.done_messages, self.coder.cur_messages):
            i = len(lst) - 1
            while i >= 0:
                meta = session.meta(lst[i])
                held = set(meta.keys if meta and meta.kind == "recall" else ()) or (
                    {meta.entry_id} if meta and meta.entry_id else set()
                )
                if meta is None or not held & gone:
                    i -= 1
                    continue
                if not held <= gone:
                    kept += 1
                    i -= 1
                    continue
                removed += 1
                tokens += meta.tokens_now
                reply = session.meta(lst[i + 1]) if i + 1 < len(lst) else None
                whole = meta.kind in ("tool", "recall")  # its "Ok." has nothing else to answer
                if whole and reply is not None and reply.kind == "filler":
                    tokens += reply.tokens_now
                    del lst[i : i + 2]
                    session.discard(meta)
                    session.discard(reply)
                else:
                    note = FORGOTTEN_NOTE.format(id=meta.entry_id)
                    n = count_tokens(note, model)
                    tokens -= n
                    meta.original = meta.summary = note
                    meta.tokens_full = meta.tokens_summary = meta.tokens_ref = n
                    meta.kind, meta.entry_id, meta.keys, meta.pinned = "notice", None, (), False
                    meta.stored, meta.secret = True, False  # droppable, nothing to redact
                    swap(session, lst, i, meta, "full")
                i -= 1
        return removed, max(0, tokens), kept

    def cmd_restore(self, args):
        "Bring back an entry /forget hid (and its copies): /restore ID"
        got = self._words_and_store(args, "Usage: /restore ID [ID ...]")
        if got is None:
            return
        _flags, words, store = got
        for w in words:
            entry = self._known(store, w)
            if entry is None:
                continue
            if entry.active:
                self.io.tool_output(f"id={w} is not forgotten; nothing to restore.")
                continue
            copies = store.copies_of(w)
            if not store.restore(w):
                self.io.tool_error(f"Could not restore {w}; the store refused (see the log).")
                continue
            them = f"id={w} and {_copies(len(copies))}" if copies else f"id={w}"
            self.io.tool_output(
                f"Restored {them}; recall shows {'them' if copies else 'it'} again."
            )

    def _words_and_store(self, args: str, usage: str) -> tuple[set[str], list[str], Any] | None:
        """The start every id command shares: flags and words, the usage text when there are no
        words, then the store (``_store`` says so when it is unavailable)."""
        flags, words = _split(args)
        if not words:
            self.io.tool_error(usage)
            return None
        store = self._store()
        return None if store is None else (flags, words, store)

    def _known(self, store: Store, word: str) -> Any:
        entry = store.get(word) if ENTRY_ID.match(word) else None
        if entry is None:
            self.io.tool_error(f"No stored entry {word}.")
        return entry

    def cmd_pin(self, args):
        "Pin a stored entry: never evicted, never expires (/pin --undo ID or /unpin ID undoes)"
        # What is in the chat stays as it is (its summary) unless the original fits the room
        # /recall --add allows: a pinned log bigger than the window once pushed every prompt out
        # (decision 092).
        got = self._words_and_store(
            args,
            "Usage: /pin ID  |  /pin --undo ID  (the id from a [full output stored: id=…] line)",
        )
        if got is None:
            return
        flags, words, store = got
        if "--undo" in flags:
            return self.cmd_unpin(" ".join(words))
        for entry_id in words:
            entry = self._known(store, entry_id)
            if entry is None:
                continue
            if not entry.active:
                self.io.tool_error(_hidden_note(entry))
                continue
            if not store.pin(entry_id):
                self.io.tool_error(f"Could not pin {entry_id}; the store refused (see the log).")
                continue
            said = self.gardener.attempt("pin", self._pin_in_history, entry, default=None)
            self.io.tool_output(f"Pinned {entry_id}: " + (said or "the store keeps it for good."))

    def _pin_in_history(self, entry: Any) -> str:
        """Pin the chat's messages of ``entry``; back to full text only when the original fits
        the room ``/recall --add`` allows. Returns what happened, for the one line."""
        session = self.gardener
        found = [
            (lst, i, meta)
            for lst in (self.coder.done_messages, self.coder.cur_messages)
            for i, meta in enumerate(session.meta(m) for m in lst)
            if meta is not None and meta.entry_id == entry.id
        ]
        if not found:
            return (
                "not in the chat now, so the store keeps it for good;"
                f" /recall {entry.id} --add puts it in the chat."
            )
        for _lst, _i, meta in found:
            meta.pinned = True
        short = [(lst, i, meta) for lst, i, meta in found if meta.state != "full"]
        now = sum(meta.tokens_now for _lst, _i, meta in found)
        if not short:
            return f"in the chat in full ({now:,} tokens), never evicted by the budget."
        extra = sum(meta.tokens_full - meta.tokens_now for _lst, _i, meta in short)
        room, window, _used = self._room()
        if extra > room:
            state = "summary" if all(m.state == "summary" for _l, _i, m in short) else "reference"
            return (
                f"kept in the chat as its {state} ({now:,} tokens), never evicted by the budget."
                f" The original ({int(entry.tokens_original):,} tokens) would not fit: {room:,}"
                f" tokens are left for additions in the {window:,}-token window; /show {entry.id}"
                " prints it."
            )
        for lst, i, meta in short:
            swap(session, lst, i, meta, "full")
        full = sum(meta.tokens_now for _lst, _i, meta in found)
        return f"back in the chat in full ({full:,} tokens), never evicted by the budget."

    def cmd_unpin(self, args):
        "Unpin a stored entry: eviction and expiry treat it like any other again"
        got = self._words_and_store(args, "Usage: /unpin ID  (or /pin --undo ID)")
        if got is None:
            return
        _flags, words, store = got
        for entry_id in words:
            entry = self._known(store, entry_id)
            if entry is None:
                continue
            in_chat = [
                meta
                for meta in list(self.gardener.table.values())
                if meta.entry_id == entry_id and meta.pinned
            ]
            if not entry.pinned and not in_chat:
                self.io.tool_output(f"{entry_id} is not pinned; nothing to undo.")
                continue
            if entry.pinned and not store.unpin(entry_id):
                self.io.tool_error(f"Could not unpin {entry_id}; the store refused (see the log).")
                continue
            for meta in in_chat:
                meta.pinned = False
            where = "its message in the chat may be evicted again and " if in_chat else ""
            self.io.tool_output(f"Unpinned {entry_id}: {where}the store may expire it unused.")

    # -- tab completion of ids -----------------------------------------------------------------

    def _recent_ids(self, inactive: bool = False) -> list[str]:
        """Ids for tab completion: the newest entries (the forgotten ones for /restore). Only
        from a store already open; completion must not open one."""
        store = self.gardener.store
        if store is None:
            return []
        entries = store.list_entries(limit=200, include_inactive=inactive)
        return [e.id for e in entries if e.active != inactive]

    def completions_recall(self):
        return self._recent_ids()

    def completions_show(self):
        return self._recent_ids()

    def completions_forget(self):
        return self._recent_ids()

    def completions_pin(self):
        return self._recent_ids()

    def completions_unpin(self):
        return self._recent_ids()

    def completions_restore(self):
        return self._recent_ids(inactive=True)


def _copies(n: int) -> str:
    return f"{n} cop{'y' if n == 1 else 'ies'} of it"


def _isatty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _pager() -> list[str] | None:
    """``$PAGER`` as the user set it, else ``less -R``; None when neither can run."""
    value = os.environ.get("PAGER", "").strip()
    try:
        argv = shlex.split(value) if value else ["less", "-R"]
    except ValueError:
        return None
    if not argv or shutil.which(argv[0]) is None:
        return None
    return argv


def _write_shown(store: Store, entry: Any) -> str | None:
    """The whole original in ``<store folder>/shown/ID.txt`` (0600, like the store), as a path
    relative to the working directory when it is below it; None for an in-memory store."""
    if getattr(store, "path", None) is None:
        return None
    folder = store.dir / SHOWN_DIRNAME
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        target = folder / f"{entry.id}.txt"
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(entry.data if isinstance(entry.data, bytes) else entry.data.encode("utf-8"))
    except OSError:
        return None
    try:
        rel = os.path.relpath(target)
    except ValueError:
        return str(target)
    return str(target) if rel.startswith("..") else rel
