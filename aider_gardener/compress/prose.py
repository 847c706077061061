"""Prose (assistant explanations, docs, chat) shortened by extraction, never by rewording.

An assistant reply that has already been acted on is mostly connective tissue; what the model
still needs are the concrete statements: names, paths, numbers, commands. So the text is cut into
units (sentences of paragraphs, list items, table rows, quote lines) and kept in tiers: headings,
code and the first and last sentence of every paragraph (they frame it); then units carrying a
fact (identifier, path, number, URL, inline code) not kept yet; then the best of the rest by
TextRank (PageRank over a TF-IDF cosine graph of the units, with networkx) up to about 55% of the
tokens. Kept units stay verbatim, in order and in their markdown layout; a gap shows as ``…``.

Coding chat is so dense in names that keeping every sentence that has one keeps ~90% of it, so
fact-bearing units are kept only up to 60% of the tokens; past that a dropped unit's facts are
listed in its gap (``… [mentions: foo.py, run_tests]``). Every fact survives either way.

Re-compressing changes nothing: short texts and texts carrying the
``[prose: kept N of M sentences]`` marker are returned as they are.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..tokens import count_tokens
from ..types import Compressed, CompressOptions

MARKER_RE = re.compile(r"^\[prose: kept \d+ of \d+ sentences\]$", re.M)

TARGET_RATIO = 0.55
UPPER_RATIO = 0.6  # fact-bearing sentences beyond this are dropped, their facts listed instead
MIN_TOKENS = 60  # at or below this a text is already as short as it usefully gets
MIN_UNITS = 4  # three sentences or fewer: nothing worth ranking
MAX_GRAPH_UNITS = 3000  # beyond this, rank by similarity to the whole text (linear, no graph)
MAX_EDGE_DF = 150  # words in more units than this add edges everywhere and rank nothing
GAP = "…"

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_RULE = re.compile(r"^\s{0,3}(?:[-*_]\s*){3,}$|^\s{0,3}=+\s*$")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+")
_TABLE = re.compile(r"^\s*\|")
_TABLE_RULE = re.compile(r"^\s*\|?[\s:|-]*-{3,}[\s:|-]*$")
_QUOTE = re.compile(r"^\s{0,3}>")

_BOUNDARY = re.compile(r"[.!?]+[\"')\]*_]*\s+(?=[\"'(\[`*_#]*[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    "e.g i.e etc cf vs approx incl resp al fig figs no nos mr mrs ms dr prof st jr sr vol"
    " ca eq eqs sec ch pp p".split()
)
_ABBREV_IN_TEXT = re.compile(r"\b(?:e\.g|i\.e|cf|vs|etc|approx|incl)\.", re.I)
# Every alternative starts at a token boundary (\b or a lookbehind): a free leading [\w./-]*
# would rescan a megabyte-long "word" from every position.
_FACT = re.compile(
    r"`[^`\n]+`"  # inline code
    r"|(?:https?://|www\.)[^\s)>\]]+"  # URLs
    r"|(?<![\w.~/\\-])[\w.~\\-]*[/\\][\w./\\-]*\w(?::\d+)?"  # paths, path:line
    r"|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w+)+(?::\d+)?"  # Dotted.names, file.ext, file.ext:line
    r"|\b\w+\("  # calls: func() / func(arg)
    r"|\b[A-Za-z_]\w*_\w+"  # snake_case, CONSTANT_NAMES, __dunder__
    r"|\b[a-z]+[A-Z]\w*"  # camelCase
    r"|\b[A-Z][a-z0-9]+[A-Z]\w*"  # PascalCase with an inner capital
    r"|\b[A-Za-z]*\d(?:[\w.:,-]*\w)?"  # numbers, versions, codes (E0432, TS2339)
    r"|(?<![\w-])--[a-z][\w-]*"  # command-line flags
)
# The facts the whole pipeline guarantees (exceptions, error codes, file:line, failing tests):
# a unit carrying one is kept whatever the budget says.
_CRITICAL = re.compile(
    r"\b[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b"
    r"|\b(?:E\d{4}|TS\d{4,5}|CS\d{4})\b"
    r"|\.[A-Za-z]{1,5}[:(]\d"
    r"|\w::\w|^\s*(?:FAILED|ERROR)\b|--- FAIL",
    re.M,
)
_WORD = re.compile(r"[a-z][a-z0-9_']+")
_STOPWORDS = frozenset(
    """a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just let me more most my myself no nor not now of off on once only or other our ours ourselves
    out over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves i'll i've i'm it's
    that's let's don't can't won't we'll you'll""".split()
)


