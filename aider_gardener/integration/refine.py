"""``--gardener-llm-refine``: the weak model tightens the oldest summaries, in the background.

The gardener never needs an LLM; this is an opt-in extra for users who would trade a few cheap
weak-model calls for a smaller history. It is built so it can never cost a turn:

* a daemon thread does the calls; the turn path only hands it work and, before a request,
  applies finished results (a dictionary lookup when there are none);
* a result is kept only if it is shorter than the summary it replaces and still holds every key
  the summary held (paths, identifiers, error codes, ids: ``store.priority.extract_keys``) — a
  refinement that loses a fact is thrown away;
* results are applied in a batch, only when they save ``MIN_SAVING`` tokens together, so the
  prompt prefix (and providers' prompt caches) changes rarely, like eviction's aging;
* the originals stay in the store; only the in-chat summary changes, and its recall handle is
  kept verbatim.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import TYPE_CHECKING, Any

from ..store.priority import extract_keys
from ..tokens import count_tokens
from ..types import HANDLE_PREFIX
from .session import GardenerSession, MessageMeta, model_name, swap

if TYPE_CHECKING:
    from .seams import CoderLike


log = logging.getLogger(__name__)

MAX_PENDING = 4  # summaries handed over per request at most
MIN_TOKENS = 120  # shorter summaries are not worth a call
MIN_SAVING = 256
MAX_KEYS = 256
PROMPT = (
    "Rewrite this summary of an earlier message in a coding session to be as short as possible."
    " Keep verbatim every file path, line number, identifier, command, error message, error code,"
    " test name and number. Drop repetition and filler. Reply with the rewritten summary only."
)


def _split_handle(text: str) -> tuple[str, str]:
    """(body, trailing handle line or "")."""
    head, sep, tail = text.rpartition("\n")
    if sep and tail.startswith(HANDLE_PREFIX):
        return head, "\n" + tail
    return text, ""


def acceptable(summary: str, refined: str, model: str) -> bool:
    """Shorter, and every key of the summary survives."""
    if not refined or not refined.strip():
        return False
    if count_tokens(refined, model) >= count_tokens(summary, model):
        return False
    lowered = refined.lower()  # extract_keys folds some keys (error codes, names) to lower case
    return all(key.lower() in lowered for key in extract_keys(summary, MAX_KEYS))


class Refiner:
    """One session's refinement worker. ``submit`` and ``apply`` run on Aider's main thread."""

    def __init__(self, session: GardenerSession) -> None:
        self.session = session
        self._jobs: queue.Queue = queue.Queue()
        self._done: dict[int, tuple[MessageMeta, str, str]] = {}  # id(meta) -> (meta, old, new)
        self._asked: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.calls = 0
        self.rejected = 0

    # -- main thread ---------------------------------------------------------------------------

    def submit(self, coder: CoderLike) -> int:
        """Hand the oldest summaries not yet asked about to the worker."""
        weak = getattr(coder.main_model, "weak_model", None) or coder.main_model
        model = model_name(coder)
        metas = sorted(
            (
                m
                for m in self.session.table.values()
                if m.state == "summary"
                and id(m) not in self._asked
                and m.tokens_summary >= MIN_TOKENS
            ),
            key=lambda m: m.turn,
        )[:MAX_PENDING]
        for meta in metas:
            self._asked.add(id(meta))
            self._jobs.put((meta, meta.summary, weak, model))
        if metas:
            self._ensure_thread()
        return len(metas)

    def apply(self, coder: CoderLike) -> int:
        """Swap in finished refinements, in one batch worth ``MIN_SAVING`` tokens."""
        with self._lock:
            ready = [
                (meta, old, new)
                for meta, old, new in self._done.values()
                if self.session.live(meta) and meta.state == "summary" and meta.summary == old
            ]
            if not ready:
                return 0
            model = model_name(coder)
            saving = sum(
                meta.tokens_summary - count_tokens(new, model) for meta, _old, new in ready
            )
            if saving < MIN_SAVING:
                return 0
            self._done.clear()
        applied = 0
        for meta, _old, new in ready:
            meta.summary = new
            meta.tokens_summary = count_tokens(new, model)
            for lst in (coder.done_messages, coder.cur_messages):
                for i, msg in enumerate(lst):
                    if msg is meta.msg:
                        swap(self.session, lst, i, meta, "summary")
                        applied += 1
                        break
        self.session.stats["refined"] += applied
        return applied

    # -- worker --------------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._run, name="gardener-refine", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                meta, summary, weak, model = self._jobs.get(timeout=30)
            except queue.Empty:
                return  # idle: the thread ends; the next submit starts another
            try:
                refined = self._refine(summary, weak, model)
            except Exception as err:  # noqa: BLE001 - a failed call only loses that refinement
                log.debug("gardener: refinement failed: %s", err)
                refined = None
            if refined is not None:
                with self._lock:
                    self._done[id(meta)] = (meta, summary, refined)
            self._jobs.task_done()

    def _refine(self, summary: str, weak: Any, model: str) -> str | None:
        body, handle = _split_handle(summary)
        messages = [
            dict(role="system", content=PROMPT),
            dict(role="user", content=body),
        ]
        self.calls += 1
        _hash, response = weak.send_completion(messages=messages, functions=None, stream=False)
        text = response.choices[0].message.content if response and response.choices else None
        if not isinstance(text, str):
            return None
        refined = text.strip() + handle
        if not acceptable(summary, refined, model):
            self.rejected += 1
            return None
        return refined

    def wait(self, timeout: float = 10.0) -> None:
        """Tests and the replay bench: let queued refinements finish."""
        done = threading.Event()

        def join() -> None:
            self._jobs.join()
            done.set()

        threading.Thread(target=join, daemon=True).start()
        done.wait(timeout)


def refiner_of(session: GardenerSession) -> Refiner:
    """``--gardener-llm-refine``'s background worker for the session, made on first use."""
    if session.refiner is None:
        session.refiner = Refiner(session)
    return session.refiner
