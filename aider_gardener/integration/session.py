"""One Aider process's gardener: the config, the store, and the side table of messages.

Aider sends the message dicts in ``done_messages``/``cur_messages`` to litellm as they are, so
nothing of ours may live in them. What the gardener knows about a message (its class, stored
entry, summary, age, state) lives here, keyed by the identity of the dict; a message that is
swapped for its summary is a *new* dict put in its list slot, and its record moves with it.

The session outlives coders: Aider creates a new coder on every mode switch, and state set on a
coder after ``__init__`` is lost; the session travels in ``GardenCommands`` (see commands.py).

Every piece of gardener work runs through ``attempt``: an exception becomes one warning per kind
of step and the step's neutral result, so Aider carries on as if the gardener were not there.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

from .. import store as store_package
from ..redact import redact
from ..store.db import new_session_id, protect_folder, resolve_location
from .options import GardenerConfig

if TYPE_CHECKING:
    from ..store.db import Store
    from .seams import CoderLike


log = logging.getLogger(__name__)

T = TypeVar("T")

# With no --gardener-budget, history gets what Aider itself gives it: the summarizer's trigger,
# i.e. --max-chat-history-tokens or the model's max_chat_history_tokens (1/16 of the input window,
# at most 8k). The gardener replaces Aider's summarizer at the point Aider would have summarized,
# and honours the flag an Aider user already knows. Measured against the earlier default (1/8 of
# the window) on real and replayed sessions: decision 093.
MIN_BUDGET = 2048

_PASSIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("gardener_passive", default=False)


@contextlib.contextmanager
def passive_coders(observer: Any = None) -> Iterator[None]:
    """Coders created inside this block are helpers (the architect's editor, the ``/lint``
    clone, ``/help``): they run plain Aider and never touch the history. With an ``observer``
    session, the edits and commits they make still become that session's file facts (the
    architect's editor is the one that edits)."""
    token = _PASSIVE.set(observer if observer is not None else True)
    try:
        yield
    finally:
        _PASSIVE.reset(token)


def creating_passive() -> bool:
    return bool(_PASSIVE.get())


def passive_observer() -> Any:
    value = _PASSIVE.get()
    return None if isinstance(value, bool) else value


@dataclass(eq=False)
class MessageMeta:
    """What the gardener knows about one message in the history.

    kind: ``prompt`` (the user's own words, never compressed), ``reply`` (assistant), ``tool``
        (command, test, web or lint output sent as a user message), ``notice`` (Aider's own
        user-role notes, e.g. the commit notice), ``filler`` ("Ok."), ``recall`` (originals put
        back by ``/recall --add``: recorded by the command, never stored again, kept verbatim
        for ``recent_turns`` turns even by hard eviction).
    state: ``full`` (original text in the list), ``summary`` (compressed + handle), ``ref`` (one
        line naming the stored entry).
    """

    msg: dict
    original: str
    role: str
    kind: str
    cls: str
    turn: int
    starts_turn: bool = False
    command: str | None = None
    entry_id: str | None = None
    stored: bool = False
    summary: str = ""
    tokens_full: int = 0
    tokens_summary: int = 0
    tokens_ref: int = 0
    state: str = "full"
    keys: tuple[str, ...] = ()
    last_ref_turn: int = -1
    pinned: bool = False
    resolved: bool = False
    failed: bool = False
    # an error the facts hold open came from this message (``continuity.mark_messages``)
    open_error: bool = False
    # The line that stands for the handle in a summary whose original the store could not keep
    # (``ingest.unkept_line``); "" when the original is stored or the message is whole.
    unkept: str = ""
    # The entry a busy store will write later (``Store.flush_unwritten``): the record becomes
    # ``stored`` then, and its summary gets the handle.
    pending_id: str | None = None
    # Command output with a key in it (``redact.py``): the chat holds its redacted summary from
    # the start, and "full" means the original redacted; the store keeps it whole for /show.
    secret: bool = False

    @property
    def tokens_now(self) -> int:
        if self.state == "summary":
            return self.tokens_summary
        if self.state == "ref":
            return self.tokens_ref
        return self.tokens_full