@dataclass
class _Unit:
    """One keepable piece: a sentence of a paragraph, or a whole list item / table row / quote."""

    kind: str  # "sentence", "line", "item", "row", "quote"
    text: str
    tokens: int = 0
    score: float = 0.0
    kept: bool = False
    mentions: list[str] = field(default_factory=list)  # facts shown in its gap if dropped


@dataclass
class _Block:
    """Markdown layout. ``fixed`` blocks (headings, code, blank lines) are copied verbatim."""

    kind: str  # "para", "lines" (a paragraph of separate lines), "list", "table", "quote", "fixed"
    lines: list[str]
    units: list[_Unit] = field(default_factory=list)


def compress_prose(text: str, opts: CompressOptions) -> Compressed:
    counts = {"chars": len(text)}
    if not text.strip() or MARKER_RE.search(text):
        return Compressed(text, counts)
    total = count_tokens(text, opts.model)
    if total <= MIN_TOKENS:
        return Compressed(text, counts)
    blocks = _blocks(text.splitlines())
    units = [u for b in blocks for u in b.units]
    counts["sentences"] = len(units)
    if len(units) < MIN_UNITS:
        return Compressed(text, counts)

    for u in units:
        u.tokens = count_tokens(u.text, opts.model)
    _rank(units)
    _choose(blocks, units, opts, total)
    kept = sum(u.kept for u in units)
    if kept == len(units):
        return Compressed(text, counts)
    out = _render(blocks) + f"\n[prose: kept {kept} of {len(units)} sentences]"
    if len(out) >= len(text) or count_tokens(out, opts.model) >= total:
        return Compressed(text, counts)
    counts["sentences_kept"] = kept
    return Compressed(out, counts)


# --- layout ----------------------------------------------------------------------------------


def _blocks(lines: list[str]) -> list[_Block]:
    """Paragraphs, lists, tables, quotes and verbatim lines, in order. Line-based on purpose:
    assistant markdown is loose (lists without blank lines, fences inside items)."""
    blocks: list[_Block] = []
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            end = i + 1
            while end < n and not lines[end].lstrip().startswith(fence.group(1)):
                end += 1
            blocks.append(_Block("fixed", lines[i : end + 1]))
            i = end + 1
            continue
        if not line.strip() or _HEADING.match(line) or _RULE.match(line):
            blocks.append(_Block("fixed", [line]))
            i += 1
            continue
        kind = _line_kind(line)
        start = i
        i += 1
        while i < n and _continues(kind, lines[i]):
            i += 1
        blocks.append(_Block(kind, lines[start:i]))
    for block in blocks:
        block.units = _units(block)
    return blocks


def _line_kind(line: str) -> str:
    if _ITEM.match(line):
        return "list"
    if _TABLE.match(line):
        return "table"
    if _QUOTE.match(line):
        return "quote"
    return "para"


def _continues(kind: str, line: str) -> bool:
    if not line.strip() or _FENCE.match(line) or _HEADING.match(line) or _RULE.match(line):
        return False
    if kind == "list":  # further items, or lazy continuation lines of the current one
        return not _TABLE.match(line) and not _QUOTE.match(line)
    return _line_kind(line) == kind


def _units(block: _Block) -> list[_Unit]:
    if block.kind == "fixed":
        return []
    if block.kind == "para":
        if _wrapped(block.lines):
            return [_Unit("sentence", s) for s in split_sentences("\n".join(block.lines))]
        block.kind = "lines"  # each line stands alone and keeps its indentation
        return [_Unit("line", line) for line in block.lines]
    if block.kind == "list":
        items: list[list[str]] = []
        for line in block.lines:
            if _ITEM.match(line) or not items:
                items.append([line])
            else:
                items[-1].append(line)
        return [_Unit("item", "\n".join(x)) for x in items]
    kind = "row" if block.kind == "table" else "quote"
    return [_Unit(kind, line) for line in block.lines]


