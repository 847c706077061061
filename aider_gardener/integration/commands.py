"""``GardenCommands``: Aider's ``Commands`` carrying the gardener session, plus its chat commands.

Aider builds a new coder on every mode switch and passes it ``from_coder.commands.clone()``,
which hard-codes the base ``Commands`` class; state set on a coder after ``__init__`` is not
carried over either. Overriding ``clone`` to keep our class and hand over the same
``GardenerSession`` is what lets the store, the side table and the turn counter survive
``/chat-mode``, ``/ask``, ``/code``, ``/architect`` and ``/model``.

Commands: ``/context-pressure``, ``/recall QUERY [--add]``, ``/forget ID``, ``/pin ID``, and for
continuity ``/checkpoint [note]``, ``/soft-restart``, ``/resume [FILE]``; ``/add``, ``/drop``,
``/read-only``, ``/reset`` and ``/undo`` also report to the fact tracker.
``/run`` and ``/test`` output is throttled as it enters the chat; ``/clear`` and ``/reset``
reset the gardener's view of the chat but keep the store.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from aider.commands import Commands

from .ingest import swap, sync
from .options import config_from_args
from .session import GardenerSession, Hint, passive_coders

ENTRY_ID = re.compile(r"^[a-z2-7]{10}$")
RECALL_LIMIT = 5
PREVIEW_LINES = 3


@contextlib.contextmanager
def _command_outcome():
    """Capture ``(exit status, output)`` of the shell commands Aider's ``cmd_run`` makes, by
    wrapping the ``run_cmd`` it looks up in its module at call time (whatever is there: the
    replay bench puts its own)."""
    import aider.commands as aider_commands

    real = aider_commands.run_cmd
    seen: list = []

    def spy(*args: Any, **kwargs: Any):
        res = real(*args, **kwargs)
        if isinstance(res, tuple) and len(res) == 2:
            seen.append(res)
        return res

    aider_commands.run_cmd = spy
    try:
        yield seen
    finally:
        if aider_commands.run_cmd is spy:
            aider_commands.run_cmd = real


class GardenCommands(Commands):
    def __init__(self, io: Any, coder: Any, *args: Any, gardener: Any = None, **kwargs: Any):
        super().__init__(io, coder, *args, **kwargs)
        self.gardener: GardenerSession = gardener or GardenerSession(config_from_args(self.args))
        self.gardener.io = io

    @classmethod
    def adopt(cls, commands: Commands, session: GardenerSession | None = None) -> "GardenCommands":
        """Upgrade a plain ``Commands`` (a coder created without ours, e.g. in a test)."""
        new = cls.__new__(cls)
        new.__dict__.update(commands.__dict__)
        new.gardener = session or GardenerSession(config_from_args(commands.args))
        new.gardener.io = commands.io
        return new

    def clone(self) -> "GardenCommands":
        return type(self)(
            self.io,
            None,
            voice_language=self.voice_language,
            verify_ssl=self.verify_ssl,
            args=self.args,
            parser=self.parser,
            verbose=self.verbose,
            editor=self.editor,
            original_read_only_fnames=self.original_read_only_fnames,
            gardener=self.gardener,
        )

    # -- helpers -------------------------------------------------------------------------------

    def _active(self) -> GardenerSession | None:
        return getattr(self.coder, "_garden", None)

    def _store(self) -> Any:
        session = self.gardener
        store = session.open_store(self.coder) if self.coder is not None else session.store
        if store is None:
            self.io.tool_error("The gardener store is not available in this session.")
        return store

    # -- Aider commands with gardener behaviour ------------------------------------------------

    def cmd_run(self, args, add_on_nonzero_exit=False):
        "Run a shell command and optionally add the output to the chat (alias: !)"
        session = self._active()
        cur = self.coder.cur_messages
        before = len(cur)
        with _command_outcome() as outcome:
            result = super().cmd_run(args, add_on_nonzero_exit)
        if session is not None and outcome:
            session.attempt("facts", self._note_outcome, session, args, outcome, cur, before)
        if session is None or self.coder.cur_messages is not cur or len(cur) != before + 2:
            return result
        session.attempt("throttle", self._throttle_new_output, session, cur, before)
        if isinstance(result, str):
            return cur[before]["content"]
        return result

    def cmd_web(self, args, return_content=False):
        "Scrape a webpage, convert to markdown and send in a message"
        session = self._active()
        cur = self.coder.cur_messages
        before = len(cur)
        result = super().cmd_web(args, return_content)
        if session is not None and not return_content and len(cur) == before + 2:
            session.attempt("throttle", self._throttle_new_output, session, cur, before)
        return result

    def _note_outcome(
        self, session: GardenerSession, command: str, outcome: list, cur: list, before: int
    ) -> None:
        """The exit status reaches the fact tracker with the output. Output that stays out of
        the chat (a passing ``/test``, a declined ``/run``) is never ingested as a message, yet
        it is what shows an error fixed, so the tracker sees it here."""
        status, output = outcome[-1]
        if self.coder.cur_messages is cur and len(cur) == before + 2:
            session.exit_codes[command.strip()] = status
            return
        session.facts.on_output(command.strip(), output or "", session.turn, exit_code=status)

    def _throttle_new_output(self, session: GardenerSession, cur: list, index: int) -> None:
        sync(session, self.coder)
        meta = session.meta(cur[index])
        if meta is not None and meta.state == "summary":
            self.io.tool_output(
                f"gardener: output compressed from {meta.tokens_full:,} to"
                f" {meta.tokens_summary:,} tokens (full text: /recall {meta.entry_id})"
            )

    def cmd_lint(self, args="", fnames=None):
        "Lint and fix in-chat files or all dirty files if none in chat"
        with passive_coders(self._active()):
            return super().cmd_lint(args, fnames)

    def cmd_help(self, args):
        "Ask questions about aider"
        with passive_coders():
            return super().cmd_help(args)

    def cmd_clear(self, args):
        "Clear the chat history"
        super().cmd_clear(args)
        self.gardener.reset_view()

    def cmd_reset(self, args):
        "Drop all files and clear the chat history"
        with self._file_ops():
            super().cmd_reset(args)
        self.gardener.reset_view()

    def cmd_add(self, args):
        "Add files to the chat so aider can edit them or review them in detail"
        with self._file_ops():
            return super().cmd_add(args)

    def cmd_read_only(self, args):
        "Add files to the chat that are for reference only, or turn added files to read-only"
        with self._file_ops():
            return super().cmd_read_only(args)

    def cmd_drop(self, args=""):
        "Remove files from the chat session to free up context space"
        with self._file_ops():
            return super().cmd_drop(args)

    def cmd_undo(self, args):
        "Undo the last git commit if it was done by aider"
        session = self._active()
        before = session.attempt("facts", self._head, default=None) if session else None
        result = super().cmd_undo(args)
        if session is not None and before is not None:
            after = session.attempt("facts", self._head, default=None)
            if after is not None and after[0] != before[0]:
                session.attempt("facts", session.facts.on_undo, before[0], before[1], session.turn)
        return result

    def _head(self) -> tuple[str, str] | None:
        repo = getattr(self.coder, "repo", None)
        if repo is None:
            return None
        commit = repo.repo.head.commit
        return commit.hexsha[:7], commit.message.strip().splitlines()[0]

    @contextlib.contextmanager
    def _file_ops(self):
        """Files entering or leaving the chat become file facts (added, read-only, dropped)."""
        session = self._active()
        coder = self.coder
        if session is None or coder is None:
            yield
            return
        before = (set(coder.abs_fnames), set(coder.abs_read_only_fnames))
        try:
            yield
        finally:
            session.attempt("facts", self._note_file_ops, session, *before)

    def _note_file_ops(self, session: GardenerSession, editable: set, read_only: set) -> None:
        coder = self.coder
        rel = coder.get_rel_fname
        now_edit, now_ro = set(coder.abs_fnames), set(coder.abs_read_only_fnames)
        tracker, turn = session.facts, session.turn
        added = sorted(rel(p) for p in now_edit - editable)
        added_ro = sorted(rel(p) for p in now_ro - read_only)
        dropped = sorted(rel(p) for p in (editable | read_only) - (now_edit | now_ro))
        if added:
            tracker.on_files_added(added, turn)
        if added_ro:
            tracker.on_files_added(added_ro, turn, read_only=True)
        if dropped:
            tracker.on_files_dropped(dropped, turn)

    # -- continuity ----------------------------------------------------------------------------

    def cmd_checkpoint(self, args):
        "Save a checkpoint of the session's facts (files, errors, decisions): /checkpoint [note]"
        session = self._active()
        if session is None:
            self.io.tool_error("The gardener is off in this session.")
            return
        from ..continuity.checkpoint import CheckpointError

        keeper = session.keeper()
        try:
            path = keeper.checkpoint(self.coder, "manual", note=args.strip() or None)
        except CheckpointError as err:
            self.io.tool_error(f"Checkpoint not saved: {err}")
            return
        book = keeper.tracker.book
        self.io.tool_output(
            f"Checkpoint saved and verified: {keeper._show(path)} ({len(book)} facts)."
        )

    def cmd_soft_restart(self, args):
        "Checkpoint, clear the chat history and continue from the checkpoint (keeps the thread)"
        session = self._active()
        if session is None:
            self.io.tool_error("The gardener is off in this session; use /clear.")
            return
        from ..continuity.checkpoint import CheckpointError

        keeper = session.keeper()
        coder = self.coder
        try:  # written, read back and validated: only then is the history cleared
            path = keeper.checkpoint(coder, "soft-restart", note=args.strip() or None)
        except (CheckpointError, OSError) as err:
            self.io.tool_error(f"Soft restart cancelled, history kept: checkpoint failed ({err})")
            return
        model = coder.main_model
        messages = coder.done_messages + coder.cur_messages
        tokens = sum(
            model.token_count(m["content"]) for m in messages if isinstance(m.get("content"), str)
        )
        super().cmd_clear("")
        session.reset_view()  # the facts go on: the state block heads the new history
        self.io.tool_output(
            f"Soft restart: cleared {len(messages)} messages ({tokens:,} tokens); continuing from"
            f" {keeper._show(path)} ({len(keeper.tracker.book)} facts in the session state)."
        )

    def cmd_resume(self, args):
        "Load the latest checkpoint of this project (or /resume FILE) as the session state"
        session = self._active()
        if session is None:
            self.io.tool_error("The gardener is off in this session.")
            return
        from ..continuity.checkpoint import CheckpointError, load_latest, read_checkpoint
        from .continuity import checkpoint_folder

        keeper = session.keeper()
        coder = self.coder
        target = args.strip()
        try:
            if target:
                checkpoint = read_checkpoint(Path(target).expanduser())
            else:
                checkpoint = load_latest(
                    checkpoint_folder(session, coder), warn=self.io.tool_warning
                )
        except (CheckpointError, OSError) as err:
            self.io.tool_error(f"Cannot resume from {target}: {err}")
            return
        if checkpoint is None:
            self.io.tool_error("No checkpoint to resume from in this project.")
            return
        keeper.resume(coder, checkpoint)

    # -- gardener commands ---------------------------------------------------------------------

    def cmd_context_pressure(self, args):
        "Show how full the context window is, by part and by class, and what could be evicted"
        from .report import show_pressure

        show_pressure(self.coder, self.gardener, self.io)

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
