"""Near-duplicate entries collapse into one recall hit, so five slots show five different things.

A session repeats itself: the same failing test run after each attempt, the same "SEARCH block
failed to match" notice, the same file read twice. Their texts differ only in numbers, times or
a path, so recall ranked them side by side and they crowded out what was asked about. Two
entries are near-duplicates when their word sets (numbers and hex runs read as one word) overlap
by ``THRESHOLD`` (Jaccard) and their lengths are within ``LENGTH_RATIO``; the best-ranked one
stands for the group and lists the others. Design: docs/decisions/095-recall-by-meaning.md.
"""

from __future__ import annotations

import re
from typing import Iterable

THRESHOLD = 0.8
LENGTH_RATIO = 0.6
READ_CHARS = 4000  # of each original: enough to tell two logs apart, cheap for 50 candidates
_WORD = re.compile(r"[^\W\d_]+|\d+|[0-9a-f]{7,}", re.IGNORECASE)
_NUMBERISH = re.compile(r"^(?:\d+|[0-9a-f]{7,})$", re.IGNORECASE)


def signature(text: str) -> frozenset[str]:
    words = (w.lower() for w in _WORD.findall(text[:READ_CHARS]))
    return frozenset(
        "#" if _NUMBERISH.match(w) and any(c.isdigit() for c in w) else w for w in words
    )


def similar(a: frozenset[str], b: frozenset[str], len_a: int, len_b: int) -> bool:
    if not a or not b:
        return False
    if min(len_a, len_b) < LENGTH_RATIO * max(len_a, len_b):
        return False
    return len(a & b) >= THRESHOLD * len(a | b)


def collapse(
    ordered: Iterable[str], texts: dict[str, str], keep: int
) -> tuple[list[str], dict[str, list[str]]]:
    """The first ``keep`` ids of ``ordered`` that are not near-duplicates of an earlier kept
    one, and for each kept id the ids it stands for (in rank order). An id without a text is
    kept as it is."""
    kept: list[str] = []
    sigs: list[tuple[frozenset[str], int]] = []
    groups: dict[str, list[str]] = {}
    for eid in ordered:
        text = texts.get(eid)
        if text is None:
            if len(kept) < keep:
                kept.append(eid)
                sigs.append((frozenset(), 0))
            continue
        sig, size = signature(text), min(len(text), READ_CHARS)
        for i, (other, other_size) in enumerate(sigs):
            if similar(sig, other, size, other_size):
                groups.setdefault(kept[i], []).append(eid)
                break
        else:
            if len(kept) >= keep:
                continue  # only look further for copies of what is kept
            kept.append(eid)
            sigs.append((sig, size))
    return kept, groups
