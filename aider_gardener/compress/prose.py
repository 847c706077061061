"""Prose (assistant explanations, docs, chat) shortened by extraction, never by rewording.

An assistant reply that has already been acted on is mostly connective tissue; what the model
still needs are the concrete statements: names, paths, numbers, commands. So the text is cut into
units (sentences, list items, table rows, quote lines) and the output keeps, verbatim and in
their markdown layout, headings, code, the first sentence of every paragraph and the last of one
of three or more. Every fact of a dropped unit that nothing kept carries is listed in its gap (``…
[mentions: foo.py, run_tests]``): coding chat is so dense in names that keeping every sentence
with one would keep most of it. Other units are added, those with a fact not kept yet first, then
by TextRank score per added token, until the output reaches ``TARGET_RATIO`` of the input. Model
reasoning (``<think>`` blocks) keeps only its first sentence and its facts. Re-compressing
changes nothing: texts carrying the ``[prose: kept N of M sentences]`` marker are returned as
they are.

Decision record: docs/decisions/015-prose-extraction.md
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field

from ..tokens import count_tokens
from ..types import Compressed, CompressOptions

MARKER_RE = re.compile(r"^\[prose: kept \d+ of \d+ sentences\]$", re.M)

TARGET_RATIO = 0.5
MIN_TOKENS = 60  # at or below this a text is already as short as it usefully gets
MIN_UNITS = 4  # three sentences or fewer: nothing worth ranking
MAX_GRAPH_UNITS = 3000  # beyond this, rank by similarity to the whole text (linear, no graph)
MAX_EDGE_DF = 150  # words in more units than this add edges everywhere and rank nothing
GAP = "…"
GAP_TOKENS = 4  # "…" with its line break or space, and "[mentions: ]" most gaps carry

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_RULE = re.compile(r"^\s{0,3}(?:[-*_]\s*){3,}$|^\s{0,3}=+\s*$")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+")
_TABLE = re.compile(r"^\s*\|")
# A table's rule row: only pipes, colons, dashes and spaces, with a run of three dashes. Checked
# as "only those characters" plus a substring test: the one-regex form
# (\s*\|?[\s:|-]*-{3,}[\s:|-]*$) backtracks cubically on a long dashed row that ends otherwise.
_TABLE_RULE_CHARS = re.compile(r"[\s:|-]*")
_QUOTE = re.compile(r"^\s{0,3}>")
# Model reasoning Aider records inside a reply, each tag alone on its line.
_REASONING_OPEN = re.compile(r"^\s*<(think|thinking|reasoning|thinking-content-[0-9a-f]+)>\s*$")
_REASONING_CLOSE = re.compile(r"^\s*</(think|thinking|reasoning|thinking-content-[0-9a-f]+)>\s*$")

# Starting only where a run of [.!?] starts: a match from inside the run is a match from its
# start, and trying every position of "....…" rescanned the rest of the run from each.
_BOUNDARY = re.compile(r"(?<![.!?])[.!?]+[\"')\]*_]*\s+(?=[\"'(\[`*_#]*[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    "e.g i.e etc cf vs approx incl resp al fig figs no nos mr mrs ms dr prof st jr sr vol"
    " ca eq eqs sec ch pp p".split()
)
_ABBREV_IN_TEXT = re.compile(r"\b(?:e\.g|i\.e|cf|vs|etc|approx|incl)\.", re.I)
_PUNCT_RUN = re.compile(r"(?<![./\\~-])[./\\~-]{64,}")
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
    scratch: bool = False  # part of a reasoning block: kept only when it carries a critical fact
    mentions: list[str] = field(default_factory=list)  # facts shown in its gap if dropped


@dataclass
class _Block:
    """Markdown layout. ``fixed`` blocks (headings, code, blank lines) are copied verbatim."""

    # "para", "lines" (a paragraph of separate lines), "list", "table", "quote", "reasoning"
    # (a model's thinking block, tags included), "fixed"
    kind: str
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
    closes: dict[str, list[int]] = {}  # reasoning tag name -> lines closing it, ascending
    for at, line in enumerate(lines):
        if "</" in line:
            closed = _REASONING_CLOSE.match(line)
            if closed:
                closes.setdefault(closed.group(1), []).append(at)
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        opened = _REASONING_OPEN.match(line)
        if opened:
            after = closes.get(opened.group(1), [])
            at = bisect.bisect_right(after, i)
            if at < len(after):
                end = after[at]
                blocks.append(_Block("reasoning", lines[i : end + 1]))
                i = end + 1
                continue
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
    if block.kind == "reasoning":  # the first sentence, then line by line
        units: list[_Unit] = []
        for line in block.lines[1:-1]:
            if units:
                units.append(_Unit("line", line))
            elif line.strip() and not _REASONING_OPEN.match(line):
                units.extend(_Unit("line", s) for s in split_sentences(line))
        return [u for u in units if u.text.strip()]
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


def _is_table_rule(text: str) -> bool:
    return "---" in text and _TABLE_RULE_CHARS.fullmatch(text) is not None


def _facts(text: str) -> list[str]:
    """The names, paths, numbers, URLs and code spans of a text, in order, once each.

    Runs of 64 or more path punctuation (./\\~-) are blanked first: _FACT's path alternative
    splits a token at each separator, and over a long run without a letter after it every split
    rescanned the run (a line of backslashes was quadratic). Such a run names nothing."""
    found: dict[str, None] = {}
    for m in _FACT.finditer(_PUNCT_RUN.sub(" ", _ABBREV_IN_TEXT.sub(" ", text))):
        fact = m.group(0).strip("`").rstrip(".,:;(")
        if fact:
            found[fact] = None
    return list(found)


def _choose(blocks: list[_Block], units: list[_Unit], opts: CompressOptions, total: int) -> None:
    """Which units survive: always headings, code, paragraph frames, table headers and units
    naming a hot identifier or carrying a critical fact; then, within ``TARGET_RATIO``, units
    with a fact not kept yet, then the rest, each tier by rank per token beyond the facts its
    gap would list anyway (a dropped unit's facts cost their tokens either way). Reasoning
    blocks take no part: scratch work."""
    hot_words = [h for h in opts.hot if h]
    fixed_facts: set[str] = set()
    used = count_tokens(f"\n[prose: kept {len(units)} of {len(units)} sentences]", opts.model)
    for block in blocks:
        if block.kind == "fixed":
            fixed = "\n".join(block.lines)
            fixed_facts.update(_facts(fixed))
            used += count_tokens(fixed, opts.model) if fixed.strip() else 0
            continue
        if block.kind in ("para", "lines", "reasoning") and block.units:
            block.units[0].kept = True
        if block.kind in ("para", "lines") and len(block.units) >= 3:
            block.units[-1].kept = True
        if block.kind == "reasoning":
            used += count_tokens(block.lines[0] + "\n" + block.lines[-1], opts.model)
        if block.kind == "table":
            block.units[0].kept = True  # the header row names the columns
        for u in block.units:
            u.scratch = block.kind == "reasoning"
            if block.kind == "table" and _is_table_rule(u.text):
                u.kept = True
            elif _CRITICAL.search(u.text):
                u.kept = True
            elif hot_words and any(h in u.text for h in hot_words):
                u.kept = True
    facts = {id(u): _facts(_ITEM.sub("", u.text, 1)) for u in units}
    covered = set(fixed_facts)
    for u in units:
        if u.kept:
            covered.update(facts[id(u)])
            used += u.tokens
    costs: dict[str, int] = {}

    def cost(fact: str) -> int:  # a listed fact costs its tokens and a separator
        if fact not in costs:
            costs[fact] = count_tokens(fact, opts.model) + 1
        return costs[fact]

    pending = {f for u in units if not u.kept for f in facts[id(u)]} - covered
    used += sum(cost(f) for f in pending)
    neighbours: dict[int, tuple[_Unit | None, _Unit | None]] = {}
    for block in blocks:
        for i, u in enumerate(block.units):
            before = block.units[i - 1] if i else None
            after = block.units[i + 1] if i + 1 < len(block.units) else None
            neighbours[id(u)] = (before, after)
            if not u.kept and (before is None or before.kept):
                used += GAP_TOKENS

    def extra(u: _Unit) -> int:
        """What keeping ``u`` adds: its tokens, less the facts it takes out of the gaps, and
        one gap more if it splits a run of dropped units, one less if it fills a gap."""
        open_sides = sum(1 for x in neighbours[id(u)] if x is not None and not x.kept)
        gaps = GAP_TOKENS * (open_sides - 1)
        return u.tokens + gaps - sum(cost(f) for f in facts[id(u)] if f in pending)

    budget = TARGET_RATIO * total
    candidates = [u for u in units if not u.kept and not u.scratch]
    candidates.sort(
        key=lambda u: (pending.isdisjoint(facts[id(u)]), -u.score * u.tokens / max(extra(u), 1))
    )
    for u in candidates:
        delta = extra(u)
        if delta <= 0 or used + delta <= budget:
            u.kept = True
            used += delta
            pending.difference_update(facts[id(u)])
    covered = fixed_facts | {f for u in units if u.kept for f in facts[id(u)]}
    for u in units:  # each fact listed once, in the first gap it falls in
        if not u.kept:
            u.mentions = [f for f in facts[id(u)] if f not in covered]
            covered.update(u.mentions)


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
    """networkx's ``pagerank`` (alpha 0.85, tol 1e-6, 200 iterations) on the undirected weighted
    graph, computed directly with numpy, because building the networkx graph and its scipy
    matrix was a large share of this compressor's time; the arithmetic below is networkx's own, in
    the same order (row sums by ``reduceat`` over sorted columns, ``x @ A`` accumulated row by
    row), so the scores are bit for bit the same and so is every summary."""
    import numpy as np

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
    edges = [(a, b, w) for (a, b), w in weights.items() if w > 0]
    n = len(vectors)
    if not edges:
        return [0.0] * n
    ends = np.array([(a, b) for a, b, _ in edges], dtype=np.intp)
    wts = np.array([w for _, _, w in edges], dtype=float)
    rows = np.concatenate([ends[:, 0], ends[:, 1]])
    cols = np.concatenate([ends[:, 1], ends[:, 0]])
    data = np.concatenate([wts, wts])
    order = np.lexsort((cols, rows))  # canonical CSR: by row, then column
    rows, cols, data = rows[order], cols[order], data[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    rowsum = np.zeros(n)
    nonempty = np.flatnonzero(np.diff(indptr))
    rowsum[nonempty] = np.add.reduceat(data, indptr[nonempty])
    rowsum[rowsum != 0] = 1.0 / rowsum[rowsum != 0]
    data = rowsum[rows] * data  # row-stochastic: what networkx's Q @ A computes
    alpha = 0.85
    x = np.repeat(1.0 / n, n)
    p = np.repeat(1.0 / n, n)
    is_dangling = np.where(rowsum == 0)[0]
    for _ in range(200):
        xlast = x
        xa = np.bincount(cols, weights=data * x[rows], minlength=n)  # x @ A, row by row
        x = alpha * (xa + sum(x[is_dangling]) * p) + (1 - alpha) * p
        err = np.absolute(x - xlast).sum()
        if err < n * 1e-6:
            return [float(v) for v in x]
    degree = np.diff(indptr)  # networkx's fallback when the iteration does not converge
    return [float(d) * (1.0 / (n - 1.0)) for d in degree]


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
        elif block.kind == "reasoning":
            out.extend([block.lines[0], *_with_gaps(block.units, indent=True), block.lines[-1]])
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
            assert prev is not None  # out[last_gap] is a gap line
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
