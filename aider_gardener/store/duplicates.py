"""Near-duplicate entries collapse into one recall hit, so five slots show five different things.

A session repeats itself: the same failing test run after each attempt, the same "SEARCH block
failed to match" notice, the same file read twice. Their texts differ only in numbers, times or
a path, so recall ranked them side by side and they crowded out what was asked about. Two
entries are near-duplicates when their word sets (numbers left out) overlap by ``THRESHOLD``
(Jaccard) and their lengths are within ``LENGTH_RATIO``; the best-ranked one
stands for the group and lists the others. Design: docs/decisions/095-recall-by-meaning.md.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable

THRESHOLD = 0.8
LENGTH_RATIO = 0.6
READ_CHARS = 1500  # of each original: enough to tell two outputs apart, cheap for 25 candidates
# A session's recalls meet the same entries again and again; a signature is a few kB, and
# reading it again was half of what per-turn recall does after its vector half (bench.probes).
SIGNATURES = 512
_WORD = re.compile(r"[^\W\d_]{2,}")  # numbers, times, ids and single letters do not count


def signature(text: str) -> frozenset[str]:
    return _signature(text[:READ_CHARS])


@functools.lru_cache(maxsize=SIGNATURES)
def _signature(head: str) -> frozenset[str]:
    return frozenset(_WORD.findall(head.lower()))


def similar(a: frozenset[str], b: frozenset[str], len_a: int, len_b: int) -> bool:
    if not a or not b or not _comparable(len_a, len_b):
        return False
    return len(a & b) >= THRESHOLD * len(a | b)


def _comparable(len_a: int, len_b: int) -> bool:
    return min(len_a, len_b) >= LENGTH_RATIO * max(len_a, len_b)


def collapse(
    ordered: Iterable[str], texts: dict[str, str], keep: int
) -> tuple[list[str], dict[str, list[str]]]:
    """The first ``keep`` ids of ``ordered`` that are not near-duplicates of an earlier kept
    one, and for each kept id the ids it stands for (in rank order). An id without a text is
    kept as it is."""
    kept: list[str] = []
    sigs: list[tuple[frozenset[str] | None, int]] = []  # computed when first compared
    groups: dict[str, list[str]] = {}
    for eid in ordered:
        text = texts.get(eid)
        if text is None:
            if len(kept) < keep:
                kept.append(eid)
                sigs.append((frozenset(), 0))
            continue
        size = len(text)  # the whole length: near-copies are about as long
        sig = None
        for i, (other, other_size) in enumerate(sigs):
            if not other_size or not _comparable(size, other_size):
                continue  # lengths apart: no need to read either text
            if other is None:
                other = signature(texts[kept[i]])
                sigs[i] = (other, other_size)
            sig = sig if sig is not None else signature(text)
            if similar(sig, other, size, other_size):
                groups.setdefault(kept[i], []).append(eid)
                break
        else:
            if len(kept) >= keep:
                continue  # only look further for copies of what is kept
            kept.append(eid)
            sigs.append((sig, size))
    return kept, groups
