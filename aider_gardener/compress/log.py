"""Log compressor: keep what a reader acts on, count what merely repeats.

A log is mostly the same few line templates with different numbers, ids and timestamps, around a
few lines that matter: errors, warnings, failing tests, references into the project's code. So
every distinct important line is kept, in order (repeats that differ only in timestamps, ids or
addresses collapse to ``[×N]``; small numbers stay, since ``assert 1 == 0`` is the fact); normal
lines fold into ``[×N] template`` groups by digit skeleton (a cheap form of the Drain log parser),
kept most-frequent first within a character budget; noise a test-runner parser recognised is
omitted. One summary line closes the output, and a final check brings back every own
``path:line``, error code and exception name the budgets cut. This runs on every command output,
so the whole text is masked at once (``str.translate``, literal prefilters) and per-line work is
a few dictionary operations.

Decision record: docs/decisions/010-log-compression.md
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from itertools import accumulate

from .. import critical as shared
from ..types import Compressed, CompressOptions
from . import paths, testrun
from .base import clip_line
from .diagnostics import group_diagnostics

HEAD = 3
TAIL = 3
_MAX_WILDCARD_TOKENS = 48
_SAMPLE = 48

# --------------------------------------------------------------------------- severity

# Lowercase literals one of which every error/warning line contains; found with str.find over the
# whole text, which is far faster than any regex alternation run on every line.
_PREFILTER = (
    "rror",
    "err!",
    "fatal",
    "critical",
    "severe",
    "panic",
    "fail",
    "xception",
    "traceback",
    "warn",
    "✕",
    "✖",
    "<<<",
    "\ne ",
    "no such file",
    "command not found",
    "permission denied",
    "segmentation fault",
    "core dumped",
    "undefined reference",
)
# Verified at each hit by _accept: a marker must start a word, except exception/warning class
# names (TypeError, DeprecationWarning) which end one. Leaving the word boundary to Python makes
# these regexes start with literals, which the regex engine scans for several times faster.
_ERROR_HINT = re.compile(
    r"(?:ERROR|ERR!|FATAL|CRITICAL|SEVERE|PANIC|FAILED|FAILURE|FAIL)\b"
    r"|(?:[Ee]rror|[Ff]atal|panic)(?:\[[\w-]+\])?:"
    r"|error\s+(?:TS|CS|C|LNK)\d"
    r"|(?:Error|Exception)\b"
    r"|Traceback \(most recent call last\)"
    r"|panicked at\b"
    r"|<<< (?:FAILURE|ERROR)!"
    r"|No such file or directory|command not found|Permission denied|Segmentation fault"
    r"|core dumped|undefined reference to"
)
_ERROR_NEEDLES = (
    "ERR",
    "FATAL",
    "CRITICAL",
    "SEVERE",
    "PANIC",
    "FAIL",
    "rror",
    "atal",
    "panic",
    "xception",
    "Traceback",
    "<<<",
    "No such file",
    "not found",
    "Permission denied",
    "Segmentation fault",
    "core dumped",
    "undefined reference",
)
_WARN_HINT = re.compile(r"WARN(?:ING)?\b|[Ww]arning(?:\[[\w-]+\])?:|Warning\b|\(node:\d+\) \[DEP")
# Where a log line's level word starts; every number before it (date, time, pid, thread) varies.
_LEVEL_WORDS = (
    "ERROR",
    "WARN",
    "INFO",
    "DEBUG",
    "TRACE",
    "FATAL",
    "CRITICAL",
    "SEVERE",
    "NOTICE",
    "error:",
    "Error:",
    "warning:",
    "Warning:",
    "fatal:",
    "error[",
    "warning[",
)
_SHARED_NEEDLES = (
    "  at ",
    "\tat ",
    "called by",
    "Caused by",
    " will be ",
    " must be ",
    "(clippy::",
    "[-W",
    "Plan: ",
    "Apply complete!",
)
_EXC_TAIL = re.compile(r"(?:Error|Exception)\b")
_CODE_RE = re.compile(r"[A-Z]{1,3}\d{3,5}\b")

# --------------------------------------------------------------------------- facts

_EXT = (
    r"(?:py|pyx|pyi|ipynb|js|jsx|mjs|cjs|tsx|ts|mts|cts|vue|svelte|go|rs|java|kts|kt|scala|"
    r"groovy|gradle|cpp|cxx|cc|c|hpp|hxx|hh|h|mm|m|swift|rb|php|cs|fs|vb|lua|pl|pm|sh|bash|"
    r"zsh|ps1|sql|exs|ex|erl|hrl|hs|mli|ml|clj|dart|jl|zig|nim|asm|s|S|y|l|feature|proto|tf|"
    r"yaml|yml|toml|json|xml|html|css|scss|less|cmake|mk|rst|md|cfg|ini|r|R)"
)
_REF_ANCHOR = re.compile(r"\." + _EXT + r"(?::(\d+)(?::\d+)?|\((\d+)(?:,\s*\d+)?\))")
_EXT_SET = frozenset(_EXT[3:-1].split("|"))
# every line _REF_ANCHOR matches, and a few more (_refs finds nothing there): a literal dot then
# one class, where the alternation of 90 extensions is tried at every dot of a build log
_REF_HINT = re.compile(r"\.[A-Za-z0-9]{1,7}[:(]\d")
_PYFILE = re.compile(r'File "([^"]+)", line (\d+)')
_PATH_RUN = re.compile(r"[^\s\"'()\[\]<>,;=|`:]*")  # matched on the reversed line, from the dot
_LIB_MARKERS = (
    "site-packages",
    "dist-packages",
    "node_modules",
    "/lib/python",
    "/Lib/",
    ".cargo/registry",
    ".rustup/",
    "/go/pkg/mod/",
    "<frozen",
    "Program Files",
    "/nix/store/",
    ".m2/repository",
    ".gradle/caches",
    ".pyenv/versions",
    "Python.framework",
)
_LIB_PREFIXES = ("/rustc/", "internal/", "node:")
_NODE_CORE = frozenset(
    "events readline net fs module timers stream child_process http https tls zlib domain util "
    "vm bootstrap_node node".split()
)
_JAVA_FRAME = re.compile(r"^\s*at ([\w$.]+)\(")
_JAVA_LIB = re.compile(
    r"^(?:java|javax|jdk|sun|com\.sun|org\.junit|junit|org\.apache|org\.springframework|"
    r"io\.cucumber|org\.gradle|kotlin|kotlinx|scala|org\.test\w*|org\.mockito|net\.bytebuddy|"
    r"com\.google|org\.hibernate|reactor|io\.netty)\."
)

# --------------------------------------------------------------------------- masking

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_DIGITS_TO_ZERO = str.maketrans("123456789", "000000000")
_ZERO_RUN = re.compile(r"0{2,}")
_DIGITS_TO_ZERO_BYTES = bytes.maketrans(b"123456789", b"000000000")
_ZERO_RUN_BYTES = re.compile(b"0{2,}")
_DIGITS = re.compile(r"(\d+)")
_TOKEN = re.compile(r"\S+")
_TS = (
    r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:[T ]|\s-\s)\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?"
    r"(?:Z|[+-]\d{2}:?\d{2})?"
    r"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} \d{2}:\d{2}:\d{2}"
    r"|^\d{6} \d{6}\b"
    r"|\b\d{1,2}\. ?\d{1,2}\. ?\d{4},? \d{1,2}:\d{2}:\d{2}"
    r"|\b\d{4}-\d{2}-\d{2}\b"
    r"|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
)
_TS_FIND = re.compile(_TS)
# Placeholder runs that read better as one typed placeholder. A part may stay literal (the hour
# of ``[21:<n>:<n>]``, the ``10`` of ``10.<n>.<n>.<n>``) as long as one part varies.
_N = r"(?:<n>|\d+)"
_PRETTY = [
    (re.compile(rf"(?<![\w.<>]){_N}(?:\.{_N}){{3}}(?::{_N})?(?![\w.<>])"), "<ip>"),
    (re.compile(rf"{_N}([-/.]){_N}\1{_N}(?:[T ]|\s-\s){_N}:{_N}:{_N}(?:[.,]{_N})?"), "<ts>"),
    (re.compile(rf"(?<![\w:<>]){_N}:{_N}:{_N}(?:[.,]{_N})?(?![\w:<>])"), "<time>"),
    (re.compile(rf"(?<![\w<>]){_N}([-/]){_N}\1{_N}(?![\w<>])"), "<date>"),
    (re.compile(r"<n>(?:[.,]<n>)+"), "<n>"),
]

_HEX0X = re.compile(r"0x[0-9a-fA-F]+")
_PROGRESS_PCT = re.compile(r"\s*\[\s*\d{1,3}%\]\s*$")  # with its padding, which only aligns it
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b")
_SUMMARY_RE = re.compile(r"^\[log: [\d,]+ lines, [\d,]+ errors, [\d,]+ warnings.*\]$")
_OMITTED = "… {:,} lines omitted …"
_CONTEXT_FLOOR = 4_000
_MIN_MARKER = 10  # smaller gaps pass silently: a marker per short gap costs more than it tells


@dataclass
class _Group:
    first: int
    key: str
    members: list[int] = field(default_factory=list)
    priority: int = 2  # important groups: 0 error or runner-kept, 1 warning, 2 other facts
    varies: bool = False
    wild: int | None = None
    merged: bool = False
    forced: bool = False  # holds a head or tail line: first in the context budget
    edge: bool = False  # holds the very first or last line: shown whatever the budget

    @property
    def count(self) -> int:
        return len(self.members)


def compress_log(text: str, opts: CompressOptions) -> Compressed:
    if not text.strip():
        return Compressed(text, {"lines": text.count("\n")})
    if _already_compressed(text):
        return Compressed(text, {"lines": text.count("\n") + 1, "already_compressed": 1})
    tree = paths.compress_paths(text, opts)  # a path list's names are never folded
    if tree is not None:
        return tree

    norm, lines = testrun.split_output(text)
    run: testrun.TestRun | None
    if opts.test_runner in testrun.RUNNERS:  # one segment of a run the pipeline parsed whole
        run = testrun.parse_test_run(lines, opts.test_runner)
    else:
        run = testrun.analyze(norm, lines, opts.source.command)
    return _Compressor(norm, lines, run, opts).compress(text)


def _already_compressed(text: str) -> bool:
    """Our own output ends with the summary line (maybe followed by the pipeline's handle)."""
    tail = text.rstrip().rsplit("\n", 2)[-2:]
    return any(_SUMMARY_RE.match(line.strip()) or paths.MARKER_RE.match(line) for line in tail)


class _Compressor:
    def __init__(self, norm: str, lines: list[str], run: testrun.TestRun | None, opts):
        self.norm = norm
        self.lines = lines
        self.run = run
        self.opts = opts
        self.own_cache: dict[str, bool] = {}
        self.low = norm.lower()
        if len(self.low) != len(norm):  # a few non-ASCII capitals lowercase to two characters
            self.low = norm.translate(_ASCII_LOWER)
        self.starts = list(accumulate((len(x) + 1 for x in lines), initial=0))
        self.root = _norm_path(opts.project_root) if opts.project_root else None
        self.hot = (
            re.compile("|".join(re.escape(h) for h in sorted(opts.hot, key=len, reverse=True)))
            if opts.hot
            else None
        )

    # ------------------------------------------------------------------ scan

    def _line_hits(self, needles, lower: bool) -> set[int]:
        """Indexes of lines containing any needle: one C-speed ``find`` scan per needle, jumping
        to the next line after each hit."""
        text = self.low if lower else self.norm
        starts = self.starts
        last = len(self.lines) - 1
        hits: set[int] = set()
        for needle in needles:
            shift = 1 if needle[0] == "\n" else 0  # the hit is on the line after the newline
            pos = text.find(needle)
            while pos >= 0:
                i = bisect.bisect_right(starts, pos + shift) - 1
                if i > last:
                    break
                hits.add(i)
                pos = text.find(needle, starts[i + 1])
        return hits

    def _severities(self) -> list[int]:
        sev = [0] * len(self.lines)
        hits = self._line_hits(_PREFILTER, lower=True)
        if self.lines and self.lines[0][:2] in ("E ", "E\t"):
            hits.add(0)
        for i in hits:
            sev[i] = _severity(self.lines[i])
        return sev

    def _facts(self, sev: list[int], hide: set[int]) -> dict[int, tuple[str, ...]]:
        """Per line, the facts that must survive: own ``path:line`` refs, and on error/warning
        lines their error codes and exception names. Lines a runner parser hides (source
        listings, repeated progress lines) state no facts of their own."""
        facts: dict[int, tuple[str, ...]] = {}
        candidates = {
            bisect.bisect_right(self.starts, m.start()) - 1 for m in _REF_HINT.finditer(self.norm)
        }
        candidates |= self._line_hits(('File "',), lower=False)
        for i in candidates:
            if 0 <= i < len(self.lines) and i not in hide:
                found = self._own_refs(self.lines[i])
                if found:
                    facts[i] = found
        for i, s in enumerate(sev):
            if s and i not in hide:
                line = self.lines[i]
                extra = _codes(line) + _exc_names(line)
                if extra:
                    facts[i] = facts.get(i, ()) + extra
        self.shared_only = set()
        for i, extra in self._shared_facts().items():
            if i not in hide:
                if i not in facts and not sev[i]:
                    self.shared_only.add(i)
                facts[i] = tuple(dict.fromkeys(facts.get(i, ()) + extra))
        return facts

    def _shared_facts(self) -> dict[int, tuple[str, ...]]:
        """Lines carrying a fact of the shared definition (``aider_gardener/critical.py``) the
        rules above do not see: frames of any origin (library ones too, ``called by`` lists),
        npm/tool codes on non-error lines (``52 error code E403``), terraform actions. Such a
        line is important, so it is never folded into a template or an omitted block."""
        found: dict[int, tuple[str, ...]] = {}
        starts = self.starts
        cand = self._line_hits(_SHARED_NEEDLES, lower=False)
        m: re.Match[str] | None
        for m in shared.code_matches(self.norm) + tuple(shared._ERRNO.finditer(self.norm)):
            cand.add(bisect.bisect_right(starts, m.start()) - 1)
        cand.update(bisect.bisect_right(starts, r[0]) - 1 for r in shared.ref_lines(self.norm))
        # kubectl's pods that are not fine: facts of table rows with no marker (eslint's rule
        # ids are not made important here: 2,800 distinct problem lines would all be kept; the
        # pipeline's net brings back the one line of a rule the templates hid)
        for pod in shared.pods(self.norm):
            name = pod.rsplit(" ", 1)[0]
            pos = self.norm.find(name)
            if pos >= 0:
                i = bisect.bisect_right(starts, pos) - 1
                found[i] = found.get(i, ()) + (name,)
        for i in cand:
            if not 0 <= i < len(self.lines):
                continue
            line = self.lines[i]
            got = shared.line_facts(line, messages=False) if len(line) <= shared.SCAN_MAX else []
            m = shared.TF_ACTION.match(line) if " be " in line else None
            if m:
                got.append(f"{m.group(1)} {m.group(2)}")
            m = shared.TF_TOTALS.match(line) if ("Plan:" in line or "Apply c" in line) else None
            if m:
                got.append(shared.tf_total(m))
            if got:
                found[i] = found.get(i, ()) + tuple(got)
        return found

    def _own_refs(self, line: str) -> tuple[str, ...]:
        frame = _JAVA_FRAME.match(line)
        if frame and _JAVA_LIB.match(frame.group(1)):
            return ()
        out = [ref for path, ref in _refs(line) if self._is_own(path)]
        return tuple(out)

    def _is_own(self, path: str) -> bool:
        own = self.own_cache.get(path)
        if own is None:
            own = self.own_cache[path] = _is_own_path(path, self.root)
        return own

    # ------------------------------------------------------------------ group

    def compress(self, original: str) -> Compressed:
        lines, run = self.lines, self.run
        n = len(lines)
        keep = run.keep if run else set()
        drop = run.drop if run else set()
        hide = run.hide if run else set()
        grouped, replaced = group_diagnostics(lines)
        if replaced:  # diagnostics grouped by file, code and message: every location kept
            hide = hide | replaced
        sev = self._severities()
        facts = self._facts(sev, hide)
        keys = _digit_keys(self.norm, n)
        hot = self.hot
        names_test = _failing_ids_pattern(run)

        def visible(i: int) -> bool:
            if not lines[i].strip() or i in hide:
                return False
            return not (i in drop and not (sev[i] or i in facts or i in keep))

        ends, edges = _pick_ends(n, visible)
        omitted: list[tuple[int, int]] = []  # (position, number of lines)
        groups: dict[str, _Group] = {}
        igroups: dict[str, _Group] = {}
        shown: list[tuple[int, str]] = list(grouped)
        g: _Group | None
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            s = sev[i]
            important = bool(s or i in facts or i in keep)
            if hot is not None and hot.search(line):
                g = igroups.setdefault("=" + line, _Group(i, "=" + line))
                g.members.append(i)
                g.priority = 0
                continue
            if i in replaced:
                continue
            if i in hide or (not important and i in drop):
                omitted.append((i, 1))
                continue
            if important:
                # a line naming a failing test is that test's: masking ``[case3]`` or the
                # ``test_7`` of its id (digits before "Error:" look like a log prefix) would
                # merge different tests into one line
                exact = names_test is not None and i in keep and names_test.search(line)
                if i in self.shared_only and i not in keep:
                    # only frames/codes make it important: fold by template like a context line,
                    # listing every distinct fact of the members (``_render_important``)
                    key = "\x01" + keys[i]
                else:
                    key = "=" + line if exact else _light(line)
                g = igroups.get(key)
                if g is None:
                    prio = 0 if (s == 2 or i in keep or key[0] == "\x01") else (1 if s == 1 else 2)
                    g = igroups[key] = _Group(i, key, priority=prio)
                elif not g.varies and line != lines[g.first]:
                    g.varies = True
                g.members.append(i)
            else:
                key = keys[i]
                g = groups.get(key)
                if g is None:
                    g = groups[key] = _Group(i, key)
                g.members.append(i)
            if i in ends:  # head and tail lines: their groups are shown first
                g.forced = True
                g.edge = g.edge or i in edges

        normal = _merge_variants(list(groups.values()))
        budget_n, budget_i, budget_all = _budgets(len(self.norm))
        used_i = 0
        hidden_important = 0

        for g in sorted(igroups.values(), key=lambda g: (not g.forced, g.priority, g.first)):
            text = self._render_important(g, facts)
            if budget_i - len(text) < 0 and g.priority > 0 and not g.forced:
                omitted.append((g.first, g.count))
                hidden_important += g.count
                continue
            budget_i -= len(text) + 1
            used_i += len(text) + 1
            shown.append((g.first, text))

        # context lines get what the important ones left of the overall budget, within limits
        floor = min(budget_n, _CONTEXT_FLOOR, int(0.02 * len(self.norm)))
        budget_n = min(budget_n, max(budget_all - used_i, floor))
        for g in sorted(normal, key=_context_rank):
            if budget_n <= 0 and not g.edge:
                omitted.append((g.first, g.count))
                continue
            text = self._render_normal(g)
            if len(text) + 1 > budget_n and not g.edge:
                omitted.append((g.first, g.count))
                continue
            budget_n -= len(text) + 1
            shown.append((g.first, text))

        body = _assemble(shown, omitted)
        extra = self._missing_facts(body, facts, shown, omitted)
        if extra:
            shown.extend(extra)
            body = _assemble(shown, omitted)

        errors = sum(1 for i, s in enumerate(sev) if s == 2 and i not in hide)
        warnings = sum(1 for i, s in enumerate(sev) if s == 1 and i not in hide)
        summary = f"[log: {n:,} lines, {errors:,} errors, {warnings:,} warnings"
        # a slice of a test run: the pipeline states the run's counts and timing once, for the
        # whole output; per-slice counts would contradict it ("no counts found")
        whole_run_elsewhere = self.opts.test_runner is not None
        span = None if whole_run_elsewhere else _timespan(lines)
        if span:
            summary += f", timespan {span[0]}..{span[1]}"
        if hidden_important:
            summary += f", {hidden_important:,} error/warning lines over budget not shown"
        if run and (run.counts or run.failures or run.codes) and not whole_run_elsewhere:
            summary += " | " + run.summary()
            shown_text = "\n".join(body)
            missing_ids = [t for t in run.failed_ids() if t not in shown_text]
            if missing_ids:
                body.append("failing (not shown above): " + ", ".join(missing_ids))
        body.append(summary + "]")
        out = "\n".join(body)

        counts = {
            "lines": n,
            "lines_out": len(body),
            "errors": errors,
            "warnings": warnings,
            "templates": len(normal),
            "omitted_lines": sum(c for _, c in omitted),
        }
        if run:
            counts["failed_tests"] = len(run.failed_ids())
            for k, v in run.counts.items():
                counts[f"tests_{k}"] = v
        if len(out) >= len(original):
            counts["lines_out"] = n
            return Compressed(original, counts)
        return Compressed(out, counts)

    # ------------------------------------------------------------------ render

    def _render_important(self, g: _Group, facts: dict[int, tuple[str, ...]]) -> str:
        if g.key[0] == "\x01" and g.count > 1:
            return self._render_fact_template(g, facts)
        text = self.lines[g.first]
        if g.varies:  # the lines differ in masked parts only: show the masked form
            text = _prettify(g.key) if "<n>" in g.key else g.key
        text = _clip_keeping(text, facts.get(g.first, ()))
        return f"[×{g.count}] {text}" if g.count > 1 else text

    def _render_fact_template(self, g: _Group, facts: dict[int, tuple[str, ...]]) -> str:
        """Lines alike but for numbers whose facts are frames or codes (25 ``Destroying surface
        … called by <frames>``): their template once, then every distinct fact of all members,
        so no frame is lost and none is repeated."""
        template = _digit_template(
            [self.lines[i] for i in g.members[:_SAMPLE]] + [self.lines[g.members[-1]]]
        )
        vals: dict[str, None] = {}
        for i in g.members:
            vals.update(dict.fromkeys(facts.get(i, ())))
        head = _clip_free(template)
        shown = [v for v in vals if v not in head]
        return f"[×{g.count}] {head}" + (f" [facts: {' '.join(shown)}]" if shown else "")

    def _render_normal(self, g: _Group) -> str:
        if g.count == 1:
            return clip_line(self.lines[g.first])
        members = g.members
        if len(members) > _SAMPLE:
            step = len(members) / _SAMPLE
            members = [members[int(k * step)] for k in range(_SAMPLE)] + [members[-1]]
        sample = [self.lines[i] for i in members]
        if g.wild is not None:
            # the first line keeps its spacing; the others only feed the digit comparison
            sample = [_blank_token(sample[0], g.wild)] + [
                _drop_token(s, g.wild) for s in sample[1:]
            ]
        return f"[×{g.count}] {clip_line(_digit_template(sample))}"

    def _missing_facts(self, body, facts, shown, omitted) -> list[tuple[int, str]]:
        """Facts whose every line was omitted (budget, noise rules): bring back one line each.
        Facts are looked up in a set extracted from the output the same way, so the costly
        substring search runs only for the rare fact the extractors see differently."""
        text = "\n".join(body)
        present = _facts_in(text)
        shown_at = {pos for pos, _ in shown}
        extra: dict[int, str] = {}
        for i, found in facts.items():
            if i in shown_at:
                continue
            if all(f in present or f in text for f in found):
                continue
            extra[i] = _clip_keeping(self.lines[i], found)
            present.update(found)
        if extra:
            omitted[:] = [(p, c - (p in extra)) for p, c in omitted if c - (p in extra) > 0]
        return sorted(extra.items())


# --------------------------------------------------------------------------- helpers


_ID_ALTERNATION_MAX = 200  # a regex alternation tries every id at every position


def _failing_ids_pattern(run: testrun.TestRun | None):
    """Something with ``.search(line)`` finding a failing test id (one with digits) in a line."""
    ids = [t for t in run.failed_ids() if any(c.isdigit() for c in t)] if run else []
    if not ids:
        return None
    if len(ids) <= _ID_ALTERNATION_MAX:
        return re.compile("|".join(re.escape(t) for t in sorted(ids, key=len, reverse=True)))
    return _IdTokens(frozenset(ids))


@dataclass(frozen=True)
class _IdTokens:
    """Many ids: look each whitespace-separated token up instead (ids without spaces only)."""

    ids: frozenset[str]

    def search(self, line: str) -> bool:
        return any(tok in self.ids for tok in line.split())


def _is_own_path(path: str, root: str | None) -> bool:
    """Library and runtime frames are not the project's code; without a project root every other
    path counts as the project's own (a relative path almost always is)."""
    p = _norm_path(path)
    if any(marker in p for marker in _LIB_MARKERS) or p.startswith(_LIB_PREFIXES):
        return False
    if p.startswith("_stream_") or (p.endswith(".js") and p[:-3] in _NODE_CORE):
        return False
    if root and (p.startswith("/") or p[1:3] == ":/") and not p.startswith(root):
        return False
    return True


def _norm_path(path: str) -> str:
    return path.replace("\\", "/").rstrip("/")


def _digit_keys(norm: str, n: int) -> list[str]:
    """Every line with each digit run replaced by a single 0: the grouping key of normal lines."""
    if norm.isascii():
        masked = _ZERO_RUN.sub("0", norm.translate(_DIGITS_TO_ZERO))
    else:  # str.translate is slow past ASCII: the same on UTF-8 bytes (a digit is one byte)
        raw = norm.encode("utf-8", "surrogatepass").translate(_DIGITS_TO_ZERO_BYTES)
        masked = _ZERO_RUN_BYTES.sub(b"0", raw).decode("utf-8", "surrogatepass")
    return masked.split("\n")[:n]


def _pick_ends(n: int, visible) -> tuple[set[int], set[int]]:
    """The first and last few visible lines, and the very first and last one of them."""
    head: list[int] = []
    i = 0
    while i < n and len(head) < HEAD:
        if visible(i):
            head.append(i)
        i += 1
    tail: list[int] = []
    j = n - 1
    while j >= i and len(tail) < TAIL:
        if visible(j):
            tail.append(j)
        j -= 1
    return set(head) | set(tail), set(head[:1] + tail[:1])


def _context_rank(g: _Group) -> tuple[int, int, int]:
    """The first and last line, then the other head and tail groups in order, then the most
    frequent templates."""
    if g.forced:
        return (0 if g.edge else 1, g.first, 0)
    return (2, -g.count, g.first)


def _budgets(chars: int) -> tuple[int, int, int]:
    """Character budgets for context (normal) lines, for important lines, and for both together.
    Small outputs keep proportionally more, big ones about 4% as context; important lines get
    more room because they are what the reader acts on, but not unlimited room (a build with
    100k warnings). The overall budget (about 8%) leaves room under the 10% token target for
    the summary and for token-dense text (paths, numbers) that has fewer characters per token."""
    normal = int(min(max(0.04 * chars, min(0.25 * chars, 300)), 40_000))
    important = int(min(max(0.08 * chars, 8_000), 160_000))
    overall = int(max(0.08 * chars, normal))
    return normal, important, overall


def _merge_variants(groups: list[_Group]) -> list[_Group]:
    """Merge groups whose keys differ in exactly one token (``Invalid user admin from <ip>`` and
    ``Invalid user oracle from <ip>``). Keys are bucketed by (token count, position, hash of the
    tokens before, hash of the tokens after), so finding candidates is linear in tokens. Most
    buckets hold one group (55,000 of 55,600 on a 20k-line npm log): a bucket is a list only
    from its second group on, and tuple slices are hashed in C, not chained in Python."""
    first: dict[tuple[int, int, int, int], _Group] = {}
    shared: dict[tuple[int, int, int, int], list[_Group]] = {}
    for g in groups:
        toks = tuple(g.key.split())
        k = len(toks)
        if k < 2 or k > _MAX_WILDCARD_TOKENS:
            continue
        for j in range(k):
            key = (k, j, hash(toks[:j]), hash(toks[j + 1 :]))
            prev = first.setdefault(key, g)
            if prev is not g:
                same = shared.get(key)
                if same is None:
                    shared[key] = [prev, g]
                else:
                    same.append(g)
    multi = [(key, shared[key]) for key in first if key in shared]  # in order of first group
    multi.sort(key=lambda kv: -sum(g.count for g in kv[1]))
    for (_, pos, _, _), members in multi:
        free = [g for g in members if not g.merged and g.wild is None]
        if len(free) < 2:
            continue
        free.sort(key=lambda g: g.first)
        head = free[0]
        head.wild = pos
        for g in free[1:]:
            g.merged = True
            head.forced = head.forced or g.forced
            head.edge = head.edge or g.edge
            head.members.extend(g.members)
        head.members.sort()
    return [g for g in groups if not g.merged]


def _blank_token(line: str, pos: int) -> str:
    for k, m in enumerate(_TOKEN.finditer(line)):
        if k == pos:
            return line[: m.start()] + "\x00" + line[m.end() :]
    return line


def _drop_token(line: str, pos: int) -> str:
    toks = line.split()
    if pos < len(toks):
        toks[pos] = "\x00"
    return " ".join(toks)


def _digit_template(sample: list[str]) -> str:
    """The first line with ``<n>`` where the sampled lines' digit runs differ."""
    parts = _DIGITS.split(sample[0])
    nums = parts[1::2]
    vary = [False] * len(nums)
    for s in sample[1:]:
        other = _DIGITS.findall(s)
        if len(other) != len(nums):
            vary = [True] * len(nums)
            break
        for k, (a, b) in enumerate(zip(nums, other)):
            if a != b:
                vary[k] = True
    for k, v in enumerate(vary):
        if v:
            parts[2 * k + 1] = "<n>"
    text = "".join(parts).replace("\x00", "<*>")
    return _prettify(text) if "<n>" in text else text


def _prettify(text: str) -> str:
    for pattern, label in _PRETTY:
        text = pattern.sub(lambda m: label if "<n>" in m.group() else m.group(), text)
    return text


def _severity(line: str) -> int:
    """2 for an error line, 1 for a warning line, else 0."""
    if line[:2] in ("E ", "E\t"):  # pytest's assertion/exception lines
        return 2
    if any(needle in line for needle in _ERROR_NEEDLES):
        for m in _ERROR_HINT.finditer(line):
            if _accept(line, m.start(), m.group()):
                return 2
    if line.lstrip()[:1] in ("✕", "✖"):
        return 2
    if "WARN" in line or "arning" in line or "[DEP" in line:
        for m in _WARN_HINT.finditer(line):
            if _accept(line, m.start(), m.group()):
                return 1
    return 0


def _accept(line: str, pos: int, hit: str) -> bool:
    if pos == 0:
        return True
    prev = line[pos - 1]
    if not (prev.isalnum() or prev == "_"):
        return True
    if not hit.startswith(("Error", "Exception", "Warning")):
        return False  # XFAIL, STRERROR, stderror: not markers
    k = pos - 1
    while k > 0 and (line[k - 1].isalnum() or line[k - 1] == "_"):
        k -= 1
    return line[k].isupper() and "_" not in line[k:pos]  # TypeError, not test_raises_TypeError


def _codes(line: str) -> tuple[str, ...]:
    """Error codes such as E0432, TS2339, C4996, F401 (a capital-letter prefix and 3-5 digits)."""
    out = []
    for m in _CODE_RE.finditer(line):
        k = m.start()
        if k == 0 or not (line[k - 1].isalnum() or line[k - 1] == "_"):
            out.append(m.group())
    return tuple(out)


def _facts_in(text: str) -> set[str]:
    found: set[str] = set()
    for line in text.split("\n"):
        found.update(ref for _, ref in _refs(line))
        found.update(_codes(line))
        found.update(_exc_names(line))
    return found


def _exc_names(line: str) -> tuple[str, ...]:
    """Exception class names in a line (``TypeError``, ``io.cucumber.java.PendingException``
    yields ``PendingException``)."""
    if "Error" not in line and "Exception" not in line:
        return ()
    out = []
    for m in _EXC_TAIL.finditer(line):
        k = m.start()
        while k > 0 and (line[k - 1].isalnum() or line[k - 1] == "_"):
            k -= 1
        if k < m.start() and line[k].isupper() and "_" not in line[k : m.start()]:
            out.append(line[k : m.end()])
    return tuple(out)


def _refs(line: str) -> list[tuple[str, str]]:
    """``(path, ref)`` for every ``path:line``, ``path(line,col)`` and ``File "path", line N``
    in a line. The regex anchors on the extension (fast); the path start is found by scanning
    back to a delimiter, which avoids the quadratic backtracking of a leading path class."""
    out = []
    rev = None
    for m in _REF_ANCHOR.finditer(line):
        dot = m.start()
        if rev is None:
            rev = line[::-1]
        run = _PATH_RUN.match(rev, len(line) - dot)
        assert run is not None  # the pattern matches the empty string
        start = dot - run.end() + (len(line) - dot)
        if start >= dot:
            continue
        path = line[start : m.start(1) - 1 if m.group(1) else m.start(2) - 1]
        out.append((path, line[start : m.end(1) if m.group(1) else m.end()]))
    if 'File "' in line:
        out.extend((m.group(1), m.group(0)) for m in _PYFILE.finditer(line))
    return out


def _light(line: str) -> str:
    """Mask what varies between repeats of one error - timestamps, dates, IPs, durations, long
    numbers (ids, pids, ports), 0x addresses, uuids, every number before the level word, the
    percentage of a progress marker (pytest -v prints ``FAILED   [ 64%]`` once per test) - but
    never a ``path:line`` ref or a small number, since ``assert 1 == 0`` and ``:943:`` are the
    facts. Works on the digit runs of the line with plain Python, which is several times faster
    than a regex alternation over every character."""
    if line.endswith(("%]", "%] ")):
        line = _PROGRESS_PCT.sub(" [<n>%]", line)
    if "0x" in line:
        line = _HEX0X.sub("<hex>", line)
    if line.count("-") >= 4:
        line = _UUID.sub("<uuid>", line)
    parts = _DIGITS.split(line)
    nrun = len(parts) // 2
    if not nrun:
        return line
    cut = -1
    for word in _LEVEL_WORDS:
        p = line.find(word, 0, 160)
        if p >= 0 and (cut < 0 or p < cut):
            cut = p
    out = [parts[0]]
    offset = len(parts[0])
    protected = False
    r = 0
    while r < nrun:
        d = parts[2 * r + 1]
        before = parts[2 * r]
        after = parts[2 * r + 2]
        if before and (before[-1] in ":(" and _is_ref_end(before) or before.endswith('", line ')):
            protected = True
        elif not (protected and before in (":", ",", ", ")):
            protected = False
        if protected:
            out.append(d)
            out.append(after)
            offset += len(d) + len(after)
            r += 1
            continue
        span, label = _classify_run(parts, r, nrun, offset < cut)
        if label:
            if label == "<n>" and before[-2:] in ("_-", " -", "=-", "(-"):
                out[-1] = out[-1][:-1]
            out.append(label)
            end = 2 * (r + span) - 1  # index of the last digit run in the span
            for k in range(2 * r + 1, end + 1):
                offset += len(parts[k])
            out.append(parts[end + 1])
            offset += len(parts[end + 1])
            r += span
        else:
            out.append(d)
            out.append(after)
            offset += len(d) + len(after)
            r += 1
    return "".join(out)


def _is_ref_end(text: str) -> bool:
    """Does ``text`` end with ``.ext:`` or ``.ext(``, i.e. is the next number a line number?"""
    dot = text.rfind(".", max(0, len(text) - 12))
    return dot >= 0 and text[dot + 1 : -1] in _EXT_SET


def _classify_run(parts: list[str], r: int, nrun: int, in_prefix: bool) -> tuple[int, str]:
    """How many digit runs starting at run ``r`` form one maskable value, and its placeholder
    ("" to keep the run). ``parts`` alternates text and digit runs as ``re.split`` returns."""
    d = parts[2 * r + 1]
    after = parts[2 * r + 2]
    left = nrun - r - 1
    if left >= 2 and after == ":" and parts[2 * r + 4] == ":" and len(d) <= 2:
        if len(parts[2 * r + 3]) == 2 and len(parts[2 * r + 5]) == 2:
            span = 3
            if left >= 3 and parts[2 * r + 6] in (".", ","):
                span = 4
            return span, "<time>"
    if left >= 3 and after == "." and parts[2 * r + 4] == "." and parts[2 * r + 6] == ".":
        if len(d) <= 3 and all(len(parts[2 * k + 1]) <= 3 for k in range(r + 1, r + 4)):
            span = 4
            if left >= 4 and parts[2 * r + 8] == ":":
                span = 5
            return span, "<ip>"
    if (
        left >= 2
        and len(d) == 4
        and len(after) == 1
        and after in "-/."
        and parts[2 * r + 4] == after
    ):
        if len(parts[2 * r + 3]) <= 2 and len(parts[2 * r + 5]) <= 2:
            return 3, "<date>"
    if left >= 1 and after == ".":
        unit = parts[2 * r + 4]
        if _is_unit(unit):
            return 2, "<dur>"
        if len(parts[2 * r + 3]) >= 3:
            return 2, "<n>"
    if _is_unit(after):
        return 1, "<dur>"
    if in_prefix or len(d) >= 5:
        return 1, "<n>"
    return 0, ""


def _is_unit(text: str) -> bool:
    head = text[:2]
    if head in ("ms", "us", "µs", "ns"):
        return not text[2:3].isalpha()
    return text[:1] == "s" and not text[1:2].isalpha()


def _clip_free(template: str, limit: int = 200) -> str:
    """A template whose facts are listed after it: cut plainly (its facts are not lost)."""
    if len(template) <= limit:
        return template
    return f"{template[: limit - 20]} …[+{len(template) - limit + 20} chars]…"


def _clip_keeping(text: str, facts: tuple[str, ...]) -> str:
    clipped = clip_line(text)
    if clipped is text or not facts:
        return clipped
    lost = [f for f in dict.fromkeys(facts) if f not in clipped]
    return clipped + (f" [also: {', '.join(lost)}]" if lost else "")


def _timespan(lines: list[str]) -> tuple[str, str] | None:
    def first(seq) -> str | None:
        for k, line in enumerate(seq):
            if k >= 50:
                return None
            m = _TS_FIND.search(line, 0, 60)
            if m:
                return m.group(0)
        return None

    a = first(lines)
    b = first(reversed(lines)) if a else None
    return (a, b) if a and b else None


def _assemble(shown: list[tuple[int, str]], omitted: list[tuple[int, int]]) -> list[str]:
    entries = sorted(
        [(pos, 0, text) for pos, text in shown] + [(pos, 1, cnt) for pos, cnt in omitted],
        key=lambda e: (e[0], e[1]),
    )
    out: list[str] = []
    pending = 0
    for _, kind, val in entries:
        if isinstance(val, int):  # kind 1: an omitted run's line count
            pending += val
            continue
        if pending >= _MIN_MARKER:
            out.append(_OMITTED.format(pending))
        pending = 0
        out.append(val)
    if pending >= _MIN_MARKER:
        out.append(_OMITTED.format(pending))
    return out
