"""Continuity chat commands: ``/state``, ``/checkpoint [note]``, ``/checkpoints``,
``/soft-restart``, ``/resume [NAME]`` (with tab completion of the checkpoint names).

A mixin of ``GardenCommands`` (commands.py); it uses ``self.coder``, ``self.io`` and
``self._active()`` from there.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..continuity.checkpoint import (
    CheckpointError,
    describe_counts,
    find_checkpoint,
    list_checkpoints,
    read_checkpoint,
)
from .keeper import checkpoint_folder, keeper_of

if TYPE_CHECKING:
    from .seams import CoderLike
    from .session import GardenerSession


class ContinuityCommands:
    if TYPE_CHECKING:  # given by GardenCommands (commands.py) and Aider's Commands
        io: Any
        coder: CoderLike

        def _active(self) -> GardenerSession | None: ...

    # -- continuity ----------------------------------------------------------------------------

    def cmd_state(self, args):
        "Show the session-state block the model gets before the chat history (goal, errors...)"
        # Only --verbose used to show it, so a wrong goal or a false open error was invisible
        # until the model acted on it.
        session = self._active()
        if session is None:
            self.io.tool_error("The gardener is off in this session.")
            return
        if session.config.state_tokens <= 0:
            self.io.tool_output("No session state: the block is off (--gardener-state-tokens 0).")
            return
        keeper = keeper_of(session)
        pair = keeper.state_pair(self.coder)
        if not pair:
            self.io.tool_output(
                "No session state yet: it starts with your first request, a file in the chat or"
                " a command's output."
            )
            return
        self.io.tool_output(pair[0]["content"].rstrip())
        self.io.tool_output(
            f"({keeper.state_tokens(self.coder):,} tokens, at most"
            f" {session.config.state_tokens:,}; sent before the chat history of every request)"
        )

    def cmd_checkpoint(self, args):
        "Save a checkpoint of the session's facts (files, errors, decisions): /checkpoint [note]"
        session = self._active()
        if session is None:
            self.io.tool_error("The gardener is off in this session.")
            return
        keeper = keeper_of(session)
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
        keeper = keeper_of(session)
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

    def cmd_checkpoints(self, args):
        "List this project's checkpoints, newest first (name, time, trigger, facts, note)"
        session = self._active()
        if session is None:
            self.io.tool_error("The gardener is off in this session.")
            return
        folder = self._checkpoint_folder(session)
        paths = list_checkpoints(folder)
        shown = keeper_of(session)._show(folder)
        if not paths:
            self.io.tool_output(f"No checkpoints in {shown}.")
            return
        self.io.tool_output(f"Checkpoints in {shown}, newest first (/resume NAME loads one):")
        for path in paths:
            try:
                checkpoint = read_checkpoint(path)
            except CheckpointError as err:
                self.io.tool_output(f"  {path.name}  corrupt: {err}")
                continue
            when = checkpoint.created.replace("T", " ")
            line = f"  {path.name}  {when}  {checkpoint.trigger:<12}  "
            line += describe_counts(checkpoint.facts)
            if checkpoint.note:
                line += f'  "{checkpoint.note}"'
            self.io.tool_output(line)

    def _checkpoint_folder(self, session) -> Path:
        keeper = keeper_of(session)
        return keeper.folder or checkpoint_folder(session, self.coder)

    def completions_resume(self):
        """The checkpoint file names, for tab completion (Aider's ``completions_<cmd>``)."""
        session = self._active()
        if session is None:
            return []
        return [p.name for p in list_checkpoints(self._checkpoint_folder(session))]

    def cmd_resume(self, args):
        "Load the latest checkpoint, or /resume NAME (file name, prefix or path), and its files"
        session = self._active()
        if session is None:
            self.io.tool_error("The gardener is off in this session.")
            return
        keeper = keeper_of(session)
        coder = self.coder
        target = args.strip()
        folder = self._checkpoint_folder(session)
        try:
            if target:
                checkpoint = find_checkpoint(folder, target, base=getattr(coder, "root", None))
            else:
                checkpoint = keeper.latest(coder)
        except (CheckpointError, OSError) as err:
            self.io.tool_error(f"Cannot resume from {target}: {err}")
            return
        if checkpoint is None:
            self.io.tool_error("No checkpoint to resume from in this project.")
            return
        keeper.resume(coder, checkpoint)
