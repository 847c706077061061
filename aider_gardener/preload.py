"""Import the numeric stack once, in the calling thread, before the gardener starts threads.

Two threads importing numpy/scipy at the same moment can see a partially initialised module
("module 'numpy' has no attribute 'matrix'", "cannot import name 'NDArray' from partially
initialized module 'numpy._typing'"). The replay benchmark hit exactly that: the embedding worker
loading torch in its thread while the prose compressor imported networkx/scipy in the main one,
and Aider's own ``load_slow_imports`` thread imports numpy and networkx too. Importing them up
front, before any of those threads exist, removes the race; it costs well under a second once.

It does not run before Aider starts (that was most of the gardener's cost at start):
integration/startup.py runs it in a background thread once the prompt shows, and the
gardener's first command in the main thread calls it too, which waits for that import (the
lock) instead of racing it. Aider's own ``load_slow_imports`` thread (numpy, networkx) is
waited for first, so no two threads import the stack at once.
"""

from __future__ import annotations

import importlib
import threading

MODULES = ("numpy", "scipy.sparse", "networkx")

_done = False
_lock = threading.Lock()


def preload() -> None:
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        _wait_for_aider_imports()
        for name in MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a missing optional module is the caller's concern
                pass
        _done = True


def _wait_for_aider_imports(limit: float = 60.0) -> None:
    """Join Aider's ``load_slow_imports`` thread if it still runs (its name ends with the
    target's name since Python 3.10)."""
    me = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not me and thread.name.endswith("(load_slow_imports)"):
            thread.join(limit)
