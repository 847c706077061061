"""Continuity in the live session: facts from Aider's events, the session-state block before
history, checkpoints, soft restart, resume, and the pressure warnings.

The facts are the session's memory of what matters (files, errors, failed approaches, decisions);
everything here is rendered from them, never from an LLM. Checkpoints live next to the store, in
``<store folder>/checkpoints/``, but do not need the store: a locked or corrupt store must not
take the user's way back with it. The state block is a (user, assistant) pair at the head of the
history chunk, after the system prompt, repo map and read-only files, re-rendered only when the
facts change, so providers' prompt caches keep everything before the history.

Continuity accumulates across sessions: a session that does not resume still starts with the
open facts of the latest checkpoint (``checkpoint.carried_facts``), and a session that learnt
nothing new writes no exit checkpoint, so a trivial session never becomes "the latest" with less
than the one before it. SIGHUP and SIGTERM write the exit checkpoint too, then let the signal do
what it did before.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..continuity.checkpoint import (
    CARRIED_KINDS,
    Checkpoint,
    CheckpointError,
    carried_facts,
    describe_counts,
    load_latest,
    render_checkpoint,
    same_project,
    write_checkpoint,
)
from ..continuity.facts import Fact, FactBook
from ..continuity.state import HEADER, order_key, render_state
from ..continuity.tracker import FactTracker
from ..store.db import resolve_location
from ..tokens import count_tokens
from .session import GardenerSession, framing, model_name

if TYPE_CHECKING:
    from .seams import CoderLike


log = logging.getLogger(__name__)

# The block's own first line (state.HEADER): the model sees one header, not two.
STATE_HEADER = HEADER
STATE_ACK = "Ok, I will keep this session state in mind."
CHECKPOINT_DIRNAME = "checkpoints"
REARM_MARGIN = 5  # percent below a warning level before it can fire again
AUTO_EVERY_TURNS = 10
EXIT_SIGNALS = ("SIGHUP", "SIGTERM")
# ops of a file fact that mean the file was in the chat; the rest (dropped) were not
CHAT_OPS = ("added", "edited", "created", "undone")
READ_ONLY_OP = "read-only"
MAX_FILES_SHOWN = 8


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def checkpoint_folder(session: Any, coder: CoderLike) -> Path:
    """``checkpoints/`` in the store folder (``--gardener-store`` or ``.aider.gardener/``), found
    without opening the store."""
    store = session.store
    folder = getattr(store, "dir", None)
    if folder is None:
        location = session.config.store
        if location == ":memory:":
            location = None
        folder, _ = resolve_location(location, getattr(coder, "root", None))
    return Path(folder) / CHECKPOINT_DIRNAME


class Keeper:
    """One session's continuity state; lives in ``GardenerSession.keeper``."""

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
        self._start_version = 0  # the facts' version once the session has started (or resumed)
        self._signals: dict[int, Any] = {}  # signal -> the handler before ours
        self._handler = self._on_signal  # one bound method, so it can be recognised later

    # -- start of a session --------------------------------------------------------------------

    def start(self, coder: CoderLike) -> None:
        """On the first gardened coder of the process: resume the latest checkpoint
        (``--gardener-resume``) or carry its open facts forward and offer it; catch SIGHUP and
        SIGTERM for the exit checkpoint."""
        if self.started:
            return
        self.started = True
        self.folder = checkpoint_folder(self.session, coder)
        self.project = str(getattr(coder, "root", "") or "")
        self.install_signals()
        latest = None
        if self.folder.is_dir():
            latest = self.latest(coder)
        if latest is not None and self.session.config.resume:
            self.resume(coder, latest)
            return
        if latest is not None:
            self._carry(coder, latest)
        self._chat_files(coder)
        self._start_version = self._checkpointed_version = self.tracker.book.version

    def latest(self, coder: CoderLike) -> Checkpoint | None:
        """This project's newest checkpoint: one of another project (a store folder shared by
        several, or a planted file) or dated in the future is skipped, and said so in one line."""
        folder = self.folder or checkpoint_folder(self.session, coder)
        project = self.project or str(getattr(coder, "root", "") or "")
        return load_latest(folder, warn=coder.io.tool_warning, project=project or None)

    def _carry(self, coder: CoderLike, latest: Checkpoint) -> None:
        carried = carried_facts(latest.facts)
        line = (
            f"gardener: checkpoint from {latest.created} ({latest.trigger}) available;"
            " /resume loads it"
        )
        if len(carried):
            for fact in carried:
                fact.session = fact.session or latest.session
            self.tracker = FactTracker(carried)
            line += f"; carried over: {describe_counts(carried, CARRIED_KINDS)}"
        coder.io.tool_output(line)

    def _chat_files(self, coder: CoderLike) -> None:
        """The files in the chat now (the command line's, or the ones /resume put back) are
        file facts too, unless the facts already have them in the chat."""
        rel = coder.get_rel_fname
        known = {f.key: f.detail.get("op") for f in self.tracker.book.find("file")}
        groups = (
            (getattr(coder, "abs_fnames", ()), False, CHAT_OPS),
            (getattr(coder, "abs_read_only_fnames", ()), True, (READ_ONLY_OP,)),
        )
        for paths, read_only, ops in groups:
            new = sorted(p for p in (rel(a) for a in paths) if known.get(p) not in ops)
            if new:
                self.tracker.on_files_added(new, self.session.turn, read_only=read_only)

    def resume(self, coder: CoderLike, checkpoint: Checkpoint) -> None:
        """Take the checkpoint's facts as this session's facts (the store still holds the
        earlier session's originals for recall) and put its files back in the chat: an Aider
        user expects /resume to restore the working set, not only the model's notes."""
        book = checkpoint.facts
        for fact in book:
            fact.session = fact.session or checkpoint.session
        own = self._own_facts()
        size = len(book)
        if own:
            book = _merged(book, own)
        self.tracker = FactTracker(book)
        for fact in list(book)[size:]:  # what this session decided outranks the checkpoint
            self.tracker.supersede_for(fact)
        kept = f"; kept {len(own)} of this session's" if own else ""
        coder.io.tool_output(
            f"gardener: resumed from checkpoint {checkpoint.created} ({size} facts{kept});"
            " the earlier session is in the store: /recall QUERY"
        )
        project = self.project or str(getattr(coder, "root", "") or "")
        if project and not same_project(checkpoint.project, project):
            coder.io.tool_warning(
                f"gardener: that checkpoint is of another project ({checkpoint.project});"
                " only its files inside this one are restored"
            )
        self._restore_files(coder)
        self._chat_files(coder)
        self._start_version = self._checkpointed_version = self.tracker.book.version

    def _own_facts(self) -> list:
        """What this session learnt itself before a mid-session /resume (facts read from a
        checkpoint carry their session; files are re-read from the chat): /resume adds the
        thread, it must not erase the last hour."""
        if not self.started or self.tracker.book.version == self._start_version:
            return []
        return [f for f in self.tracker.book.find() if f.session is None and f.kind != "file"]

    def _restore_files(self, coder: CoderLike) -> None:
        """Add the checkpoint's in-chat files back, under the rules of Aider's own /add: only
        files inside the repository after resolving symlinks, not under ``.git`` or the store,
        not aiderignored, not gitignored (unless ``--add-gitignore-files``). A checkpoint is a
        file anyone can edit or plant; it must never put ``~/.ssh/id_rsa`` in the chat. Say in
        one line which came back and which were skipped and why (those become ``dropped``)."""
        root = Path(getattr(coder, "root", None) or ".").resolve()
        editable = {str(Path(p).resolve()) for p in getattr(coder, "abs_fnames", ())}
        read_only = {str(Path(p).resolve()) for p in getattr(coder, "abs_read_only_fnames", ())}
        added: list[str] = []
        added_ro: list[str] = []
        skipped: dict[str, list[str]] = {}
        for fact in sorted(self.tracker.book.find("file"), key=order_key):
            op = fact.detail.get("op")
            if op not in CHAT_OPS and op != READ_ONLY_OP:
                continue
            path, why = _restorable(coder, root, fact.key)
            if why:
                skipped.setdefault(why, []).append(fact.key)
                continue
            full = str(path)
            if full in editable or full in read_only:
                continue
            if op == READ_ONLY_OP:
                coder.abs_read_only_fnames.add(full)
                read_only.add(full)
                added_ro.append(fact.key)
            else:
                coder.abs_fnames.add(full)
                editable.add(full)
                added.append(fact.key)
        dropped = [key for keys in skipped.values() for key in keys]
        if dropped:
            self.tracker.on_files_dropped(dropped, self.session.turn)
        parts = []
        if added:
            parts.append(f"back in the chat: {_listing(added)}")
        if added_ro:
            parts.append(f"read-only: {_listing(added_ro)}")
        if parts:
            coder.io.tool_output("gardener: files " + "; ".join(parts))
        if skipped:
            why = "; ".join(f"{_listing(keys)} ({reason})" for reason, keys in skipped.items())
            coder.io.tool_warning(f"gardener: files not restored: {why}")

    def persist(self) -> int:
        """Facts go to the store's ``facts`` table (with their turn and source entry) as they
        change: the checkpoint files are for people and resume, the table for queries and
        for a crash that left no checkpoint."""
        store = self.session.store
        if store is None:
            return 0
        if self._sync is None or self._sync.store is not store:
            from ..continuity.sync import FactSync

            self._sync = FactSync(store, self.session.session_id)
        return self._sync.flush(self.tracker.book)

    def forget(self, entry_ids: set[str]) -> int:
        """``/forget``: the facts those entries alone showed leave the state block, the next
        checkpoint and the store's facts table; how many."""
        dropped = self.tracker.forget(entry_ids)
        if dropped:
            self.persist()
        return dropped

    # -- the state block -----------------------------------------------------------------------

    def state_text(self, coder: CoderLike) -> str:
        book = self.tracker.book
        if book.version != self._state_version:
            self._state_text = render_state(
                book, max_tokens=self.session.config.state_tokens, model=model_name(coder)
            )
            self._state_version = book.version
        return self._state_text

    def state_tokens(self, coder: CoderLike) -> int:
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
                # counted as the request counts it, like history
                sum(count_tokens(m["content"], model) + framing(coder) for m in pair),
            )
        return self._pair_tokens[1]

    def state_pair(self, coder: CoderLike) -> list[dict]:
        text = self.state_text(coder)
        if not text:
            return []
        return [
            dict(role="user", content=text),  # starts with its one header, STATE_HEADER
            dict(role="assistant", content=STATE_ACK),
        ]

    # -- checkpoints ---------------------------------------------------------------------------

    def checkpoint(self, coder: CoderLike, trigger: str, note: str | None = None) -> Path:
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

    def auto_checkpoint(self, coder: CoderLike, trigger: str) -> Path | None:
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

    def at_exit(self, coder: CoderLike, reason: str | None = None) -> Path | None:
        """The process ends: keep the thread for the next session. Nothing is written when the
        session learnt nothing since it started or since its last checkpoint: an empty session
        must not become the latest checkpoint. The line before the write says why exit pauses;
        ``reason`` (a signal's name) goes into the checkpoint's note."""
        book = self.tracker.book
        if not len(book) or book.version in (self._checkpointed_version, self._start_version):
            return None
        _say(coder, f"gardener: saving checkpoint… ({reason or 'exit'})")
        try:
            path = self.checkpoint(coder, "exit", note=reason)
        except CheckpointError as err:
            # said once, on screen: a warning logged as well reached the terminal a second time
            # through logging's last-resort handler
            _say(coder, f"gardener: exit checkpoint not saved: {err}")
            return None
        _say(coder, f"gardener: checkpoint saved: {self._show(path)}")
        return path

    # -- signals -------------------------------------------------------------------------------

    def install_signals(self) -> None:
        """SIGHUP (the terminal closed) and SIGTERM (``kill``) end Aider without atexit, so
        they would lose the session's thread: catch them, from the main thread only (Python
        allows no other), and not where they are ignored (``nohup`` asked to survive them)."""
        if self._signals or threading.current_thread() is not threading.main_thread():
            return
        for name in EXIT_SIGNALS:
            signum = getattr(signal, name, None)
            if signum is None:
                continue
            try:
                previous = signal.getsignal(signum)
                if previous is signal.SIG_IGN or previous is None:
                    continue
                signal.signal(signum, self._handler)
            except (ValueError, OSError, RuntimeError):
                continue
            self._signals[signum] = previous

    def restore_signals(self) -> None:
        """Put back the handlers found at start, where ours is still the one installed."""
        for signum, previous in list(self._signals.items()):
            try:
                if signal.getsignal(signum) is self._handler:
                    signal.signal(signum, previous)
            except (ValueError, OSError, RuntimeError):
                pass
        self._signals.clear()

    def _on_signal(self, signum: int, frame: Any) -> None:
        """Write the exit checkpoint, then do what the signal did before: call the previous
        handler, or die of the signal (so the parent sees the usual status). Only the file is
        written: the store may be mid-write in this very thread, and its WAL survives a kill."""
        previous = self._signals.get(signum, signal.SIG_DFL)
        try:
            coder = self.session.coder
            if coder is not None:
                self.session.attempt("checkpoint", self.at_exit, coder, signal.Signals(signum).name)
        finally:
            self.restore_signals()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001 - a closed terminal (SIGHUP) cannot be flushed
                    pass
            if callable(previous):
                previous(signum, frame)
            else:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

    def _show(self, path: Path) -> str:
        try:
            return str(Path(path).relative_to(Path(self.project)))
        except ValueError:
            return str(path)

    # -- pressure ------------------------------------------------------------------------------

    def on_pressure(self, coder: CoderLike, used: int, window: int) -> None:
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


