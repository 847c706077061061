"""Replay one recorded session through real Aider coders, in one mode, and measure it.

What runs is Aider's own code (``Coder.create``, ``run_one``, the ``SwitchCoder`` loop of
``aider.main``, ``/run`` and ``/test``, edits in a temp git repo, the summarizer thread). Only
the edges are stubbed, so every mode meets the same inputs: ``litellm.completion`` returns the
recorded reply through litellm's ``mock_response`` (over the replay's window it raises
``ContextWindowExceededError`` as a provider would; summarizer requests get a labelled stand-in);
the system prompt's date, platform and shell are pinned and HOME is a temp dir; Aider's questions
are answered yes, except adding files a reply merely mentions; reflections are off, so each
recorded reply answers one request. A ``session`` event ends the Aider process as an exit does
and starts a new one on the same repo and store, resuming in the gardener modes; plain Aider has
no checkpoints, so there ``/soft-restart`` is replayed as ``/clear`` and ``/checkpoint`` skipped.

Each stub and why: docs/decisions/056-replay-harness.md.
"""

from __future__ import annotations

import contextlib
import io as _io
import os
import platform
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import aider_gardener  # noqa: F401  (offline switches before aider/litellm load)
from aider_gardener.store.recall import recall
from aider_gardener.tokens import count_tokens

from .format import TURN_EVENTS, Replay
from .matching import loose, verbatim

MODES = ("aider", "aider-fixed", "gardener", "gardener-evict", "gardener-incremental")
GARDENER_MODES = {
    "gardener": "rag",
    "gardener-evict": "evict",
    "gardener-incremental": "incremental",
}
PINNED_DATE = datetime(2025, 1, 15, 12, 0, 0)
PINNED_PLATFORM = "Linux-6.1.0-replay-x86_64-with-glibc2.36"
FALLBACK_REPLY = "Ok."
# Commands passed to Aider as typed; anything else (``/web``, ``/voice``, ``/exit``, ``/undo`` …)
# needs a network, a terminal or history the replay does not have, and is skipped and counted.
ALLOWED_COMMANDS = {
    "ask",
    "code",
    "architect",
    "context",
    "chat-mode",
    "add",
    "drop",
    "read-only",
    "clear",
    "reset",
    "tokens",
    "ls",
    "map",
    "run",
    "test",
    "soft-restart",
    "checkpoint",
}
# What a plain-Aider user types instead of a gardener command (None: nothing, the line is skipped)
PLAIN_AIDER_EQUIVALENT: dict[str, str | None] = {"soft-restart": "/clear", "checkpoint": None}
# Probe phases: where in a continuity replay a probe was asked
PHASE_SOFT_RESTART = "after-soft-restart"
PHASE_RESUME = "after-resume"
PHASE_NEW_SESSION = "after-new-session"
STAND_IN_LABEL = "[stand-in for Aider's LLM summary, {tokens} tokens of chat summarized]"


@dataclass
class Request:
    turn: int
    tokens: int
    kind: str  # "main", "summary"
    overflow: bool = False


@dataclass
class ProbeResult:
    """``in_prompt``/``in_recall5`` use the loose matcher (``matching.loose``), the
    ``*_verbatim`` fields the strict one (default: the same as the loose result)."""

    question: str
    turn: int
    source_turn: int
    in_prompt: bool
    in_recall5: bool | None  # None: the mode has no recall
    in_prompt_verbatim: bool | None = None
    in_recall5_verbatim: bool | None = None
    kind: str = ""
    phase: str = ""  # "", PHASE_SOFT_RESTART, PHASE_RESUME or PHASE_NEW_SESSION

    def __post_init__(self) -> None:
        if self.in_prompt_verbatim is None:
            self.in_prompt_verbatim = self.in_prompt
        if self.in_recall5_verbatim is None:
            self.in_recall5_verbatim = self.in_recall5

    @property
    def distance(self) -> int:
        return self.turn - self.source_turn


