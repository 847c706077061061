"""The ``aider-fixed`` mode: Aider 0.86.2 with its three summarizer bugs fixed at run time.

The comparison with ``aider`` would flatter the gardener if the baseline lost its summaries to
bugs, so this mode fixes them the way a patch to ``base_coder.py`` would:

* the discarded summary: ``summarize_end`` installs the summary only if ``done_messages`` still
  equals the list the thread started from, but in the edit flow ``move_back_cur_messages``
  appends the commit/edit notice right after starting it, so the summary is always thrown away.
  Fixed: the summary replaces the prefix it was made from, and later messages are kept.
* the history wipe: when every summarizer model fails, ``summarize_worker`` leaves
  ``summarized_done_messages`` empty and ``summarize_end`` then installs that empty list.
  Fixed: a failed summary leaves the history as it was.
* the non-daemon thread: the summarizer thread keeps the process alive at exit. Fixed: daemon.

The summarizer is answered by the runner's stub (a labelled stand-in), as in ``aider`` mode.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator


def summarize_start(self: Any) -> None:
    if not self.summarizer.too_big(self.done_messages):
        return
    self.summarize_end()
    self.summarizing_messages = list(self.done_messages)
    self.summarized_done_messages = None
    self.summarizer_thread = threading.Thread(target=self.summarize_worker, daemon=True)
    self.summarizer_thread.start()


def summarize_worker(self: Any) -> None:
    try:
        self.summarized_done_messages = self.summarizer.summarize(self.summarizing_messages)
    except ValueError as err:
        self.summarized_done_messages = None
        self.io.tool_warning(err.args[0])


def summarize_end(self: Any) -> None:
    if self.summarizer_thread is None:
        return
    self.summarizer_thread.join()
    self.summarizer_thread = None
    summary, source = self.summarized_done_messages, self.summarizing_messages
    self.summarizing_messages = None
    self.summarized_done_messages = []
    if not summary or not source:
        return  # the summarizer failed: keep the history rather than wipe it
    n = len(source)
    if self.done_messages[:n] == source:
        self.done_messages = list(summary) + self.done_messages[n:]


@contextlib.contextmanager
def fixed_summarizer() -> Iterator[None]:
    """Install the fixed methods on Aider's base ``Coder`` for the block, then restore them."""
    from aider.coders.base_coder import Coder

    names = ("summarize_start", "summarize_worker", "summarize_end")
    saved = {name: Coder.__dict__[name] for name in names}
    fixed = {
        "summarize_start": summarize_start,
        "summarize_worker": summarize_worker,
        "summarize_end": summarize_end,
    }
    for name in names:
        setattr(Coder, name, fixed[name])
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(Coder, name, fn)
