"""Which recalled entries a prompt gets: only those that bear on it.

Full-text recall ORs the prompt's words, so every prompt sharing one word with the store got its
best hits, however weak. A hit is injected only when its BM25 score (``Store.fts_search``) is high
on two scales that do not depend on the store's size:

* ``share``: the score per unit of the prompt's word weight (the sum of FTS5's idf over the terms
  searched for); about 1 when the entry holds every word once.
* ``evidence``: the score in units of a word only one entry holds (FTS5's idf at document
  frequency 1): a short prompt of common words can cover itself fully and still say nothing.

A hit needs both over their floors, or, matching the whole prompt (``FULL_SHARE``), less evidence.
Below ``MIN_ENTRIES`` entries FTS5's idf cannot tell rare from common: all hits are offered.
How the floors were chosen: docs/decisions/025-prompt-recall-floors.md
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from ..store.db import Store


log = logging.getLogger(__name__)

MIN_SHARE = 0.45
MIN_EVIDENCE = 2.0
# A hit that matches the whole prompt (share >= 1) needs less evidence: the prompt is then only
# as specific as its words are, and the entry is the best the store has for them.
FULL_SHARE = 1.0
FULL_EVIDENCE = 1.5
MIN_ENTRIES = 50
NO_IDF = 1e-6  # FTS5's idf for a word in half the rows or more
SCORED = 200  # full-text scores read per prompt (a candidate past them is not scored: dropped)
WORDS = 5  # of an entry, naming it in the line shown to the user
NAME_MAX = 40


@dataclass
class Scored:
    """A recalled hit with what decides whether it is injected (see the module docstring);
    ``share`` and ``evidence`` are None when the store is too small to measure them."""

    hit: Any
    bm25: float
    share: float | None
    evidence: float | None

    @property
    def relevant(self) -> bool:
        if self.share is None or self.evidence is None:
            return True
        if self.share >= FULL_SHARE and self.evidence >= FULL_EVIDENCE:
            return True
        return self.share >= MIN_SHARE and self.evidence >= MIN_EVIDENCE


def _idf(rows: int, holding: int) -> float:
    """FTS5's idf (``fts5Bm25GetData``)."""
    idf = math.log((rows - holding + 0.5) / (holding + 0.5)) if rows else 0.0
    return idf if idf > 0 else NO_IDF


def _weight(store: Store, prompt: str) -> tuple[float, int]:
    """The prompt's word weight (idf summed over the terms the store searches) and the rows of
    the full-text index. A CJK term no row holds weighs nothing: the character pairs of a run
    (``query.cjk_pairs``) include every pair that straddles two words, and the whole run is one
    token only where it is written just so; counted, they sank every Chinese prompt's share."""
    from ..store.query import CJK_RUN, query_terms

    terms = query_terms(prompt)

    def q(c: Any) -> tuple[float, int]:
        rows = c.execute("SELECT count(*) FROM entries_fts").fetchone()[0] or 0
        total = 0.0
        for term in terms:
            sql = "SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?"
            holding = c.execute(sql, (_quote(term),)).fetchone()[0] or 0
            if holding or not CJK_RUN.fullmatch(term):
                total += _idf(rows, holding)
        return total, rows

    return store.read(q)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def score(store: Store, prompt: str, hits: Iterable[Any]) -> list[Scored]:
    """Each hit with its scores, in the hits' order. Never raises: a store that cannot be read
    scores every hit 0, so nothing is injected rather than anything."""
    hits = list(hits)
    if not hits:
        return []
    try:
        weight, rows = _weight(store, prompt)
        bm25 = dict(store.fts_search(prompt, SCORED))
    except Exception as err:  # noqa: BLE001 - recall adds context; it must never cost the prompt
        log.warning("gardener: scoring recalled entries failed (%s)", err)
        return [Scored(h, 0.0, 0.0, 0.0) for h in hits]
    unique = _idf(rows, 1)
    out = []
    for h in hits:
        s = float(bm25.get(h.entry_id, 0.0))
        if rows < MIN_ENTRIES:
            out.append(Scored(h, s, None, None))
            continue
        out.append(Scored(h, s, s / weight if weight > 0 else 0.0, s / unique))
    return out


def relevant(store: Store, prompt: str, hits: Iterable[Any]) -> list[Any]:
    """The hits above both floors, in their order."""
    return [s.hit for s in score(store, prompt, hits) if s.relevant]


_MARKUP = re.compile(r"[`*#>|]+")


def name(entry: Any) -> str:
    """A few words naming a stored entry for a person: its file, its command, or its first
    words."""
    path = getattr(entry, "path", None)
    if path:
        parts = re.split(r"[\\/]+", str(path).rstrip("\\/"))
        return _clip("/".join(parts[-2:]))
    command = getattr(entry, "command", None)
    if command:
        return _clip(str(command))
    text = str(getattr(entry, "original", "") or getattr(entry, "text", "") or "")
    words = _MARKUP.sub(" ", text).split()
    shown = " ".join(words[:WORDS]) + (" …" if len(words) > WORDS else "")
    return _clip(f'"{shown}"')


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= NAME_MAX else text[: NAME_MAX - 1] + "…"


def added_line(store: Store, ids: list[str]) -> str | None:
    """The one line shown to the user saying what the prompt got: ``gardener: recalled 2
    entries: ab3… (portal.py), cd4… ("in the portal, …")``; None when it got nothing."""
    if not ids:
        return None
    try:
        entries = store.get_entries(list(ids))
    except Exception:  # noqa: BLE001 - the ids alone still say what was added
        entries = {}
    named = []
    for eid in ids:
        entry = entries.get(eid)
        named.append(f"{eid} ({name(entry)})" if entry is not None else eid)
    noun = "entry" if len(ids) == 1 else "entries"
    return f"gardener: recalled {len(ids)} {noun}: " + ", ".join(named)
