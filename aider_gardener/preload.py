"""Import the numeric stack once, in the calling thread, before the gardener starts threads.

Two threads importing numpy/scipy at the same moment can see a partially initialised module
("module 'numpy' has no attribute 'matrix'", "cannot import name 'NDArray' from partially
initialized module 'numpy._typing'"). The replay benchmark hit exactly that: the embedding worker
loading torch in its thread while the prose compressor imported networkx/scipy in the main one,
and Aider's own ``load_slow_imports`` thread imports numpy and networkx too. Importing them up
front, before any of those threads exist, removes the race; it costs well under a second once.
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
        for name in MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a missing optional module is the caller's concern
                pass
        _done = True
