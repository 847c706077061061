"""``GardenCommands``: Aider's ``Commands`` carrying the gardener session, plus its chat commands.

Aider builds a new coder on every mode switch and passes it ``from_coder.commands.clone()``,
which hard-codes the base ``Commands`` class; state set on a coder after ``__init__`` is not
carried over either. Overriding ``clone`` to keep our class and hand over the same
``GardenerSession`` is what lets the store, the side table and the turn counter survive
``/chat-mode``, ``/ask``, ``/code``, ``/architect`` and ``/model``.

The gardener's own commands live in three mixins: commands_pressure.py (``/context-pressure``,
``/tokens``, ``/evict [N]``), commands_recall.py (``/recall``, ``/show``, ``/forget``,
``/restore``, ``/pin``) and commands_continuity.py (``/checkpoint``, ``/checkpoints``,
``/resume``, ``/soft-restart``). Here: ``/add``, ``/drop``, ``/read-only``, ``/reset`` and
``/undo`` also report to the fact tracker; ``/run`` and ``/test`` output is throttled as it
enters the chat; ``/clear`` and ``/reset`` reset the gardener's view of the chat but keep the
store.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator

from aider.commands import Commands

from ..tokens import count_tokens
from .commands_continuity import ContinuityCommands
from .commands_pressure import PressureCommands
from .commands_recall import ENTRY_ID, RecallCommands  # noqa: F401  (re-exported)
from .ingest import sync
from .keeper import tracker_of
from .options import config_from_args
from .session import GardenerSession, model_name, passive_coders

if TYPE_CHECKING:
    from ..store.db import Store
    from .seams import CoderLike


@contextlib.contextmanager
def _command_outcome() -> Iterator[list]:
    """Capture ``(exit status, output)`` of the shell commands Aider's ``cmd_run`` makes, by
    wrapping the ``run_cmd`` it looks up in its module at call time (whatever is there: the
    replay bench puts its own). Aider's own is replaced by run_cmd.py's, which reads the
    command's terminal to its end (Aider's can lose the last lines, where the error is)."""
    import aider.commands as aider_commands
    import aider.run_cmd as aider_run_cmd

    from .run_cmd import run_cmd as whole_output

    real = aider_commands.run_cmd
    if real is aider_run_cmd.run_cmd:
        real = whole_output
    seen: list = []

    def spy(*args: Any, **kwargs: Any):
        res = real(*args, **kwargs)
        if isinstance(res, tuple) and len(res) == 2:
            seen.append(res)
        return res

    saved = aider_commands.run_cmd
    aider_commands.run_cmd = spy
    try:
        yield seen
    finally:
        if aider_commands.run_cmd is spy:
            aider_commands.run_cmd = saved


class GardenCommands(RecallCommands, PressureCommands, ContinuityCommands, Commands):
    def __init__(
        self,
        io: Any,
        coder: CoderLike | None,
        *args: Any,
        gardener: GardenerSession | None = None,
        **kwargs: Any,
    ):
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

    def _store(self) -> Store | None:
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
        with _command_outcome() as outcome, self._compressed_offer(session, args, outcome):
            result = super().cmd_run(args, add_on_nonzero_exit)
        if session is not None and outcome:
            session.attempt("facts", self._note_outcome, session, args, outcome, cur, before)
        if session is None or self.coder.cur_messages is not cur or len(cur) != before + 2:
            return result
        session.attempt("throttle", self._throttle_new_output, session, cur, before)
        if isinstance(result, str):
            return cur[before]["content"]
        return result

    @contextlib.contextmanager
    def _compressed_offer(self, session: GardenerSession | None, command: str, outcome: list):
        """Aider asks "Add 144.0k tokens of command output to the chat?", but output above
        ``--gardener-max-output`` enters compressed: the question says so, or a user declines
        output that would have cost a thousand tokens, or accepts expecting the model to see
        every line."""
        io = self.io
        if session is None or "confirm_ask" in vars(io):
            yield
            return
        real = io.confirm_ask

        def confirm_ask(question, *args: Any, **kwargs: Any):
            text = session.attempt(
                "throttle", self._offer_text, session, command, outcome, question, default=None
            )
            return real(text or question, *args, **kwargs)

        io.confirm_ask = confirm_ask
        try:
            yield
        finally:
            if vars(io).get("confirm_ask") is confirm_ask:
                del io.confirm_ask

    def _offer_text(
        self, session: GardenerSession, command: str, outcome: list, question: str
    ) -> str | None:
        from aider import prompts

        if not outcome or not question.startswith("Add ") or session.store_failed:
            return None
        if "of command output to the chat?" not in question:
            return None
        limit = session.config.max_output
        message = prompts.run_output.format(command=command, output=outcome[-1][1] or "")
        if count_tokens(message, model_name(self.coder)) <= limit:
            return None
        return question[:-1] + f" (enters compressed to ≤{limit:,} tokens; full text stored)?"

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
        tracker_of(session).on_output(command.strip(), output or "", session.turn, exit_code=status)

    def _throttle_new_output(self, session: GardenerSession, cur: list, index: int) -> None:
        """Ingest the output now (so it enters compressed) and say what happened, with the
        background work it started: right after the command is the foreground moment."""
        from ..store.worker import announce, take_notes

        sync(session, self.coder)
        meta = session.meta(cur[index])
        if meta is not None and meta.state == "summary":
            if meta.stored:
                where = f"full text: /show {meta.entry_id}"
            elif meta.pending_id:
                where = f"full text stored once the store is free: /show {meta.pending_id}"
            else:
                where = "the full text could not be kept"
            if meta.secret and meta.tokens_full <= session.config.max_output:
                self.io.tool_output(
                    f"gardener: a secret in the output is redacted in the chat ({where})"
                )
            else:
                self.io.tool_output(
                    f"gardener: output compressed from {meta.tokens_full:,} to"
                    f" {meta.tokens_summary:,} tokens ({where})"
                )
        notes = take_notes(session.store)
        if meta is not None and meta.stored:
            line = announce(session.store, meta.tokens_full)
            if line:
                notes.append(line)
        for note in notes:
            self.io.tool_output(note)

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
                session.attempt(
                    "facts", tracker_of(session).on_undo, before[0], before[1], session.turn
                )
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
        facts, turn = tracker_of(session), session.turn
        added = sorted(rel(p) for p in now_edit - editable)
        added_ro = sorted(rel(p) for p in now_ro - read_only)
        dropped = sorted(rel(p) for p in (editable | read_only) - (now_edit | now_ro))
        if added:
            facts.on_files_added(added, turn)
        if added_ro:
            facts.on_files_added(added_ro, turn, read_only=True)
        if dropped:
            facts.on_files_dropped(dropped, turn)