@dataclass
class Hint:
    """What the caller knows about a message before it enters a list (matched by content)."""

    kind: str | None = None  # None: classify by content
    command: str | None = None
    cls: str | None = None
    starts_turn: bool = False
    meta: MessageMeta | None = None  # an existing record to move to the new dict


@dataclass
class TurnEvents:
    """What the gardener did during one request; the status line reports it."""

    throttled: int = 0
    aged: int = 0
    summarized: int = 0
    referenced: int = 0
    dropped: int = 0
    recalled: int = 0
    hard: bool = False
    reported: bool = False

    def any(self) -> bool:
        return bool(
            self.throttled
            or self.aged
            or self.summarized
            or self.referenced
            or self.dropped
            or self.recalled
        )


@dataclass
class GardenerSession:
    config: GardenerConfig
    store: Store | None = None
    table: dict[int, MessageMeta] = field(default_factory=dict)
    hints: dict[str, Hint] = field(default_factory=dict)
    key_index: dict[str, list[MessageMeta]] = field(default_factory=dict)
    turn: int = 0
    last_user_turn: int = 0
    io: Any = None
    events: TurnEvents = field(default_factory=TurnEvents)
    stats: Counter = field(default_factory=Counter)
    last_reply: MessageMeta | None = None
    compiled: dict[MessageMeta, str] = field(default_factory=dict)  # incremental: meta -> line
    compiled_floor: MessageMeta | None = None  # incremental: first line still in the summary
    warned: set[str] = field(default_factory=set)
    store_failed: bool = False
    rag_ids: list[str] = field(default_factory=list)
    session_id: str = field(default_factory=lambda: _new_session_id())
    keeper: Any = None  # Keeper, made on first use by ``keeper.keeper_of``
    coder: CoderLike | None = None  # the latest gardened coder (for the exit checkpoint)
    exit_hooked: bool = False
    exit_codes: dict[str, int] = field(default_factory=dict)  # command -> status, for ingest
    pending: dict[str, MessageMeta] = field(default_factory=dict)  # entry id -> record (busy)
    refiner: Any = None  # Refiner, made on first use by ``refine.refiner``

    def attach(self, coder: CoderLike) -> None:
        """A gardened coder became the active one (start, or a mode switch)."""
        self.coder = coder
        self.io = coder.io
        if not self.exit_hooked:
            self.exit_hooked = True
            atexit.register(self.close)

    # -- safety --------------------------------------------------------------------------------

    def warn_once(self, key: str, message: str) -> None:
        if key in self.warned:
            return
        self.warned.add(key)
        log.warning(message)
        try:
            if self.io is not None:
                self.io.tool_warning(message)
        except Exception:  # noqa: BLE001 - a broken io must not turn a warning into a crash
            pass

    def attempt(self, step: str, fn: Callable[..., T], *args: Any, default: Any = None, **kw) -> T:
        """Run one step of gardener work; on any exception warn once for this step and return
        ``default`` (the caller then does what plain Aider would). A store another process
        keeps locked, or one opened read-only, said so itself once: the steps it makes fail are
        counted, not warned about (they were 8-10 "failed" lines per turn)."""
        try:
            return fn(*args, **kw)
        except Exception as err:  # noqa: BLE001 - the gardener must never crash Aider
            if type(err).__name__ in ("StoreBusy", "StoreReadOnly"):
                self.stats[f"skipped_{step}"] += 1
                return default
            self.stats[f"failed_{step}"] += 1
            self.warn_once(
                f"step:{step}",
                f"gardener: {step} failed ({type(err).__name__}: {err}); continuing without it",
            )
            return default

    # -- the store -----------------------------------------------------------------------------

    def open_store(self, coder: CoderLike) -> Any:
        """The store, opened on first use (so a failing store costs nothing until needed and
        its failure is one warning, after which the gardener runs without it)."""
        if self.store is not None or self.store_failed:
            return self.store
        cfg = self.config
        try:
            self.store = store_package.open_store(  # looked up late: the bench and tests wrap it
                cfg.store,
                root=getattr(coder, "root", None),
                scope=cfg.scope,
                vectors=cfg.vectors,
                chroma_url=cfg.chroma_url,
                model=coder.main_model.name,
                project_root=getattr(coder, "root", None),
                session_id=self.session_id,
            )
        except Exception as err:  # noqa: BLE001
            self.store_failed = True
            self.warn_once(
                "store-open",
                f"gardener: could not open the store ({type(err).__name__}: {err});"
                " history stays uncompressed",
            )
        return self.store

    def new_turn(self) -> None:
        """The user's next input: a store found busy in the last turn may be waited for once
        more (``Store.new_turn``); within a turn it is waited for at most once."""
        store = self.store
        if store is not None and hasattr(store, "new_turn"):
            store.new_turn()

    def protect_store_folder(self, coder: CoderLike) -> None:
        """The store folder's ``.gitignore`` (``store.db.protect_folder``) also where the store
        itself did not make the folder this session: checkpoints are written there without
        it (an in-memory or failed store), and folders of older versions lack one."""
        folder = getattr(self.store, "dir", None)
        if folder is None or getattr(self.store, "path", None) is None:
            location = self.config.store if self.config.store != ":memory:" else None
            folder, _ = resolve_location(location, getattr(coder, "root", None))
        protect_folder(folder)

    def close(self) -> None:
        """End of the session: the exit checkpoint (so the next session can resume), then the
        store. Registered with atexit when the first coder is gardened; safe to call twice. The
        exit checkpoint says so on screen while it is written (continuity.at_exit); nothing else
        heavy happens here."""
        if self.exit_hooked:  # closed once: the interpreter's exit must not try it again
            self.exit_hooked = False
            atexit.unregister(self.close)
        if self.keeper is not None:
            self.keeper.restore_signals()
        if self.keeper is not None and self.coder is not None:
            self.attempt("checkpoint", self.keeper.at_exit, self.coder)
            self.attempt("facts", self.keeper.persist)
            self.attempt("store", self.protect_store_folder, self.coder)
        store, self.store = self.store, None
        if store is not None:
            try:
                store.close()
            except Exception as err:  # noqa: BLE001
                log.debug("gardener: closing the store failed: %s", err)

    # -- the side table ------------------------------------------------------------------------

    def meta(self, msg: Any) -> MessageMeta | None:
        meta = self.table.get(id(msg))
        return meta if meta is not None and meta.msg is msg else None

    def add(self, meta: MessageMeta) -> None:
        self.table[id(meta.msg)] = meta
        for key in meta.keys:
            self.key_index.setdefault(key, []).append(meta)

    def rekey(self, meta: MessageMeta, new_msg: dict) -> None:
        if self.table.get(id(meta.msg)) is meta:
            del self.table[id(meta.msg)]
        meta.msg = new_msg
        self.table[id(new_msg)] = meta

    def discard(self, meta: MessageMeta) -> None:
        if self.table.get(id(meta.msg)) is meta:
            del self.table[id(meta.msg)]

    def live(self, meta: MessageMeta) -> bool:
        return self.table.get(id(meta.msg)) is meta

    def prune(self, keep: set[int]) -> None:
        """Forget records of messages no longer in any list (``/clear``, dropped pairs)."""
        for key in [k for k in self.table if k not in keep]:
            del self.table[key]
        if sum(len(v) for v in self.key_index.values()) > 4 * max(len(self.table), 64):
            index: dict[str, list[MessageMeta]] = {}
            for meta in self.table.values():
                for k in meta.keys:
                    index.setdefault(k, []).append(meta)
            self.key_index = index

    def hint(self, content: str, hint: Hint) -> None:
        self.hints[content] = hint
        if len(self.hints) > 64:  # hints for messages that never arrived must not pile up
            for key in list(self.hints)[:-32]:
                del self.hints[key]

    def reset_view(self) -> None:
        """``/clear`` and ``/reset``: forget what was in the chat; the store keeps it all."""
        self.table.clear()
        self.key_index.clear()
        self.compiled.clear()
        self.compiled_floor = None
        self.hints.clear()
        self.last_reply = None
        self.rag_ids = []
        self.pending.clear()  # the store still writes them; no record to update any more

    def entries_in_history(self) -> dict[str, str]:
        """entry id -> the state it is in within the live history (a ``/recall --add``
        message holds every entry its keys name)."""
        out: dict[str, str] = {}
        for meta in self.table.values():
            if meta.entry_id:
                for entry_id in meta.keys if meta.kind == "recall" else (meta.entry_id,):
                    if out.get(entry_id) != "full":
                        out[entry_id] = meta.state
        return out

    # -- budget --------------------------------------------------------------------------------

    def budget(self, coder: CoderLike) -> int:
        """History tokens allowed; the session-state block, which heads the history, is paid
        for out of it (at most half)."""
        total = self.configured_budget(coder)
        state = self.keeper.state_tokens(coder) if self.keeper is not None else 0
        return max(total // 2, total - state)

    def configured_budget(self, coder: CoderLike) -> int:
        """The budget as the user set it (``--gardener-budget``, else Aider's history size):
        what reports show, with the state block's share beside it, never netted into it."""
        if self.config.budget:
            return int(self.config.budget)
        return max(MIN_BUDGET, aider_history_tokens(coder))


def _new_session_id() -> str:
    """The store's own id scheme; the session has its id before (or without) a store."""
    return new_session_id()


def aider_history_tokens(coder: CoderLike) -> int:
    """The history size at which Aider would summarize: its summarizer's ``max_tokens`` (which
    ``GardenerSummary`` keeps), else the model's ``max_chat_history_tokens``; 0 when neither is
    there. Aider's ``Model`` always computes the latter, so its rule is not repeated here."""
    for owner, attr in (
        (getattr(coder, "summarizer", None), "max_tokens"),
        (getattr(coder, "main_model", None), "max_chat_history_tokens"),
    ):
        try:
            value = int(getattr(owner, attr, 0) or 0)
        except (TypeError, ValueError):
            value = 0
        if value > 0:
            return value
    return 0


def window_of(coder: CoderLike) -> int:
    try:
        return int(coder.main_model.info.get("max_input_tokens") or 0)
    except Exception:  # noqa: BLE001
        return 0


# -- messages: what several steps do to a message or ask of the model -------------------------


def model_name(coder: CoderLike) -> str:
    try:
        return coder.main_model.name
    except Exception:  # noqa: BLE001
        return "gpt-4o"


def swap(session: GardenerSession, lst: list, index: int, meta: MessageMeta, state: str) -> None:
    """Put a new dict with the text for ``state`` in the slot; the old dict, which another list
    or a pending request may still hold, is never changed."""
    original = redact(meta.original) if meta.secret else meta.original
    text = {"full": original, "summary": meta.summary}.get(state)
    if text is None:
        text = reference_text(meta)
    new = dict(lst[index])
    new["content"] = text
    lst[index] = new
    session.rekey(meta, new)
    meta.state = state


def reference_text(meta: MessageMeta) -> str:
    """Tier 2: one line that says what was here and how to get it back."""
    what = {
        "prompt": "your earlier message",
        "reply": "my earlier reply",
        "tool": f"output of `{redact(meta.command)}`" if meta.command else "command output",
        "notice": "aider notice",
        "recall": "recalled context",
    }.get(meta.kind, "earlier message")
    first = _first_line(meta.summary if meta.state == "summary" else meta.original)
    return (
        f"[{what}, {meta.cls}, {meta.tokens_full:,} tokens: {first}]\n"
        f"[full output stored: id={meta.entry_id}]"
    )


def _first_line(text: str, limit: int = 100) -> str:
    for line in text.splitlines():
        line = redact(line.strip())  # before the clip, which could leave half a key unseen
        if line and not line.startswith("[full output stored"):
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return "…"


_FRAMING: dict[str | None, int] = {}  # model name -> tokens a message adds beyond its text


def framing(coder: CoderLike) -> int:
    """Tokens Aider's count of a request adds to each message beyond its text (role and
    separators: 4 for OpenAI's tokenizers). Eviction counts them too, so its history is the
    number ``/tokens`` and ``/context-pressure`` show, not one a few tokens a message lower."""
    model = getattr(coder, "main_model", None)
    name = getattr(model, "name", None)
    if model is None or not callable(getattr(model, "token_count", None)):
        return 0
    if name in _FRAMING:
        return _FRAMING[name]
    probe = [dict(role="user", content="x")]
    try:
        n = int(model.token_count(probe)) - int(model.token_count([])) - int(model.token_count("x"))
    except Exception:  # noqa: BLE001 - a model without a message count: text only
        n = 0
    _FRAMING[name] = n = max(0, n)
    return n
