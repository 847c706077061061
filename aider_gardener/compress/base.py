"""What every class compressor shares: its signature, line clipping, and the safe runner.

A compressor is ``(text, opts) -> Compressed``. It may raise; ``run_compressor`` turns any
exception into head/tail truncation that says so, because a broken compressor must never lose the
session (the original is stored in full either way).
"""

from __future__ import annotations

import logging
import re
from typing import Callable

from .. import critical
from ..types import Compressed, CompressOptions

log = logging.getLogger(__name__)

Compressor = Callable[[str, CompressOptions], Compressed]

MAX_LINE_CHARS = 400
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def clip_line(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """Very long lines (minified JS, base64, one-line JSON) would defeat line-based compression.
    A line carrying critical facts (a FATAL line with its exception, a frame list) is cut only
    in its free text (``critical.shorten``): its codes, locations and frames all stay."""
    if len(line) <= limit:
        return line
    if len(line) <= critical.SCAN_MAX:
        short = critical.shorten(line, limit)
        if short is not None:
            return short
    head = limit * 3 // 4
    tail = limit - head
    return f"{line[:head]} …[+{len(line) - limit} chars]… {line[-tail:]}"


def head_tail(text: str, reason: str, head: int = 20, tail: int = 20) -> Compressed:
    lines = text.splitlines()
    n = len(lines)
    if n <= head + tail:
        kept = [clip_line(x) for x in lines]
    else:
        kept = [clip_line(x) for x in lines[:head]]
        kept.append(f"… {n - head - tail} lines omitted …")
        kept.extend(clip_line(x) for x in lines[-tail:])
    kept.append(f"[{reason}; kept head/tail of {n} lines]")
    return Compressed("\n".join(kept), {"lines": n, "lines_out": len(kept)}, fallback=True)


def run_compressor(name: str, fn: Compressor, text: str, opts: CompressOptions) -> Compressed:
    try:
        return fn(text, opts)
    except RecursionError:
        return head_tail(text, f"{name} compressor failed: input nested too deeply")
    except Exception as err:  # noqa: BLE001 - any compressor bug must degrade, not crash
        log.warning("gardener: %s compressor failed: %s: %s", name, type(err).__name__, err)
        return head_tail(text, f"{name} compressor failed ({type(err).__name__})")
