"""Continuity in the live session: facts from Aider's events, the session-state block before
history, checkpoints, soft restart, resume, and the pressure warnings.

The facts are the session's memory of what matters (files, errors, failed approaches, decisions);
everything here is rendered from them, never from an LLM. Checkpoints live next to the store, in
``<store folder>/checkpoints/``, but do not need the store: a locked or corrupt store must not
take the user's way back with it.

The state block is a (user, assistant) pair put at the head of the history chunk of every request,
after the system prompt, repo map and read-only files, which change rarely; it is re-rendered only
when the facts change, so providers' prompt caches keep everything before the history.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..continuity.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_latest,
    render_checkpoint,
    write_checkpoint,
)
from ..continuity.state import render_state
from ..continuity.tracker import FactTracker
from ..tokens import count_tokens
from .ingest import model_name

log = logging.getLogger(__name__)

STATE_HEADER = (
    "Session state kept by aider-gardener (facts from this session, exact; older details can be"
    " recalled with /recall ID):\n\n"
)
STATE_ACK = "Ok, I will keep this session state in mind."
CHECKPOINT_DIRNAME = "checkpoints"
REARM_MARGIN = 5  # percent below a warning level before it can fire again
AUTO_EVERY_TURNS = 10


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def checkpoint_folder(session: Any, coder: Any) -> Path:
    """``checkpoints/`` in the store folder (``--gardener-store`` or ``.aider.gardener/``), found
    without opening the store."""
    store = session.store
    folder = getattr(store, "dir", None)
    if folder is None:
        from ..store.db import resolve_location

        location = session.config.store
        if location == ":memory:":
            location = None
        folder, _ = resolve_location(location, getattr(coder, "root", None))
    return Path(folder) / CHECKPOINT_DIRNAME


class Continuity:
    """One session's continuity state; lives in ``GardenerSession.continuity``."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.tracker = FactTracker()
        self.folder: Path | None = None
        self.project = ""
        self._state_version = -1
        self._state_text = ""
        self._pair_tokens = (-2, 0)
        self._auto_turn = -AUTO_EVERY_TURNS
        self._sync: Any = None
        self._checkpointed_version = -1
        self._armed = {level: True for level in session.config.warn_at}
        self.started = False

    # -- start of a session --------------------------------------------------------------------

    def start(self, coder: Any) -> None:
        """On the first gardened coder of the process: offer or load the latest checkpoint."""
        if self.started:
            return
        self.started = True
        self.folder = checkpoint_folder(self.session, coder)
        self.project = str(getattr(coder, "root", "") or "")
        self._initial_files(coder)
        if not self.folder.is_dir():
            return
        latest = load_latest(self.folder, warn=coder.io.tool_warning)
        if latest is None:
            return
        if self.session.config.resume:
            self.resume(coder, latest)
        else:
            coder.io.tool_output(
                f"gardener: checkpoint from {latest.created} ({latest.trigger}) available;"
                " /resume loads it"
            )

    def _initial_files(self, coder: Any) -> None:
        """Files given on the command line are in the chat from the start: file facts too."""
        rel = coder.get_rel_fname
        editable = sorted(rel(p) for p in getattr(coder, "abs_fnames", ()))
        read_only = sorted(rel(p) for p in getattr(coder, "abs_read_only_fnames", ()))
        if editable:
            self.tracker.on_files_added(editable, 0)
        if read_only:
            self.tracker.on_files_added(read_only, 0, read_only=True)

    def resume(self, coder: Any, checkpoint: Checkpoint) -> None:
        """Take the checkpoint's facts as this session's starting facts (the store still holds
        the earlier session's originals for recall)."""
        book = checkpoint.facts
        for fact in book:
            fact.session = fact.session or checkpoint.session
        self.tracker = FactTracker(book)
        self._checkpointed_version = book.version
        coder.io.tool_output(
            f"gardener: resumed from checkpoint {checkpoint.created} ({len(book)} facts);"
            " the earlier session is in the store: /recall QUERY"
        )

    def persist(self) -> int:
        """Facts go to the store's ``facts`` table (with their turn and source entry) as they
        change: the checkpoint files are for people and resume, the table for queries and
        for a crash that left no checkpoint."""
        store = self.session.store
        if store is None:
            return 0
        if self._sync is None or self._sync.store is not store:
            from ..store.facts import FactSync

            self._sync = FactSync(store, self.session.session_id)
        return self._sync.flush(self.tracker.book)

    # -- the state block -----------------------------------------------------------------------

    def state_text(self, coder: Any) -> str:
        book = self.tracker.book
        if book.version != self._state_version:
            self._state_text = render_state(
                book, max_tokens=self.session.config.state_tokens, model=model_name(coder)
            )
            self._state_version = book.version
        return self._state_text

    def state_tokens(self, coder: Any) -> int:
        """Tokens the state pair adds to each request (0 when there is none or it is off)."""
        if self.session.config.state_tokens <= 0:
            return 0
        pair = self.state_pair(coder)
        if not pair:
            return 0
        if self._pair_tokens[0] != self._state_version:
            model = model_name(coder)
            self._pair_tokens = (
                self._state_version,
                sum(count_tokens(m["content"], model) for m in pair),
            )
        return self._pair_tokens[1]

    def state_pair(self, coder: Any) -> list[dict]:
        text = self.state_text(coder)
        if not text:
            return []
        return [
            dict(role="user", content=STATE_HEADER + text),
            dict(role="assistant", content=STATE_ACK),
        ]

    # -- checkpoints ---------------------------------------------------------------------------

    def checkpoint(self, coder: Any, trigger: str, note: str | None = None) -> Path:
        """Write, read back and validate a checkpoint; raises CheckpointError (nothing is
        reported as saved unless it was verified on disk)."""
        if self.folder is None:
            self.folder = checkpoint_folder(self.session, coder)
        sid = self.session.session_id
        text = render_checkpoint(
            self.tracker.book,
            trigger=trigger,
            session=sid,
            project=self.project or str(getattr(coder, "root", "") or ""),
            note=note or None,
        )
        path = write_checkpoint(self.folder, text)
        self._checkpointed_version = self.tracker.book.version
        return path

    def auto_checkpoint(self, coder: Any, trigger: str) -> Path | None:
        """A checkpoint only if facts changed since the last one, and for eviction at most once
        every ``AUTO_EVERY_TURNS`` turns: a session over budget evicts on every turn, and a
        file (write, fsync, read-back) and a status line per turn would cost time and noise for
        nothing the next one would not also hold."""
        book = self.tracker.book
        if not len(book) or book.version == self._checkpointed_version:
            return None
        turn = self.session.turn
        if trigger == "eviction" and turn - self._auto_turn < AUTO_EVERY_TURNS:
            return None
        self._auto_turn = turn
        try:
            path = self.checkpoint(coder, trigger)
        except CheckpointError as err:
            self.session.warn_once("checkpoint", f"gardener: checkpoint not saved: {err}")
            return None
        coder.io.tool_output(f"gardener: checkpoint saved ({trigger}): {self._show(path)}")
        return path

    def at_exit(self, coder: Any) -> None:
        """The process ends: keep the thread for the next session."""
        book = self.tracker.book
        if not len(book) or book.version == self._checkpointed_version:
            return
        try:
            self.checkpoint(coder, "exit")
        except CheckpointError as err:
            log.warning("gardener: exit checkpoint not saved: %s", err)

    def _show(self, path: Path) -> str:
        try:
            return str(Path(path).relative_to(Path(self.project)))
        except ValueError:
            return str(path)

    # -- pressure ------------------------------------------------------------------------------

    def on_pressure(self, coder: Any, used: int, window: int) -> None:
        """One line when the prompt crosses each warning level (default 70% and 85%), saying
        what the gardener does next; a checkpoint at the first level."""
        if window <= 0:
            return
        pct = 100.0 * used / window
        levels = sorted(self._armed)
        for level in levels:
            if pct < level - REARM_MARGIN:
                self._armed[level] = True
        crossed = [lvl for lvl in levels if pct >= lvl and self._armed[lvl]]
        if not crossed:
            return
        for lvl in crossed:
            self._armed[lvl] = False
        level = crossed[-1]
        top = level == levels[-1] and len(levels) > 1
        line = f"gardener: prompt at {pct:.0f}% of the {_k(window)} window ({_k(used)} tokens)"
        if top:
            line += (
                "; next: one-line references, then dropping the lowest-priority turns (all kept"
                " in the store: /recall). /soft-restart resets the chat and keeps the thread"
            )
        else:
            line += "; next: older outputs and replies swap for summaries, then for references"
        coder.io.tool_warning(line)
        if levels[0] in crossed:  # also when one turn jumps past several levels at once
            self.auto_checkpoint(coder, "pressure")


def mark_messages(session: Any) -> None:
    """Before each eviction pass, carry what the facts know into the priorities: messages behind
    a failed approach go last; an error output whose error the facts saw fixed may go early."""
    tracker = session.facts
    failed = tracker.failed_entry_ids()
    open_errors = tracker.open_error_entry_ids()
    error_ids = {f.entry_id for f in tracker.book if f.kind == "error" and f.entry_id}
    for meta in session.table.values():
        if not meta.entry_id:
            continue
        if meta.entry_id in failed:
            meta.failed = True
        if meta.entry_id in error_ids and meta.entry_id not in open_errors:
            meta.resolved = True
