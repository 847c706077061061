"""``GardenerMixin``: the hooks that garden one Aider coder.

Put first in the bases of every coder class (see registry.py). Each hook does its gardener work
through ``GardenerSession.attempt`` and otherwise calls Aider's own method, so a failure in the
gardener costs one warning and that step of gardening, never the session. Passive coders (the
architect's editor, the ``/lint`` clone, ``/help``) run plain Aider. Hooks, in request order:

* ``run_one``: remembers what the user typed (so the prompt is theirs); a new turn for the store.
* ``send_message``: takes an output sent as the message itself out of ``cur_messages`` (Aider
  would send it twice), pauses the background embedder, retries once after an overflow.
* ``format_chat_chunks``: ingest, age and evict, build Aider's chunks, apply the incremental
  view, inject recalled context, print the status line.
* ``summarize_*``/``summarizer``: eviction replaces Aider's LLM summarizer (ingest only here);
  ``send``/``show_exhausted_error``: a window overflow becomes one retry; ``apply_updates``/
  ``lint_edited``: successful edits resolve errors about the edited files, lint is tool output.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from typing import TYPE_CHECKING, Any

from ..preload import preload
from ..store.priority import path_keys
from ..tokens import count_tokens
from .eviction import GardenerSummary, evict, history_tokens
from .incremental import incremental_view
from .ingest import sync
from .keeper import keeper_of, tracker_of
from .rag import inject, prefetch, preview_recall
from .refine import refiner_of
from .session import (
    GardenerSession,
    Hint,
    TurnEvents,
    creating_passive,
    framing,
    model_name,
    passive_coders,
    passive_observer,
    window_of,
)

if TYPE_CHECKING:
    # Only ever a base of Aider's coder classes (registry.py), so mypy reads it as one. Aider is
    # not followed (pyproject.toml), so this is Any: its attributes and super() calls pass
    # unchecked, and the mixin itself passes where a ``CoderLike`` (seams.py) is expected.
    from aider.coders.base_coder import Coder as _CoderBase
else:
    _CoderBase = object

log = logging.getLogger(__name__)

PREFLIGHT_SHARE = 0.95  # evict hard before sending when the prompt would exceed this share
PREFLIGHT_TARGET = 0.85
OVERFLOW_NOTICE = "FinishReasonLength exception: you sent too many tokens"


def _request_model(name: str) -> None:
    """``--gardener-embedder``: before the start-up line names the model and the preload loads
    it (``store/model_choice.py``)."""
    from ..store import model_choice

    model_choice.request(name)


def _foreground() -> Any:
    from ..store.worker import foreground

    return foreground()


def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.blake2b(f.read(), digest_size=16).hexdigest()


class GardenerMixin(_CoderBase):
    if TYPE_CHECKING:  # Aider's, replaced in _garden_activate
        commands: Any
        summarizer: Any

    _garden: GardenerSession | None = None
    _garden_passive = True
    _garden_initializing = False
    _garden_sending = False
    _garden_hard_target: int | None = None
    _garden_cwe = False
    _garden_retry = "idle"
    _garden_typed: str | None = None
    _garden_last_edited: list | None = None
    _garden_counted: int | None = None
    _garden_observer: GardenerSession | None = None
    _garden_before: dict | None = None
    _garden_previewing = False
    _garden_startup: list | None = None

    def __init__(self, main_model, io, *args, **kwargs):
        self._garden_passive = bool(creating_passive() or self.edit_format == "help")
        self._garden_observer = passive_observer() if self._garden_passive else None
        self._garden = None
        self._garden_initializing = True
        try:
            super().__init__(main_model, io, *args, **kwargs)
        finally:
            self._garden_initializing = False
        if not self._garden_passive:
            self._garden = self._garden_activate()

    def _garden_activate(self) -> GardenerSession | None:
        try:
            from .commands import GardenCommands

            commands = self.commands
            if not isinstance(commands, GardenCommands):
                commands = GardenCommands.adopt(commands)
                self.commands = commands
                commands.coder = self
            session = commands.gardener
            session.io = self.io
            if session.config.mode == "off":
                return None
            self.summarizer = GardenerSummary(
                session, self.main_model, getattr(self.summarizer, "max_tokens", 1024)
            )
            session.attach(self)
            if session.config.vectors and session.config.embedder:
                session.attempt("embedder", _request_model, session.config.embedder)
            if not session.stats["announced"]:  # once per process, not per mode switch
                session.stats["announced"] = 1
                from .startup import export_note, startup_line

                line = session.attempt("status", startup_line, session, self)
                note = session.attempt("status", export_note, session, self, default=None)
                self._garden_startup = [t for t in (line, note) if t]  # after Aider's banner
            if session.config.resume:  # compresses now, in the main thread: the numeric stack
                preload()
            session.attempt("resume", keeper_of(session).start, self)
            session.attempt("store", session.protect_store_folder, self)
            return session
        except Exception as err:  # noqa: BLE001 - never stop Aider from starting
            log.warning("gardener: could not start (%s); running plain aider", err)
            try:
                self.io.tool_warning(f"gardener: could not start ({err}); running plain aider")
            except Exception:  # noqa: BLE001
                pass
            return None

    @property
    def gardener(self) -> GardenerSession | None:
        return self._garden

    # -- start-up (startup.py) -----------------------------------------------------------------

    def show_announcements(self):
        super().show_announcements()
        self._garden_announce()

    def _garden_announce(self) -> None:
        lines, self._garden_startup = self._garden_startup, None
        g = self._garden
        for line in lines or ():  # an io that cannot print must not cost the session its gardener
            if g is not None:
                g.attempt("status", self.io.tool_output, line)

    def get_input(self):
        g = self._garden
        if g is not None:
            self._garden_announce()  # a coder made with return_coder: Aider showed no banner
            from .startup import after_first_prompt

            g.attempt("preload", after_first_prompt, g, self)
        return super().get_input()

    # -- summarizer replacement ----------------------------------------------------------------

    def summarize_start(self):
        g = self._garden
        if g is not None:
            g.attempt("ingest", sync, g, self)
            return
        if self._garden_initializing and not self._garden_passive:
            return  # restored history: gardened at the first request instead
        return super().summarize_start()

    def move_back_cur_messages(self, message):
        g = self._garden
        if g is not None and message:
            g.hint(message, Hint(kind="notice", command="aider"))  # e.g. the commit notice
        return super().move_back_cur_messages(message)

    def summarize_end(self):
        if self._garden is not None and self.summarizer_thread is None:
            return
        return super().summarize_end()

    # -- one user turn -------------------------------------------------------------------------

    def run_one(self, user_message, preproc):
        if self._garden is None:
            return super().run_one(user_message, preproc)
        preload()  # waits for startup.py's background import instead of racing it
        self._garden_typed = user_message
        self._garden.attempt("store", self._garden.new_turn)
        try:
            return super().run_one(user_message, preproc)
        finally:
            self._garden_typed = None

    def _garden_prepare(self, inp: str) -> str:
        """Before Aider appends ``inp`` to ``cur_messages``: recognise what it is, and if it is
        command output that ``/run`` already added as a (user, "Ok.") pair, take the pair out
        and send its (possibly compressed) text once."""
        g = self._garden
        assert g is not None  # called only from _garden_send_message, with the session
        cur = self.cur_messages
        if (
            len(cur) >= 2
            and cur[-1].get("role") == "assistant"
            and cur[-1].get("content") in ("Ok.", "Ok")
            and cur[-2].get("role") == "user"
        ):
            meta = g.meta(cur[-2])
            if cur[-2].get("content") == inp or (meta is not None and meta.original == inp):
                text = cur[-2]["content"]
                del cur[-2:]
                if meta is not None:
                    g.discard(meta)
                    g.hint(
                        text,
                        Hint(kind=meta.kind, command=meta.command, starts_turn=True, meta=meta),
                    )
                return text
        hint = g.hints.get(inp)
        if hint is not None:
            hint.starts_turn = True
            return inp
        typed = self._garden_typed
        kind = None
        if typed and not self.commands.is_command(typed) and inp.startswith(typed.strip()[:64]):
            kind = "prompt"
        g.hint(inp, Hint(kind=kind, starts_turn=True))
        return inp

    def send_message(self, inp):
        g = self._garden
        if g is None:
            yield from super().send_message(inp)
            return
        g.io = self.io
        # The background embedder pauses while the request is prepared and sent: it competed
        # with the query embedding and compression for the same cores (decision 089)
        busy = g.attempt("foreground", _foreground) or contextlib.nullcontext()
        with busy:
            yield from self._garden_send_message(g, inp)

    def _garden_send_message(self, g: GardenerSession, inp):
        inp = g.attempt("ingest", self._garden_prepare, inp, default=inp)
        if g.config.rag:
            g.attempt("recall", self._garden_prefetch, g, inp)
        g.events = TurnEvents()
        self._garden_sending = True
        self._garden_cwe = False
        self._garden_retry = "idle"
        try:
            yield from super().send_message(inp)
            if self._garden_retry == "pending":
                self._garden_retry = "used"
                if g.attempt("overflow", self._garden_prepare_retry, inp, default=False):
                    yield from super().send_message(inp)
            g.attempt("ingest", sync, g, self)  # the reply is stored (and recallable) now
            g.attempt("facts", keeper_of(g).persist)
            if g.config.llm_refine:
                g.attempt("refine", refiner_of(g).submit, self)
        finally:
            self._garden_sending = False
            self._garden_hard_target = None
            self._garden_retry = "idle"

    def _garden_prefetch(self, g: GardenerSession, inp: str) -> None:
        """The query ``_garden_query`` will find once Aider has appended ``inp``: its embedding
        starts now, on the other core (rag.prefetch)."""
        hint = g.hints.get(inp)
        meta = hint.meta if hint is not None else None
        prefetch(g, meta.original if meta is not None else inp)

    def _garden_prepare_retry(self, inp: str) -> bool:
        g = self._garden
        assert g is not None  # called only from _garden_send_message, with the session
        cur = self.cur_messages
        if cur and cur[-1].get("role") == "assistant" and cur[-1].get("content") == OVERFLOW_NOTICE:
            del cur[-1]
        if not cur or cur[-1].get("role") != "user" or cur[-1].get("content") != inp:
            return False
        meta = g.meta(cur[-1])
        del cur[-1]
        if meta is not None:
            g.discard(meta)
            g.hint(inp, Hint(kind=meta.kind, command=meta.command, meta=meta))
        self._garden_hard_target = history_tokens(g, self) // 2
        self._garden_cwe = False
        return True

    # -- building the request ------------------------------------------------------------------

    @contextlib.contextmanager
    def garden_preview(self):
        """Inside this block ``format_chat_chunks`` builds the prompt the next request would
        carry, without doing anything: ``/tokens`` and ``/context-pressure`` must measure the
        prompt, not change it (no ingest, eviction, checkpoint, warning, status line or store
        write; recall reads only)."""
        before = self._garden_previewing
        self._garden_previewing = True
        try:
            yield self
        finally:
            self._garden_previewing = before

    def _garden_preview_chunks(self, g: GardenerSession) -> Any:
        """The view (incremental summary, state block) and the recall pair a request sent now
        would carry; the incremental view's cut point and line cache are put back after."""
        compiled, floor = dict(g.compiled), g.compiled_floor
        try:
            chunks = self._garden_view(g, super().format_chat_chunks())
        finally:
            g.compiled.clear()
            g.compiled.update(compiled)
            g.compiled_floor = floor
        if g.config.rag:
            g.attempt("recall", preview_recall, g, self, chunks, self._garden_query())
        return chunks

    def format_chat_chunks(self):
        g = self._garden
        if g is None:
            return super().format_chat_chunks()
        if self._garden_previewing:
            return self._garden_preview_chunks(g)
        g.attempt("ingest", sync, g, self)
        self._garden_counted = None
        if g.config.llm_refine:
            g.attempt("refine", refiner_of(g).apply, self)
        hard = self._garden_hard_target
        if g.config.evicts or hard is not None:
            g.attempt("evict", evict, g, self, hard)
        chunks = self._garden_view(g, super().format_chat_chunks())
        if g.config.evicts or g.config.incremental:
            again = g.attempt("evict", self._garden_preflight, g, chunks, default=False)
            if again:
                self._garden_counted = None
                chunks = self._garden_view(g, super().format_chat_chunks())
        if self._garden_sending:
            if g.config.rag:
                g.attempt("recall", inject, g, self, chunks, self._garden_query())
            g.attempt("status", self._garden_status, g, chunks)
            g.attempt("pressure", self._garden_pressure, g, chunks)
        return chunks

    def _garden_state(self, g: GardenerSession, chunks: Any) -> None:
        """The session-state block heads the history chunk (a new list: Aider's own lists
        are never touched)."""
        if g.config.state_tokens <= 0:
            return
        pair = keeper_of(g).state_pair(self)
        if pair:
            chunks.done = pair + list(chunks.done)

    def _garden_prompt_tokens(self, chunks: Any) -> int:
        model = model_name(self)
        return sum(
            count_tokens(m["content"], model)
            for m in chunks.all_messages()
            if isinstance(m.get("content"), str)
        )

    def _garden_pressure(self, g: GardenerSession, chunks: Any) -> None:
        """Warning levels are whole percents of the window: the preflight's count (before the
        recalled pair, at most ``--gardener-rag-tokens``) is close enough and already paid for."""
        window = window_of(self)
        if not window or not g.config.warn_at:
            return
        used = self._garden_counted
        if used is None:
            used = self._garden_prompt_tokens(chunks)
        keeper_of(g).on_pressure(self, used, window)

    def _garden_view(self, g: GardenerSession, chunks: Any) -> Any:
        """Aider's chunks as the gardener shows them: the incremental view, then the
        session-state block at the head of the history."""
        if g.config.incremental:
            chunks = g.attempt("incremental", incremental_view, g, self, chunks, default=chunks)
        g.attempt("state", self._garden_state, g, chunks)
        return chunks

    def _garden_preflight(self, g: GardenerSession, chunks: Any) -> bool:
        """If the prompt would not fit the window, evict hard now instead of letting Aider ask
        "Try to proceed anyway?" or the provider refuse it."""
        window = window_of(self)
        if not window or self._garden_hard_target is not None:
            return False
        total = self._garden_prompt_tokens(chunks)
        self._garden_counted = total
        if total <= PREFLIGHT_SHARE * window:
            return False
        excess = total - int(PREFLIGHT_TARGET * window)
        self._garden_hard_target = max(0, history_tokens(g, self) - excess)
        evict(g, self, self._garden_hard_target)
        return True

    def _garden_query(self) -> str:
        g = self._garden
        assert g is not None  # called only while gardening, with the session
        for msg in reversed(self.cur_messages):
            if msg.get("role") == "user" and isinstance(msg.get("content"), str):
                meta = g.meta(msg)
                return meta.original if meta is not None else msg["content"]
        return ""

    def _garden_status(self, g: GardenerSession, chunks: Any) -> None:
        """One line before a request in which the gardener did something: what the history
        costs now against what it would cost uncompressed, what changed in this request, and
        how much of the history is compressed in all. (It read "888 → 2.4k history tokens",
        which looked like shrinking while the history had grown.) Background notes (embedding
        model, indexing) are printed here first: this is the foreground, between Aider's
        lines, never inside its input prompt."""
        from ..store.worker import take_notes
        from .report import labelled
        from .status import fmt_k, recalled_names

        for note in take_notes(g.store):
            self.io.tool_output(note)
        ev = g.events
        # Output /run compressed between requests counts here: it enters with this request
        # (the per-request events were reset when the request began).
        throttled = g.stats["throttled"] - g.stats["status_throttled"]
        if ev.reported or not (ev.any() or throttled):
            return
        ev.reported = True
        g.stats["status_throttled"] = g.stats["throttled"]
        model = model_name(self)
        frame = framing(self)  # history counted as /tokens and eviction count it
        original = history = 0
        states: dict[str, int] = {}
        for lst in (self.done_messages, self.cur_messages):
            for msg in lst:
                meta = g.meta(msg)
                if meta is not None:
                    original += meta.tokens_full + frame
                    states[meta.state] = states.get(meta.state, 0) + 1
                elif isinstance(msg.get("content"), str):
                    original += count_tokens(msg["content"], model) + frame
        extra = 0  # the session-state block, recalled context, the incremental summary
        for m, label in labelled(list(chunks.done) + list(chunks.cur)):  # as report.measure
            if not isinstance(m.get("content"), str):
                continue
            meta = g.meta(m)
            if label is not None:
                extra += count_tokens(m["content"], model)
            elif meta is not None:
                history += meta.tokens_now + frame
            else:  # Aider's own, e.g. the prompt with its system reminder appended
                history += count_tokens(m["content"], model) + frame
        g.stats["dropped"] += ev.dropped
        line = f"gardener: history {fmt_k(history)} tokens sent ({fmt_k(original)} uncompressed)"
        if extra:
            line += f" + {fmt_k(extra)} state/recalled"
        names = recalled_names(g) if ev.recalled else ""
        now = [
            (max(throttled, ev.throttled), "output compressed", "outputs compressed"),
            (ev.aged + ev.summarized, "message summarized", "messages summarized"),
            (ev.referenced, "cut to a reference line", "cut to reference lines"),
            (ev.dropped, "message dropped", "messages dropped"),
            (ev.recalled, "recalled from the store" + names, "recalled from the store" + names),
        ]
        line += "; this request: " + ", ".join(
            f"{n} {one if n == 1 else many}" for n, one, many in now if n
        )
        total = [
            (states.get("summary", 0), "compressed"),
            (states.get("ref", 0), "as reference lines"),
            (g.stats["dropped"], "dropped"),
        ]
        if any(n for n, _ in total):
            line += "; in history: " + ", ".join(f"{n} {what}" for n, what in total if n)
        self.io.tool_output(line)

    # -- overflow ------------------------------------------------------------------------------

    def send(self, messages, model=None, functions=None):
        try:
            yield from super().send(messages, model=model, functions=functions)
        except Exception as err:
            if self._garden is not None and type(err).__name__ == "ContextWindowExceededError":
                self._garden_cwe = True
            raise

    def show_exhausted_error(self):
        if self._garden is not None and self._garden_cwe and self._garden_retry == "idle":
            self._garden_retry = "pending"
            self.io.tool_warning(
                "gardener: the context window was exceeded; evicting harder and retrying once"
            )
            return
        return super().show_exhausted_error()

    # -- edits and lint ------------------------------------------------------------------------

    def apply_updates(self):
        g = self._garden
        facts = g or self._garden_observer
        if facts is None:
            return super().apply_updates()
        if g is not None:
            g.attempt("ingest", sync, g, self)  # the reply's facts come before its edits'
        self._garden_before = {}
        edited = super().apply_updates()
        if edited:
            facts.attempt("resolve", self._garden_resolve, facts, edited)
            facts.attempt("facts", self._garden_edited, facts, edited)
        return edited

    def allowed_to_edit(self, path):
        if self._garden is None and self._garden_observer is None:
            return super().allowed_to_edit(path)
        before = self._garden_before
        if before is not None and path not in before:
            try:  # the file as it was before the edit: None when the edit creates it
                full = self.abs_root_path(path)
                before[path] = _digest(full) if os.path.exists(full) else None
            except Exception:  # noqa: BLE001
                pass
        return super().allowed_to_edit(path)

    def _garden_rel(self, path: str) -> str:
        return self.get_rel_fname(self.abs_root_path(path))

    def _garden_edited(self, g: GardenerSession, edited: set) -> None:
        """File facts for the edits that changed a file: Aider returns every file a reply
        named even when some of its edits failed (and then prints no "Applied edit")."""
        before = self._garden_before or {}
        changed = set()
        for path in edited:
            if not isinstance(path, str) or not path:
                continue  # e.g. a udiff hunk without a file name
            if path in before:
                full = self.abs_root_path(path)
                now = _digest(full) if os.path.exists(full) else None
                if now == before[path]:
                    continue
            changed.add(path)
        paths = sorted({self._garden_rel(p) for p in changed})
        created = sorted({self._garden_rel(p) for p in changed if before.get(p, "") is None})
        self._garden_last_edited = paths
        if paths:
            tracker_of(g).on_edit_applied(paths, g.turn, created=created)

    def show_auto_commit_outcome(self, res):
        super().show_auto_commit_outcome(res)
        g = self._garden or self._garden_observer
        if g is not None and res:
            commit_hash, message = res
            paths = self._garden_last_edited or []
            g.attempt("facts", tracker_of(g).on_commit, commit_hash, message, paths, g.turn)

    def _garden_resolve(self, g: GardenerSession, edited: set) -> None:
        store = g.store
        for path in edited:
            if store is not None:
                store.mark_file_edited(str(path))
            names = set(path_keys(str(path)))
            for meta in list(g.table.values()):
                if meta.cls == "error" and names & set(meta.keys):
                    meta.resolved = True

    def lint_edited(self, fnames):
        res = super().lint_edited(fnames)
        g = self._garden
        if g is not None and res:
            g.hint(res, Hint(kind="tool", command="lint"))
        return res

    def reply_completed(self):
        if self._garden is not None and self.edit_format == "architect":
            with passive_coders(self._garden):
                return super().reply_completed()
        return super().reply_completed()
