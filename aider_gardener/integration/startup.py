"""What runs at ``aider-gardener``'s start, and when: the goal is to start as fast as Aider.

Nothing heavy happens before the prompt: at the first prompt a background thread imports the
numeric stack (numpy, scipy, networkx) and then starts the embedding model's load. The main
thread's first command waits for that import if it is still under way (``preload.preload``
serialises it), so no two threads import numpy at once. Doing either before or while Aider
started added 1-2 s to its start.

The start-up line is printed after Aider's banner (``show_announcements``, or the first prompt
for a coder made with ``return_coder``), not before it, where it read as part of the shell's
output; it fits one 80-column line. A first start on a machine, which exports the embedding
model once in the background (~1 minute of one core, up to 700 MB), says so in one more line.
Measurements: docs/decisions/094-start-and-exit.md.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..preload import preload
from ..store.db import resolve_location
from .session import GardenerSession

if TYPE_CHECKING:
    from .seams import CoderLike


WIDTH = 80  # the line must not wrap in a terminal of this width
DELAY = 0.3  # seconds after the first prompt is asked for before the background work starts
EXPORT_NOTE = "gardener: one-time embedding model export in the background (~1 min, ~700 MB)"

_started = False
_lock = threading.Lock()


def startup_line(session: GardenerSession, coder: CoderLike) -> str:
    """E.g. ``gardener: rag mode, history budget 8.0k tokens, store new, semantic recall``:
    the mode, the history size above which it evicts, how many originals the store holds, and
    how recall works, shortened until it fits ``WIDTH`` columns."""
    from . import status

    cfg = session.config
    root = getattr(coder, "root", None)
    _, path = resolve_location(cfg.store, root)
    count = status.entry_count(path)
    size = "new" if count is None else f"{count:,} entr{'y' if count == 1 else 'ies'}"
    shown = status.shown_path(path, root)
    where = "" if shown == ".aider.gardener/store.sqlite" else f" in {shown}"
    try:
        budget = status.fmt_k(session.budget(coder))
    except Exception:  # noqa: BLE001 - a coder without a model: say nothing about it
        budget = None
    if not cfg.vectors:
        recall = ["full-text recall only (--no-gardener-vectors)", "full-text recall"]
    elif cfg.chroma_url:
        recall = [f"semantic recall via {cfg.chroma_url}", "semantic recall (server)"]
    else:
        recall = _model_recall(path)
    tries = []
    for rec in recall:
        for mode_word, budget_word, unit in LONG_TO_SHORT:
            parts = [f"{cfg.mode}{mode_word}"]
            if budget:
                parts.append(f"{budget_word}{budget}{unit}")
            tries.append(parts + [f"store {size}{where}", rec])
            tries.append(parts + [f"store {size}", rec])
    for parts in tries:
        line = "gardener: " + ", ".join(parts)
        if len(line) < WIDTH:
            return line
    line = "gardener: " + ", ".join(tries[-1])
    return line[: WIDTH - 2] + "…"


LONG_TO_SHORT = (
    (" mode", "history budget ", " tokens"),
    ("", "budget ", " tokens"),
    ("", "budget ", ""),
)


def _model_recall(path: Path) -> list[str]:
    """How semantic recall is named, longest first: the model only when it is not the default,
    and a switch of model (the store re-indexes in the background) said as such."""
    from ..store import model_choice

    key = model_choice.resolve(path.parent)
    before = model_choice.recorded(path.parent)
    name = model_choice.display_name(key)
    if before is not None and before != key:
        return [f"semantic recall with {name}, re-indexing", f"re-indexing for {name}"]
    if key == model_choice.DEFAULT:
        return ["semantic recall (model loading)", "semantic recall"]
    return [f"semantic recall with {name} (model loading)", f"recall with {name}"]


def export_note(session: GardenerSession, coder: CoderLike) -> str | None:
    """``EXPORT_NOTE`` when this start will export the embedding model (vectors on, ONNX, no
    exported model in the cache yet), else None."""
    if not session.config.vectors or session.config.chroma_url:
        return None
    if os.environ.get("GARDENER_EMBED_BACKEND", "auto").lower() == "torch":
        return None
    from ..store import embeddings, model_choice

    folder, _ = resolve_location(session.config.store, getattr(coder, "root", None))
    if model_choice.resolve(Path(folder)) != model_choice.DEFAULT:
        return None  # multilingual-e5 ships its own weights: nothing to export
    cache = embeddings.user_model_cache() or Path(folder) / embeddings.CACHE_SUBDIR
    if embeddings._mapped_ready(cache / embeddings.mapped_filename()):
        return None
    return EXPORT_NOTE


def after_first_prompt(session: GardenerSession, coder: CoderLike) -> None:
    """Start the background work once per process: the numeric stack, then the model."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
    root = getattr(coder, "root", None)
    history = getattr(getattr(coder, "io", None), "input_history_file", None)
    thread = threading.Thread(
        target=_background, args=(session, root, history), name="gardener-start", daemon=True
    )
    thread.start()


def _background(session: GardenerSession, root: str | None, history: str | None = None) -> None:
    time.sleep(DELAY)  # the prompt first
    preload()
    if session.config.vectors:
        session.attempt("preload", _preload_model, session, root, history)


def _preload_model(session: GardenerSession, root: str | None, history: str | None = None) -> bool:
    """Start loading the embedding model (the first ``/recall`` paid for the load when it began
    at the first message), after reading the project's language from Aider's input history
    (``store/language.py``): the model to load depends on it."""
    from ..store import embeddings, language

    folder, _ = resolve_location(session.config.store, root)
    if Path(folder).is_dir():
        language.from_input_history(history, folder)
    return embeddings.preload(folder)


def _reset_for_tests() -> None:
    global _started
    _started = False