def _wrapped(lines: list[str]) -> bool:
    """A paragraph whose lines are hard-wrapped prose (its sentences run across line ends), as
    opposed to a block of separate lines (log lines, key: value notes) where each line stands
    alone and line breaks must survive."""
    if len(lines) < 3:
        return True
    body = lines[:-1]
    running = sum(1 for x in body if len(x) >= 40 and re.search(r"[A-Za-z,]\s*$", x))
    return running >= 0.6 * len(body)


def split_sentences(text: str) -> list[str]:
    """Sentence ends are ``.!?`` followed by space and a capital or digit; abbreviations
    (``e.g.``), versions (``v0.86.2``), file names, URLs and decimals have no space after their
    dots, or are listed, so they do not end a sentence."""
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        word = text[max(start, m.start() - 24) : m.start()].rsplit(None, 1)[-1:] or [""]
        if word[0].lower().rstrip(".").lstrip("(\"'") in _ABBREVIATIONS:
            continue
        end = m.start() + len(m.group(0).rstrip())
        sentence = text[start:end].strip()
        if sentence:
            out.append(sentence)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


# --- choosing --------------------------------------------------------------------------------


def _facts(text: str) -> list[str]:
    """The names, paths, numbers, URLs and code spans of a text, in order, once each."""
    found: dict[str, None] = {}
    for m in _FACT.finditer(_ABBREV_IN_TEXT.sub(" ", text)):
        fact = m.group(0).strip("`").rstrip(".,:;(")
        if fact:
            found[fact] = None
    return list(found)


def _choose(blocks: list[_Block], units: list[_Unit], opts: CompressOptions, total: int) -> None:
    """Which units survive.

    1. Always: headings, code, the first and last sentence of each paragraph (they frame it),
       table headers, units naming a hot identifier or carrying a critical fact (exception,
       error code, file:line, failing test).
    2. Best-ranked first, every unit carrying a fact (name, path, number, URL, code) that no kept
       unit carries yet, while the kept tokens stay within ``UPPER_RATIO``. Past that, the unit is
       dropped and its new facts are listed in its gap, so every fact still survives verbatim;
       technical chat is so dense in names that keeping all such sentences keeps ~90% of it.
       A unit that only repeats facts already kept competes on rank like any other.
    3. The best-ranked of the rest, up to ``TARGET_RATIO``.
    """
    hot_words = [h for h in opts.hot if h]
    covered: set[str] = set()
    used = 0
    for block in blocks:
        if block.kind == "fixed":
            fixed = "\n".join(block.lines)
            covered.update(_facts(fixed))
            used += count_tokens(fixed, opts.model) if fixed.strip() else 0
            continue
        if block.kind in ("para", "lines"):
            block.units[0].kept = block.units[-1].kept = True
        if block.kind == "table":
            block.units[0].kept = True  # the header row names the columns
        for u in block.units:
            if block.kind == "table" and _TABLE_RULE.match(u.text):
                u.kept = True
            elif _CRITICAL.search(u.text):
                u.kept = True
            elif hot_words and any(h in u.text for h in hot_words):
                u.kept = True
    facts = {id(u): _facts(_ITEM.sub("", u.text, 1) if u.kind == "item" else u.text) for u in units}
    for u in units:
        if u.kept:
            covered.update(facts[id(u)])
            used += u.tokens
    ranked = sorted((u for u in units if not u.kept), key=lambda u: -u.score)
    upper = int(UPPER_RATIO * total)
    for u in ranked:
        new = [f for f in facts[id(u)] if f not in covered]
        if not new:
            continue
        if used + u.tokens <= upper:
            u.kept = True
            used += u.tokens
            covered.update(facts[id(u)])
        else:
            u.mentions = new
            used += sum(count_tokens(f, opts.model) + 1 for f in new)
            covered.update(new)
    budget = int(TARGET_RATIO * total)
    for u in ranked:
        if not u.kept and used + u.tokens <= budget:
            u.kept = True
            used += u.tokens
            u.mentions = []