@dataclass
class ModeRun:
    replay: str
    mode: str
    model: str
    window: int
    turns: int = 0
    requests: list[Request] = field(default_factory=list)
    gardener_ms: list[float] = field(default_factory=list)  # per turn, store opening excluded
    gardener_open_ms: list[float] = field(default_factory=list)  # one per store opened
    sessions: int = 1  # Aider processes: 1 + the replay's ``session`` events
    probes: list[ProbeResult] = field(default_factory=list)
    wall_s: float = 0.0
    unused_replies: int = 0
    skipped_commands: int = 0
    errors: list[str] = field(default_factory=list)
    background_chunks: int = 0  # embedded by ``BusyEmbedder`` during the replay (0: none ran)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def messages_text(messages: list[dict]) -> str:
    return "\n".join(_content_text(m.get("content")) for m in messages)


def messages_tokens(messages: list[dict], model: str) -> int:
    """Prompt tokens of one request: the text of every message, counted with the model's
    tokenizer (per-message framing tokens are left out, the same for every mode)."""
    return sum(count_tokens(_content_text(m.get("content")), model) for m in messages)


def stand_in_summary(content: str, model: str, max_tokens: int) -> str:
    """A labelled stand-in of an LLM summary's size: about a fifth of what it summarizes, at most
    a quarter of Aider's history budget, made of the user's own lines (what Aider's summary
    prompt asks to keep), oldest first."""
    tokens = count_tokens(content, model)
    target = max(32, min(tokens // 5, int(max_tokens) // 4))
    lines, role, used = [], "", 0
    for line in content.splitlines():
        if line in ("# USER", "# ASSISTANT"):
            role = line
            continue
        if role != "# USER" or not line.strip():
            continue
        cost = count_tokens(line, model) + 1
        if used + cost > target:
            break
        lines.append(line)
        used += cost
    return "\n".join([STAND_IN_LABEL.format(tokens=tokens), *lines])


class StubLLM:
    """Stands in for ``litellm.completion``; see the module docstring."""

    def __init__(self, real: Any, model: str, window: int):
        self.real = real
        self.model = model
        self.window = window
        self.turn = 0
        self.queue: list[str] = []
        self.requests: list[Request] = []
        self.last_prompt: list[dict] = []
        self.summary_max_tokens = 1024
        self._lock = threading.Lock()

    def __call__(self, **kwargs: Any) -> Any:
        import litellm
        from aider import prompts

        messages = kwargs.get("messages") or []
        tokens = messages_tokens(messages, self.model)
        first = _content_text(messages[0].get("content")) if messages else ""
        with self._lock:
            if first == prompts.summarize:
                self.requests.append(Request(self.turn, tokens, "summary"))
                reply = stand_in_summary(
                    messages_text(messages[1:]), self.model, self.summary_max_tokens
                )
            elif tokens > self.window:
                self.requests.append(Request(self.turn, tokens, "main", overflow=True))
                raise litellm.ContextWindowExceededError(
                    message=f"This model's maximum context length is {self.window} tokens;"
                    f" your messages resulted in {tokens} tokens.",
                    model=kwargs.get("model", self.model),
                    llm_provider="openai",
                )
            else:
                self.requests.append(Request(self.turn, tokens, "main"))
                self.last_prompt = [dict(m) for m in messages]
                reply = self.queue.pop(0) if self.queue else FALLBACK_REPLY
        kwargs["mock_response"] = reply
        return self.real(**kwargs)


class ReplayIO:
    """Aider's ``InputOutput`` answering yes, except to adding files a reply mentions."""

    @staticmethod
    def make(root: Path) -> Any:
        from aider.io import InputOutput

        class _IO(InputOutput):
            def confirm_ask(self, question, *args, **kwargs):  # noqa: ANN001
                self.num_user_asks += 1
                if str(question).startswith(("Add file", "Add URL")):
                    return False
                return True

        return _IO(pretty=False, yes=True, fancy_input=False, root=str(root))


@contextlib.contextmanager
def bench_environment() -> Iterator[Path]:
    """Temp HOME with Aider's model price list seeded from litellm's bundled copy, pinned date,
    platform, shell and language; restored afterwards."""
    import aider.coders.base_coder as base_coder
    import aider.models
    import litellm

    home = Path(tempfile.mkdtemp(prefix="bench-home-"))
    env = {
        "HOME": str(home),
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY") or "sk-replay-stub",
        "AIDER_CHECK_UPDATE": "false",
        "AIDER_ANALYTICS_DISABLE": "true",
        "GIT_AUTHOR_DATE": PINNED_DATE.isoformat(),
        "GIT_COMMITTER_DATE": PINNED_DATE.isoformat(),
    }
    saved_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    src = Path(litellm.__file__).parent / "model_prices_and_context_window_backup.json"
    cache = home / ".aider" / "caches" / "model_prices_and_context_window.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    if src.is_file():
        shutil.copyfile(src, cache)
    manager = aider.models.model_info_manager
    saved_manager = (manager.cache_dir, manager.cache_file, manager._cache_loaded)
    manager.cache_dir, manager.cache_file, manager._cache_loaded = cache.parent, cache, False

    class _PinnedDatetime(datetime):
        @classmethod
        def now(cls, tz=None):  # noqa: ANN001
            return PINNED_DATE if tz is None else PINNED_DATE.replace(tzinfo=tz)

    saved = (base_coder.datetime, platform.platform)
    base_coder.datetime = _PinnedDatetime
    platform.platform = lambda *a, **k: PINNED_PLATFORM
    try:
        yield home
    finally:
        base_coder.datetime, platform.platform = saved
        manager.cache_dir, manager.cache_file, manager._cache_loaded = saved_manager
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(home, ignore_errors=True)


def _gardener_args(
    store: Path, mode: str, vectors: bool, resume: bool = False, budget: int | None = None
) -> Any:
    """The options ``aider-gardener`` would get. Scope is ``project`` (the default): each run
    has a store of its own, so within one Aider process it equals ``session``, and a resumed
    process can recall what the one before it stored. ``budget`` is ``--gardener-budget``
    (None: the gardener's default, Aider's history budget)."""
    import argparse

    return argparse.Namespace(
        gardener_mode=GARDENER_MODES[mode],
        gardener_budget=budget,
        gardener_store=str(store),
        gardener_scope="project",
        gardener_chroma_url=None,
        gardener_max_output=1024,
        gardener_rag_tokens=1024,
        gardener_recent_turns=3,
        gardener_vectors=vectors,
        gardener_resume=resume,
    )


@contextlib.contextmanager
def _mode_context(mode: str) -> Iterator[None]:
    from aider.coders.base_coder import Coder

    from aider_gardener.integration.registry import gardened, restore_coders

    from .aider_fixed import fixed_summarizer

    saved_reflections = Coder.max_reflections
    Coder.max_reflections = 0
    try:
        if mode in GARDENER_MODES:
            with gardened():
                yield
        else:
            restore_coders()
            with fixed_summarizer() if mode == "aider-fixed" else contextlib.nullcontext():
                yield
    finally:
        Coder.max_reflections = saved_reflections


@dataclass
class GardenerClock:
    """Gardener time: ``turn_ms`` accumulates the current turn's work, ``opens`` the time of
    each store opening. Opening the store (SQLite, schema, the embedding worker) is a one-off
    per process on its first use, so it is kept out of the per-turn figures: a first turn that
    pays it would otherwise be the p95."""

    turn_ms: float = 0.0
    opens: list[float] = field(default_factory=list)


@contextlib.contextmanager
def _timed_gardener(clock: GardenerClock) -> Iterator[None]:
    """Time every piece of gardener work: it all runs through ``GardenerSession.attempt``
    (outermost calls only, so nested steps are not counted twice), less the time spent
    opening the store, which ``GardenerSession.open_store`` reports to ``clock.opens``."""
    from aider_gardener.integration.session import GardenerSession

    original = GardenerSession.attempt
    original_open = GardenerSession.open_store
    local = threading.local()

    def attempt(self, step, fn, *args, **kwargs):  # noqa: ANN001
        if getattr(local, "depth", 0):
            return original(self, step, fn, *args, **kwargs)
        local.depth, local.opening = 1, 0.0
        t0 = time.perf_counter()
        try:
            return original(self, step, fn, *args, **kwargs)
        finally:
            local.depth = 0
            clock.turn_ms += (time.perf_counter() - t0) * 1000 - local.opening

    def open_store(self, coder):  # noqa: ANN001
        if self.store is not None or self.store_failed:
            return original_open(self, coder)
        t0 = time.perf_counter()
        try:
            return original_open(self, coder)
        finally:
            ms = (time.perf_counter() - t0) * 1000
            clock.opens.append(ms)
            if getattr(local, "depth", 0):
                local.opening += ms

    GardenerSession.attempt = attempt
    GardenerSession.open_store = open_store
    try:
        yield
    finally:
        GardenerSession.attempt = original
        GardenerSession.open_store = original_open


IDLE_EMBEDDER_ENV = "GARDENER_BENCH_IDLE_EMBEDDER"
BUSY_CHUNK_CHARS = 900  # about a full-size chunk (chunking.TARGET_PIECES word pieces) of prose
BUSY_SLOTS = 2000  # vectors the busy embedder's scratch collection cycles through


class BusyEmbedder:
    """A background embedder that never runs out of work, for the length of one gardener replay
    with vectors on: per-turn time is to be measured *while the embedder is busy*.

    The replay's own worker is busy only while the chunks of the last turns are pending, and the
    replay sends its turns back to back, so how often a turn met a busy embedder depended on the
    replay. This thread is one with a backlog that never drains (what a 144k-token log, or a
    second session's queue, is for a while): it embeds groups of ``worker.BATCH_SIZE``
    full-size chunks of the replay's own text and upserts them into a scratch chromadb
    collection of its own, through the same ``VectorIndex.add``, at the worker's lower OS
    priority and with the worker's pause points (before every forward pass and before the
    upsert, while a request is in the foreground). It writes nothing to the replay's store, so
    what the replay recalls is unchanged. ``GARDENER_BENCH_IDLE_EMBEDDER=1`` turns it off."""

    def __init__(self, texts: list[str], where: Path) -> None:
        from aider_gardener.store.worker import BATCH_SIZE

        self.texts = texts or ["the quick brown fox jumps over the lazy dog " * 20]
        self.where = where
        self.batch = BATCH_SIZE
        self.chunks = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.index: Any = None

    @staticmethod
    def texts_of(replay: Replay) -> list[str]:
        text = "\n".join(
            str(e.get("content") or e.get("output") or "")
            for e in replay.events
            if e.get("type") in TURN_EVENTS or e.get("type") == "assistant"
        )
        return [
            text[i : i + BUSY_CHUNK_CHARS]
            for i in range(0, len(text), BUSY_CHUNK_CHARS)
            if text[i : i + BUSY_CHUNK_CHARS].strip()
        ]

    def start(self) -> bool:
        from aider_gardener.store.vectors import open_index

        self.index = open_index(self.where)
        if self.index is None or not self.index.warm():
            return False
        self._thread = threading.Thread(target=self._run, name="bench-busy-embed", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        if self.index is not None:
            self.index.close()

    def _between(self) -> None:
        from aider_gardener.store.worker import FOREGROUND

        if self._stop.is_set():
            raise _BusyStopped()
        FOREGROUND.wait_idle(self._stop)
        if self._stop.is_set():
            raise _BusyStopped()

    def _run(self) -> None:
        from aider_gardener.store.runtime import lower_thread_priority

        lower_thread_priority()
        n = 0
        while not self._stop.is_set():
            group = [self.texts[(n + i) % len(self.texts)] for i in range(self.batch)]
            ids = [f"busy{(n + i) % BUSY_SLOTS}" for i in range(self.batch)]
            try:
                self.index.add([f"{i}:0" for i in ids], ids, group, between=self._between)
            except _BusyStopped:
                return
            n += self.batch
            self.chunks += self.batch


class _BusyStopped(Exception):
    pass


@contextlib.contextmanager
def busy_embedder(replay: Replay, mode: str, vectors: bool) -> Iterator[BusyEmbedder | None]:
    """A ``BusyEmbedder`` running for the block, in the gardener modes with vectors on."""
    if mode not in GARDENER_MODES or not vectors or os.environ.get(IDLE_EMBEDDER_ENV) == "1":
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="bench-busy-") as where:
        busy = BusyEmbedder(BusyEmbedder.texts_of(replay), Path(where))
        started = busy.start()
        try:
            yield busy if started else None
        finally:
            busy.stop()


def command_name(line: str) -> str | None:
    if not line.startswith("/"):
        return None
    word = line[1:].split(None, 1)[0] if line[1:].strip() else ""
    return word.lower()


class CoderDriver:
    """What every replay driver shares: the current coder, replaced as Aider's ``main`` loop
    replaces it on a ``SwitchCoder``, and the scripted answer of the next shell command.
    Subclasses set ``coder``, ``io``, ``root`` and ``scripted``."""

    coder: Any
    io: Any
    root: Path
    scripted: tuple[int, str] | None = None

    def file_event(self, event: dict) -> None:
        """An ``add``/``drop`` event: write the file's recorded content into the replay's repo,
        then the command the user typed (``/add``, ``/drop`` or ``/read-only``)."""
        kind = event["type"]
        path = self.root / event["path"]
        if "content" in event and kind == "add":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(event["content"], encoding="utf-8")
        verb = "read-only" if event.get("read_only") else kind
        quoted = f'"{event["path"]}"' if " " in event["path"] else event["path"]
        self.line(f"/{verb} {quoted}")

    def run_cmd(self, command: str, **kwargs: Any) -> tuple[int, str]:
        scripted, self.scripted = self.scripted, None
        return scripted if scripted is not None else (0, "")

    def line(self, text: str) -> None:
        from aider.coders import Coder
        from aider.commands import SwitchCoder

        try:
            self.coder.run_one(text, preproc=True)
        except SwitchCoder as switch:
            kwargs = dict(io=self.io, from_coder=self.coder)
            kwargs.update(switch.kwargs)
            kwargs.pop("show_announcements", None)
            self.coder = Coder.create(**kwargs)


class _Session(CoderDriver):
    """One replay in one mode: the coder (replaced on every SwitchCoder), the stub and the
    scripted ``run_cmd``."""

    def __init__(
        self,
        replay: Replay,
        mode: str,
        root: Path,
        store: Path,
        vectors: bool,
        resume: bool = False,
    ):
        from aider.coders import Coder
        from aider.models import Model

        self.replay, self.mode, self.root = replay, mode, root
        meta = replay.meta
        self.model_name = meta["model"]
        self.window = int(meta["max_input_tokens"])
        self.io = ReplayIO.make(root)
        model = Model(self.model_name)
        for m in [m for m in (model, model.weak_model) if m is not None]:
            m.info = dict(m.info or {}, max_input_tokens=self.window)
        model.max_chat_history_tokens = min(max(self.window / 16, 1024), 8192)
        commands = None
        if mode in GARDENER_MODES:
            from aider_gardener.integration.commands import GardenCommands

            budget = meta.get("gardener_budget")
            args = _gardener_args(store, mode, vectors, resume, int(budget) if budget else None)
            commands = GardenCommands(self.io, None, args=args)
        self.coder = Coder.create(
            model,
            meta.get("edit_format") or None,
            self.io,
            commands=commands,
            stream=False,
            map_tokens=0,
            auto_commits=False,
            dirty_commits=False,
            auto_lint=False,
            suggest_shell_commands=False,
            detect_urls=False,
            chat_language="English",
            fnames=[],
        )
        self.scripted: tuple[int, str] | None = None
        self.closed = False

    def next_prompt(self, stub: StubLLM) -> list[dict]:
        """The history part of the prompt Aider would send now (built the way Aider builds it,
        so pending summaries and gardener eviction apply); the last request as a fallback."""
        try:
            return list(self.coder.format_messages().all_messages())
        except Exception:  # noqa: BLE001 - a probe must never end the replay
            return stub.last_prompt

    def store(self) -> Any:
        session = getattr(self.coder, "gardener", None)
        return session.store if session is not None else None

    def close(self) -> None:
        """What ends with the Aider process: the gardener session (its exit work included)
        and the summarizer thread. Once only."""
        if self.closed:
            return
        self.closed = True
        session = getattr(self.coder, "gardener", None)
        if session is not None:
            session.close()
        # Every coder of the session may have left one running, not only the current coder: a
        # mode switch (``/architect``, ``/ask``) summarizes in the coder it leaves. A thread
        # still running after the replay would send its request to the next run's stub.
        for thread in threading.enumerate():
            if "summarize_worker" in thread.name and thread is not threading.current_thread():
                thread.join(timeout=30)


def _in_prompt_both(answers: list[str], messages: list[dict], run: ModeRun) -> tuple[bool, bool]:
    """(loose, verbatim): is an answer in the prompt? Only if that prompt can be sent (fits
    the window). Loose matching looks for the answer's content words within one message."""
    if messages_tokens(messages, run.model) > run.window:
        return False, False
    units = [_content_text(m.get("content")) for m in messages]
    strict = verbatim(answers, "\n".join(units))
    return strict or loose(answers, units), strict


def _in_prompt(answers: list[str], messages: list[dict], run: ModeRun) -> bool:
    return _in_prompt_both(answers, messages, run)[0]


def _recall_hit_both(store: Any, question: str, answers: list[str]) -> tuple[bool, bool]:
    """(loose, verbatim): is an answer in one of ``recall(question)``'s top 5 hits?"""
    if store is None:
        return False, False
    with contextlib.suppress(Exception):
        store.drain(timeout=60)  # embeddings of everything said so far, as after a pause
    hits = recall(store, question, limit=5)
    if not hits:
        return False, False
    originals = store.get_entries([h.entry_id for h in hits])
    hit_loose = hit_strict = False
    for hit in hits:
        entry = originals.get(hit.entry_id)
        text = entry.original if entry is not None else hit.text
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        unit = f"{text}\n{hit.text}\n{hit.excerpt}"
        hit_strict = hit_strict or verbatim(answers, unit)
        hit_loose = hit_loose or hit_strict or loose(answers, [unit])
        if hit_strict:
            break
    return hit_loose, hit_strict


def _plain_line(text: str, mode: str) -> str | None:
    """The line typed in ``mode``: a gardener command becomes its plain-Aider equivalent
    (``None``: skipped) in the ``aider`` modes."""
    name = command_name(text)
    if mode in GARDENER_MODES or name not in PLAIN_AIDER_EQUIVALENT:
        return text
    return PLAIN_AIDER_EQUIVALENT[name]


def run_replay(
    replay: Replay, mode: str, *, vectors: bool = True, keep_output: bool = False
) -> ModeRun:
    """Replay ``replay`` in ``mode`` and return what was measured. Must run inside
    ``bench_environment()``."""
    import aider.commands as aider_commands
    import litellm

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    from aider.utils import GitTemporaryDirectory

    result = ModeRun(replay.name, mode, replay.meta["model"], int(replay.meta["max_input_tokens"]))
    start = time.perf_counter()
    clock = GardenerClock()
    out = _io.StringIO()
    cwd = os.getcwd()
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(GitTemporaryDirectory()))
        store_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-store-")))
        if not keep_output:
            stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(_mode_context(mode))
        stack.enter_context(_timed_gardener(clock))
        busy = stack.enter_context(busy_embedder(replay, mode, vectors))
        stub = StubLLM(litellm.completion, result.model, result.window)
        current: list[_Session] = []

        def start_session(resume: bool = False) -> _Session:
            session = _Session(replay, mode, root, store_dir / "store", vectors, resume)
            stub.summary_max_tokens = int(session.coder.main_model.max_chat_history_tokens)
            aider_commands.run_cmd = session.run_cmd
            current[:] = [session]
            return session

        stack.callback(lambda: current and current[0].close())
        stack.callback(setattr, litellm, "completion", litellm.completion)
        stack.callback(setattr, aider_commands, "run_cmd", aider_commands.run_cmd)
        litellm.completion = stub
        session = start_session()
        events = replay.events
        i, turn, phase = 0, 0, ""
        while i < len(events):
            event = events[i]
            kind = event["type"]
            i += 1
            if kind in ("add", "drop"):
                session.file_event(event)
                continue
            if kind == "session":
                resume = bool(event.get("resume", True))
                session.close()  # the process exits: the gardener does its exit work
                session = start_session(resume=resume and mode in GARDENER_MODES)
                result.sessions += 1
                phase = PHASE_RESUME if resume else PHASE_NEW_SESSION
                continue
            if kind == "probe":
                in_recall = in_recall_strict = None
                if mode in GARDENER_MODES:
                    in_recall, in_recall_strict = _recall_hit_both(
                        session.store(), event["question"], event["answers"]
                    )
                in_prompt, in_prompt_strict = _in_prompt_both(
                    event["answers"], session.next_prompt(stub), result
                )
                result.probes.append(
                    ProbeResult(
                        event["question"],
                        turn,
                        event["source_turn"],
                        in_prompt,
                        in_recall,
                        in_prompt_strict,
                        in_recall_strict,
                        kind=event.get("kind", ""),
                        phase=phase,
                    )
                )
                continue
            if kind not in TURN_EVENTS:
                continue  # an assistant reply outside a turn has no request to answer
            turn += 1
            replies = []
            while i < len(events) and events[i]["type"] == "assistant":
                replies.append(events[i]["content"])
                i += 1
            if kind == "run":
                text = f"/{event.get('via', 'run')} {event['command']}"
                session.scripted = (int(event.get("exit_code", 0)), event["output"])
            else:
                text = event["content"]
            name = command_name(text)
            if name == "soft-restart":
                phase = PHASE_SOFT_RESTART  # a probe's phase: the latest reset before it
            typed = _plain_line(text, mode)
            if typed is None or (name is not None and name not in ALLOWED_COMMANDS):
                result.skipped_commands += 1
                continue
            stub.turn, stub.queue = turn, replies
            clock.turn_ms = 0.0
            try:
                session.line(typed)
            except (Exception, SystemExit) as err:  # noqa: BLE001 - one turn, not the replay
                result.errors.append(f"turn {turn}: {type(err).__name__}: {err}")
            result.unused_replies += len(stub.queue)
            stub.queue = []
            result.gardener_ms.append(clock.turn_ms)
        session.close()
        result.turns = turn
        result.background_chunks = busy.chunks if busy is not None else 0
    os.chdir(cwd)
    result.requests = list(stub.requests)
    result.gardener_open_ms = list(clock.opens)
    result.wall_s = time.perf_counter() - start
    return result


def run_all(
    replays: list[Replay], modes: list[str], *, vectors: bool = True, progress: Any = None
) -> list[ModeRun]:
    runs = []
    with bench_environment():
        for replay in replays:
            for mode in modes:
                if progress is not None:
                    progress(f"{replay.name}: {mode}")
                runs.append(run_replay(replay, mode, vectors=vectors))
    return runs