def _merged(book: FactBook, own: list[Fact]) -> FactBook:
    """``book`` then copies of ``own``, renumbered after it (the caller applies superseding)."""
    facts = list(book)
    next_id = max((f.id for f in facts), default=0) + 1
    for n, fact in enumerate(own):
        copy = Fact.from_dict(fact.to_dict())
        copy.id, copy.superseded_by, copy.detail = next_id + n, None, dict(fact.detail)
        facts.append(copy)
    return FactBook(facts)


def _restorable(coder: CoderLike, root: Path, name: str) -> tuple[Path | None, str]:
    """(the resolved path, "") when a checkpoint's file may come back into the chat, else
    (None, why not)."""
    raw = Path(name)
    if name.startswith("~") or raw.is_absolute():
        # an absolute path inside the project is still the project's file
        try:
            path = raw.expanduser().resolve()
        except (OSError, RuntimeError):
            return None, "outside the project"
    else:
        try:
            path = (root / raw).resolve()
        except (OSError, RuntimeError):
            return None, "outside the project"
    if not path.is_relative_to(root):
        return None, "outside the project"
    rel = path.relative_to(root)
    if rel.parts[:1] == (".git",) or any(part.startswith(".aider.gardener") for part in rel.parts):
        return None, "not a project file"
    if not path.is_file():
        return None, "missing"
    repo = getattr(coder, "repo", None)
    if repo is not None:
        try:
            if repo.ignored_file(str(path)):
                return None, "aiderignored"
            if repo.git_ignored_file(str(path)) and not getattr(
                coder, "add_gitignore_files", False
            ):
                return None, "gitignored"
        except Exception as err:  # noqa: BLE001 - a broken repo must not stop the resume
            log.debug("ignore check failed for %s: %s", path, err)
    return path, ""