def _rank(units: list[_Unit]) -> None:
    """TextRank: PageRank over units linked by TF-IDF cosine similarity."""
    bags = [_bag(u.text) for u in units]
    df: dict[str, int] = {}
    for bag in bags:
        for w in bag:
            df[w] = df.get(w, 0) + 1
    n = len(units)
    vectors = []
    for bag in bags:
        vec = {w: tf * math.log((1 + n) / (1 + df[w])) for w, tf in bag.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        vectors.append({w: v / norm for w, v in vec.items() if v > 0})
    if n > MAX_GRAPH_UNITS:
        scores = _centroid_scores(vectors)
    else:
        scores = _pagerank(vectors, df)
    for u, s in zip(units, scores):
        u.score = s


def _bag(text: str) -> dict[str, int]:
    bag: dict[str, int] = {}
    for w in _WORD.findall(text.lower()):
        if w not in _STOPWORDS:
            bag[w] = bag.get(w, 0) + 1
    return bag


def _pagerank(vectors: list[dict[str, float]], df: dict[str, int]) -> list[float]:
    import networkx as nx

    postings: dict[str, list[int]] = {}
    for i, vec in enumerate(vectors):
        for w in vec:
            if df[w] <= MAX_EDGE_DF:
                postings.setdefault(w, []).append(i)
    weights: dict[tuple[int, int], float] = {}
    for w, ids in postings.items():
        for a_pos, a in enumerate(ids):
            wa = vectors[a][w]
            for b in ids[a_pos + 1 :]:
                weights[(a, b)] = weights.get((a, b), 0.0) + wa * vectors[b][w]
    graph = nx.Graph()
    graph.add_nodes_from(range(len(vectors)))
    graph.add_weighted_edges_from((a, b, w) for (a, b), w in weights.items() if w > 0)
    if graph.number_of_edges() == 0:
        return [0.0] * len(vectors)
    try:
        ranks = nx.pagerank(graph, weight="weight", max_iter=200, tol=1e-6)
    except nx.PowerIterationFailedConvergence:
        ranks = nx.degree_centrality(graph)
    return [ranks[i] for i in range(len(vectors))]


def _centroid_scores(vectors: list[dict[str, float]]) -> list[float]:
    """For huge texts: similarity to the whole text's centroid, the fixed point TextRank tends
    towards on dense graphs, at linear cost."""
    centroid: dict[str, float] = {}
    for vec in vectors:
        for w, v in vec.items():
            centroid[w] = centroid.get(w, 0.0) + v
    return [sum(v * centroid[w] for w, v in vec.items()) for vec in vectors]


# --- output ----------------------------------------------------------------------------------


def _render(blocks: list[_Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if block.kind == "fixed" or all(u.kept for u in block.units):
            out.extend(block.lines)
        elif block.kind == "para":
            out.append(" ".join(_with_gaps(block.units)))
        elif block.kind == "lines":
            out.extend(_with_gaps(block.units, indent=True))
        else:
            out.extend(_with_gaps(block.units, indent=True))
    return "\n".join(_merge_gaps(out))


_GAP_LINE = re.compile(r"^(\s*)… ?(?:\[mentions: (.*)\])?$")


def _merge_gaps(lines: list[str]) -> list[str]:
    """Gaps separated only by blank lines (dropped items of a loose list) read as one gap."""
    out: list[str] = []
    last_gap = -1  # index in ``out`` of the latest gap line, while only blanks follow it
    for line in lines:
        m = _GAP_LINE.match(line)
        if m and last_gap >= 0:
            prev = _GAP_LINE.match(out[last_gap])
            mentions = [x for x in (prev.group(2), m.group(2)) if x]
            del out[last_gap + 1 :]
            out[last_gap] = (
                prev.group(1) + GAP + (f" [mentions: {', '.join(mentions)}]" if mentions else "")
            )
            continue
        out.append(line)
        if m:
            last_gap = len(out) - 1
        elif line.strip():
            last_gap = -1
    return out


def _with_gaps(units: list[_Unit], indent: bool = False) -> list[str]:
    """Kept units verbatim; each run of dropped ones becomes one ``…`` naming their facts."""
    parts: list[str] = []
    run: list[_Unit] = []
    for u in units + [None]:  # type: ignore[list-item]
        if u is not None and not u.kept:
            run.append(u)
            continue
        if run:
            pad = run[0].text[: len(run[0].text) - len(run[0].text.lstrip())] if indent else ""
            mentions = [f for r in run for f in r.mentions]
            parts.append(f"{pad}{GAP} [mentions: {', '.join(mentions)}]" if mentions else pad + GAP)
            run = []
        if u is not None:
            parts.append(u.text)
    return parts