def _listing(paths: list[str]) -> str:
    shown = ", ".join(paths[:MAX_FILES_SHOWN])
    return shown + (
        f" +{len(paths) - MAX_FILES_SHOWN} more" if len(paths) > MAX_FILES_SHOWN else ""
    )


def _say(coder: CoderLike, line: str) -> None:
    """A status line at exit, when the terminal may be gone (SIGHUP): never let printing stop
    the checkpoint."""
    try:
        coder.io.tool_output(line)
    except Exception:  # noqa: BLE001
        log.info("%s", line)


def mark_messages(session: GardenerSession) -> None:
    """Before each eviction pass, carry what the facts know into the priorities: messages behind
    a failed approach go last; an error output whose error the facts saw fixed may go early."""
    facts = tracker_of(session)
    failed = facts.failed_entry_ids()
    open_errors = facts.open_error_entry_ids()
    error_ids = {f.entry_id for f in facts.book if f.kind == "error" and f.entry_id}
    for meta in session.table.values():
        if not meta.entry_id:
            continue
        if meta.entry_id in failed:
            meta.failed = True
        meta.open_error = meta.entry_id in open_errors
        if meta.entry_id in error_ids and meta.entry_id not in open_errors:
            meta.resolved = True


def keeper_of(session: GardenerSession) -> Keeper:
    """The session's continuity (checkpoints, facts, state block), made on first use: the
    session holds it, this layer builds it, so the session imports nothing above it."""
    if session.keeper is None:
        session.keeper = Keeper(session)
    return session.keeper


def tracker_of(session: GardenerSession) -> FactTracker:
    """The session's ``FactTracker`` (its ``book`` holds the facts)."""
    return keeper_of(session).tracker
