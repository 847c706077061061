"""Critical facts: the one definition of what no compressor may lose.

The README promises that failing test ids, exception lines, ``path:line`` references and error
codes survive compression. This module says exactly what that means, with plain regexes over the
raw text, so that three users agree on it: the compressors (to protect the lines carrying facts),
``python -m aider_gardener compress DIR --facts`` (facts found / kept per file), and the tests,
which check every real output against it.

Kinds (``KINDS``, each a set of short strings; ``missing`` says which are absent from a summary):
failing tests, exceptions, ``path:line`` into the project's own code, stack frames, error codes,
panics, terraform plans, unhealthy pods and FATAL/ERROR log messages. Comparisons are
whitespace-normalised; messages compare loosely (numbers and the log compressor's ``<n>``-style
placeholders count as one token), while paths, lines, codes and frames must appear verbatim.

Decision record: docs/decisions/018-critical-facts.md
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterable, Iterator, TypeVar

KINDS = (
    "failing_tests",
    "exceptions",
    "path_lines",
    "frames",
    "error_codes",
    "panics",
    "terraform",
    "pods",
    "fatal_lines",
)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
LIBRARY_PATH = re.compile(
    r"site-packages|dist-packages|node_modules|[\\/]lib[\\/]python\d|<frozen|[\\/]\.cargo[\\/]|"
    r"[\\/]rustc[\\/]|[\\/]go[\\/]src[\\/]|[\\/]jdk|[\\/]Program Files[\\/]Python|importlib",
    re.I,
)
FAILED_TEST = [
    re.compile(r"^FAILED\s+(\S+::\S+)", re.M),  # pytest short summary
    re.compile(r"^ERROR\s+(\S+::\S+)", re.M),
    re.compile(r"^\s*--- FAIL: (\S+)", re.M),  # go test
    re.compile(r"^test (\S+) \.\.\. FAILED", re.M),  # cargo test
    re.compile(r"^\s*FAIL\s+(\S+\.(?:spec|test)\.[jt]sx?)", re.M),  # jest/vitest suite
    re.compile(r"^\[ERROR\]\s+(\w[\w.$]*\.\w+:\d+\s)", re.M),  # surefire "Class.method:42 msg"
    re.compile(r"^(?:FAIL|ERROR): (\w+ \([\w.]+\))", re.M),  # unittest
]
EXCEPTION_LINE = re.compile(
    r"^(?:E\s+)?((?:[A-Za-z_][\w$]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure))"
    r"(?::[ \t]*(\S.{0,80}))?\s*$",
    re.M,
)
CAUSED_BY = re.compile(r"^\s*Caused by:[ \t]+([\w$.]+)(?::[ \t]*(\S.{0,80}))?", re.M)
QUALIFIED_EXC = re.compile(
    r"(?<![\w$.])(?<!import )((?:[a-z_][\w$]*\.)+[A-Z][\w$]*(?:Error|Exception))(?![\w$;])"
    r"(?::[ \t]*(\S.{0,80}))?"
)
# ``file(12)`` / ``file(12,5)`` only when the parenthesis closes there (MSVC, C#): a call or a
# repr such as Odoo's ``ir.ui.view(3715,)`` is no place in a file.
PATH_LINE = re.compile(
    r"(?<![\w.])((?:[A-Za-z]:)?[\w.\\/-]*[\w-]\.[A-Za-z]{1,5})"
    r"(?::|:\[|\((?=\d+(?:,\d+)?\)))(\d+)\b"
)
PY_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
# "at fn (path:12:3)", also after a log prefix ("44 verbose stack     at …"): the location that
# ends a line, found from its end (_js_frames). One pattern with a lazy prefix tried every "at "
# of a line against the rest of it: quadratic in a line of many "at ".
JS_LOCATION = re.compile(r"(?<![^\s(])(?:file://)?([^\s()]+?):(\d+)(?::\d+)?\)?[ \t]*$")
_AT_WORD = re.compile(r"(?<!\S)at ")
JVM_FRAME = re.compile(r"^\s*at [\w$.<>/]+\(([\w$-]+\.(?:java|kt|kts|scala|groovy)):(\d+)\)", re.M)
# "pkg.sub.Class.method:12": one package segment before the class is enough (the groups are the
# same), and (?:[a-z][\w$]*\.)+ was quadratic in a long "a.a.a…" (every segment a start).
CALLED_BY_FRAME = re.compile(r"(?<![\w$])[a-z][\w$]*\.([A-Z][\w$]*\.[\w$<>-]+):(\d+)\b")
# error codes, found fast on a whole text: simple patterns, each starting with a literal
# or one class, then filtered (an alternation of classes is tried at every position)
_CODE_NUM = re.compile(r"(?<![\w-])([A-Z]{1,3}\d{3,5})\b")
_CODE_NUM_OK = re.compile(r"E\d{3,4}|TS\d{4,5}|CS\d{4}|LNK\d{4}|C\d{4}")
_ERRNO = re.compile(
    r"E(?:CONN\w+|NOENT|ACCE[S]|PERM|TIMEDOUT|RESOLVE|ADDRINUSE|INTEGRITY|LIFECYCLE|EXIST"
    r"|NOTFOUND|AI_AGAIN|PIPE|BADENGINE|NOTSUP|PEERINVALID|JSONPARSE)\b"
)
# a lint a diagnostic names (not the ``-W clippy::all`` flags of a rustc command line)
_CLIPPY = re.compile(
    r"(?:#\[(?:warn|deny|forbid)\(|`-[DW] )(clippy::\w+)|rust-clippy/master/(index\.html#\w+)"
)
_WFLAG = re.compile(r"\[(-W[\w=+-]+)\]")
# a lint code right after a location (flake8/ruff/pylint/pycodestyle) or ruff's new format
LINT_CODE = re.compile(
    r"^\S+?:\d+:(?:\d+:)? ([A-Z]{1,4}\d{3,4})\b|^([A-Z]{1,4}\d{3,4}) (?:\[\*\] )?\S", re.M
)
MYPY_CODE = re.compile(r": (?:error|note|warning): .*  \[([a-z][a-z0-9-]+)\]\s*$", re.M)
ESLINT_RULE = re.compile(
    r"^\s+\d+:\d+\s+(?:error|warning)\s+.*?\s{2,}((?:@[\w-]+/)?[a-z][\w-]*(?:/[\w-]+)?)\s*$", re.M
)
PANIC = re.compile(r"^panic: (.{1,60})|panicked at (?:'[^']*', )?(\S+?:\d+)", re.M)
TF_ACTION = re.compile(
    r"^\s*# (\S+) (will be created|will be destroyed|will be updated in-place|must be replaced"
    r"|will be replaced|will be read during apply|has been deleted|has changed)",
    re.M,
)
# The totals line; its words by tf_total. Apply's totals run to the line's end: ".+?\.?\s*$"
# tried the trailing blanks again after every character (quadratic in a long line).
TF_TOTALS = re.compile(
    r"^\s*(?:(Plan: \d+ to add, \d+ to change, \d+ to destroy)\.?\s*$"
    r"|(Apply complete! Resources: .+)$)",
    re.M,
)
_APPLY = "Apply complete! Resources: "
FATAL_LINE = re.compile(r"^.{0,80}?\b(?:FATAL|ERROR|CRITICAL|SEVERE)\b[\]:| \t-]*(\S.{4,})$", re.M)
_LOOSE = re.compile(
    r"<(?:n|ip|time|ts|date|hex|uuid|dur|\*)>|0x[0-9a-fA-F]+|\d+(?:[.:,/-]\d+)*|"
    r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}"
)
# build tools' advice printed under every failure: ERROR level, but no fact of this run
_BOILERPLATE = re.compile(
    r"^(?:-?> \[Help \d|Please refer to|\[Help \d\]|To see the full stack trace|Re-run Maven"
    r"|For more information about the errors|After correcting the problems|mvn <args>"
    r"|Run with --(?:stacktrace|info)|Get more help at|BUILD FAILURE)"
)
_POD_OK = frozenset({"Running", "Completed", "Succeeded"})


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


def loose(text: str) -> str:
    """Numbers, ids and the compressors' placeholders as one ``#``: what a repeated message
    keeps when its varying parts are masked."""
    return " ".join(_LOOSE.sub("#", text).split())


# --------------------------------------------------------------------------- extraction


def only_lines(text: str, needles: tuple[str, ...], after: int = 0) -> str:
    """The lines of ``text`` containing any needle (and the ``after`` lines following each, for
    patterns that allow a wrapped line), joined: one C-speed ``find`` scan per needle, so the
    line-anchored regexes below run on a few lines of a 20,000-line log, not on all."""
    spans = set()
    for needle in needles:
        pos = text.find(needle)
        while pos >= 0:
            start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            for _ in range(after):
                if end < 0:
                    break
                end = text.find("\n", end + 1)
            end = len(text) if end < 0 else end
            spans.add((start, end))
            pos = text.find(needle, end)
    return "\n".join(text[a:b] for a, b in sorted(spans))


def failing_tests(text: str) -> set[str]:
    text = only_lines(text, ("FAIL", "ERROR"), after=1)  # jest's "FAIL" may wrap before its path
    return {m.group(1).strip() for rx in FAILED_TEST for m in rx.finditer(text)}


def exception_lines(text: str) -> set[str]:
    """``Type: start of message`` for every exception line, ``Caused by:`` and qualified
    exception name (the message loosened, see ``loose``)."""
    found = set()
    text = only_lines(text, ("Error", "Exception", "Exit", "Interrupt", "Failure", "Caused by"))
    for rx in (EXCEPTION_LINE, CAUSED_BY, QUALIFIED_EXC):
        for m in rx.finditer(text):
            msg = loose((m.group(2) or "").strip())[:40].strip()
            found.add(f"{m.group(1)}: {msg}" if msg else m.group(1))
    return found


# what makes a line a library one: a literal, or a regex whose rarer literals are checked first
# (``in`` on the lowered line is exact for ASCII; other lines go to the regex, as ``re.I``
# folds a few non-ASCII letters onto ASCII ones)
_LIB_SURE = ("site-packages", "dist-packages", "node_modules", "<frozen", "importlib")
_LIB_MAYBE = ("python", "cargo", "rustc", "/go", "\\go", "jdk", "program files")


def is_library(line: str) -> bool:
    low = line.lower()
    if not low.isascii():
        return bool(LIBRARY_PATH.search(line))
    if any(x in low for x in _LIB_SURE):
        return True
    return any(x in low for x in _LIB_MAYBE) and bool(LIBRARY_PATH.search(line))


_T = TypeVar("_T")
_SCANS: ContextVar[dict | None] = ContextVar("fact_scans", default=None)


@contextmanager
def shared_scans() -> Iterator[None]:
    """Within: a whole-text scan (``ref_lines``, ``code_matches``) runs once per text. The log
    compressor and the pipeline's fact net (``keep_critical``) scan the same 1.5 MB text for the
    same anchors; the results live only as long as the block (one ``pipeline.compress``), in
    this thread's context."""
    token = _SCANS.set({})
    try:
        yield
    finally:
        _SCANS.reset(token)


def _scan(fn: Callable[[str], _T], text: str) -> _T:
    cache = _SCANS.get()
    if cache is None:
        return fn(text)
    hit = cache.get(fn)
    if hit is not None and (hit[0] is text or hit[0] == text):
        return hit[1]
    out = fn(text)
    cache[fn] = (text, out)
    return out


# a path:line reference ends with an extension and a number; ``File "`` is found by ``find``
# (an alternation of the two would defeat the regex engine's scan for the literal dot)
_PATH_ANCHOR = re.compile(r"\.[A-Za-z]{1,5}(?:[:(]|:\[)\d")
_DIGIT_RUN = re.compile(r"\d*(?:,\d+)?\)?")  # and ``,col)``: PATH_LINE looks ahead to it


def ref_lines(text: str) -> tuple[tuple[int, int, int, int], ...]:
    """``(start, end, lo, hi)`` of each line that may hold a ``path:line`` reference or a Python
    frame, in order: ``text[lo:hi]`` is where ``PATH_LINE`` can match (``lo == hi`` when only a
    ``File "`` is there), see ``path_refs``."""
    return _scan(_ref_lines, text)


def _ref_lines(text: str) -> tuple[tuple[int, int, int, int], ...]:
    spans: dict[int, list[int]] = {}
    for a in _PATH_ANCHOR.finditer(text):
        start = text.rfind("\n", 0, a.start()) + 1
        span = spans.get(start)
        if span is None:
            spans[start] = [a.start(), a.end()]
        else:
            span[1] = a.end()
    pos = text.find('File "')
    while pos >= 0:
        spans.setdefault(text.rfind("\n", 0, pos) + 1, [])
        pos = text.find('File "', pos + 6)
    out = []
    for start in sorted(spans):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        span = spans[start]
        lo, hi = _ref_window(text, start, end, span[0], span[1]) if span else (start, start)
        out.append((start, end, lo, hi))
    return tuple(out)


def _ref_window(text: str, start: int, end: int, first: int, last: int) -> tuple[int, int]:
    """Where ``PATH_LINE`` can match in a line whose anchors span ``first..last``: from the word
    holding the first anchor (a path has no blank, and ``PATH_LINE`` ends with an anchor) to the
    character after the last anchor's number (for its ``\b``). A path regex tried at every
    position of a long compiler line costs more than everything else in the line's check."""
    lo = max(text.rfind(" ", start, first) + 1, start)
    run = _DIGIT_RUN.match(text, last)
    assert run is not None  # the pattern matches the empty string
    hi = min(run.end() + 1, end)
    return lo, hi


def path_refs(line: str) -> list[re.Match]:
    """``PATH_LINE.finditer(line)``, tried only between the line's first and last anchor."""
    first = last = -1
    for a in _PATH_ANCHOR.finditer(line):
        if first < 0:
            first = a.start()
        last = a.end()
    if first < 0:
        return []
    return list(PATH_LINE.finditer(line, *_ref_window(line, 0, len(line), first, last)))


def project_path_lines(text: str) -> set[str]:
    """Found from an anchor (extension then line number) to its line, so the path regex runs
    only on lines that hold a reference, and there only around the references."""
    found = set()
    for start, end, lo, hi in ref_lines(text):
        line = text[start:end]
        if is_library(line):
            continue
        for m in PATH_LINE.finditer(text, lo, hi):
            path = m.group(1)
            if path.startswith(("//", "http", "www.")) or _node_core_frame(path, line):
                continue
            found.add(f"{path}:{m.group(2)}")
        if 'File "' in line:
            for m in PY_FRAME.finditer(line):
                found.add(f"{m.group(1)}:{m.group(2)}")
    return found


def _lines_with(text: str, *needles: str) -> Iterable[str]:
    for line in text.split("\n"):
        if any(n in line for n in needles):
            yield line


def _node_core_frame(path: str, line: str) -> bool:
    """``at emitNone (events.js:86:13)``: Node's own modules carry no directory."""
    bare = "/" not in path.replace("internal/", "", 1) and "\\" not in path
    return bare and path.endswith(".js") and line.lstrip().startswith("at ")


def _js_frames(at_lines: str) -> Iterable[re.Match[str]]:
    """The location of each line that is a JS frame: "at " (after a blank or at the start) right
    before it, or before the "(" right before it."""
    for line in at_lines.split("\n"):
        m = JS_LOCATION.search(line)
        if m is None:
            continue
        at = m.start()
        if line[at - 1 : at] == "(":
            if _AT_WORD.search(line, 0, at - 1):
                yield m
        elif line[max(0, at - 3) : at] == "at " and (at == 3 or line[at - 4 : at - 3].isspace()):
            yield m


def frames(text: str) -> set[str]:
    """Every distinct frame location as ``file:line`` or ``Class.method:line``."""
    found = set()
    at_lines = only_lines(text, ("at ",))  # both frame forms hold "at "
    for m in _js_frames(at_lines):
        name = _basename(m.group(1))
        if "." in name and not name.startswith(("<", "native")):
            found.add(f"{name}:{m.group(2)}")
    for m in JVM_FRAME.finditer(at_lines):
        found.add(f"{m.group(1)}:{m.group(2)}")
    for m in PY_FRAME.finditer(text):
        found.add(f"{_basename(m.group(1))}:{m.group(2)}")
    if "called by" in text or "\tat " in text:
        for line in _lines_with(text, "called by"):
            for m in CALLED_BY_FRAME.finditer(line):
                found.add(f"{m.group(1)}:{m.group(2)}")
    return found


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def error_codes(text: str) -> set[str]:
    found = set()
    hits = code_matches(text)  # one pass finds numbered codes and lint lines
    for m in hits:
        k = m.start()
        if _CODE_NUM_OK.fullmatch(m.group()) and not (
            k and (text[k - 1].isalnum() or text[k - 1] in "_-")
        ):
            found.add(m.group())
    for m in _ERRNO.finditer(text):
        k = m.start()
        if k == 0 or not (text[k - 1].isalnum() or text[k - 1] in "_-"):
            found.add(m.group())
    if "clippy" in text:
        found.update(a or b for a, b in _CLIPPY.findall(text))
    if "[-W" in text:
        found.update(_WFLAG.findall(text))
    # each remaining pattern needs a literal or a code: run it on those lines only
    for rx, part in (
        (LINT_CODE, _lines_of(text, hits)),
        (MYPY_CODE, only_lines(text, ("  [",))),
        (ESLINT_RULE, only_lines(text, ("error ", "warning "))),
    ):
        for m in rx.finditer(part):
            found.update(g for g in m.groups() if g)
    return found


_CODE_ANY = re.compile(r"[A-Z]{1,4}\d{3,5}\b")
# capitals to "A", digits to "0"; a non-ASCII character (encoded as "?") may be a digit too
_CAPS_DIGITS = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789?", b"A" * 26 + b"0" * 11)
_CAP_3DIGITS = re.compile(b"A000")


def code_matches(text: str) -> tuple[re.Match, ...]:
    """``tuple(_CODE_ANY.finditer(text))``, found ten times faster: a pattern starting with a
    class is tried at every capital of a 1.5 MB log, while a capital followed by three digits is
    one literal in the text mapped to character kinds (one byte per character, so positions
    agree); the regex then runs only there, from the first of at most four capitals."""
    return _scan(_code_matches, text) if len(text) > 4096 else _code_matches(text)


def _code_matches(text: str) -> tuple[re.Match, ...]:
    kinds = text.encode("ascii", "replace").translate(_CAPS_DIGITS)
    out = []
    for hit in _CAP_3DIGITS.finditer(kinds):
        q = hit.start()
        p = q
        while p > q - 3 and p > 0 and kinds[p - 1] == 65:  # "A": another capital before
            p -= 1
        m = _CODE_ANY.match(text, p)
        if m:
            out.append(m)
    return tuple(out)


def _lines_of(text: str, hits: Iterable[re.Match]) -> str:
    spans = set()
    end = -1
    for m in hits:
        if m.start() < end:
            continue
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        end = len(text) if end < 0 else end
        spans.add((start, end))
    return "\n".join(text[a:b] for a, b in sorted(spans))


def panics(text: str) -> set[str]:
    if "panic" not in text:
        return set()
    return {loose(m.group(1)) if m.group(1) else m.group(2) for m in PANIC.finditer(text)}


def tf_total(m: re.Match[str]) -> str:
    """A TF_TOTALS match as words: Apply's totals without the one full stop that ends them."""
    if m.group(1):
        return " ".join(m.group(1).split())
    totals = m.group(2)[len(_APPLY) :].rstrip()
    if totals.endswith(".") and len(totals) > 1:
        totals = totals[:-1]
    return " ".join((_APPLY + totals).split())


def terraform(text: str) -> set[str]:
    part = only_lines(text, (" be ", "has been deleted", "has changed", "Plan:", "Apply complete"))
    found = {f"{m.group(1)} {m.group(2)}" for m in TF_ACTION.finditer(part)}
    found.update(tf_total(m) for m in TF_TOTALS.finditer(part))
    return found


def pods(text: str) -> set[str]:
    """``kubectl get pods``: the pods that are not fine, with their status."""
    if "STATUS" not in text or "READY" not in text:
        return set()
    lines = text.split("\n")
    found = set()
    for k, line in enumerate(lines):
        if "STATUS" not in line:
            continue
        cols = line.split()
        if "NAME" not in cols or "STATUS" not in cols or "READY" not in cols:
            continue
        ni, si = cols.index("NAME"), cols.index("STATUS")
        for row in lines[k + 1 :]:
            vals = row.split()
            if len(vals) < len(cols) - 2 or len(vals) <= max(ni, si):
                break
            if vals[si] not in _POD_OK:
                found.add(f"{vals[ni]} {vals[si]}")
        break
    return found


def fatal_lines(text: str) -> set[str]:
    """The loosened message (first 40 characters) of each FATAL/ERROR-level log line."""
    found = set()
    for m in FATAL_LINE.finditer(only_lines(text, ("FATAL", "ERROR", "CRITICAL", "SEVERE"))):
        msg = fatal_message(m)
        if msg:
            found.add(msg)
    return found


_LEVEL_PREFIX = re.compile(r"^(?:\[?(?:ERROR|FATAL|CRITICAL|SEVERE)\]?[\s:]*)+")


def fatal_message(m: re.Match) -> str | None:
    """The fact of one ``FATAL_LINE`` match: its message loosened and cut to 40 characters, or
    None for build tools' boilerplate and messages without words."""
    raw = _LEVEL_PREFIX.sub("", m.group(1))
    if _BOILERPLATE.match(raw):
        return None
    msg = loose(raw)[:40].strip()
    return msg if len(msg) >= 5 and any(c.isalpha() for c in msg) else None


_EXTRACTORS = {
    "failing_tests": failing_tests,
    "exceptions": exception_lines,
    "path_lines": project_path_lines,
    "frames": frames,
    "error_codes": error_codes,
    "panics": panics,
    "terraform": terraform,
    "pods": pods,
    "fatal_lines": fatal_lines,
}


def extract(text: str) -> dict[str, set[str]]:
    """Every kind's facts in ``text`` (ANSI escapes removed first)."""
    text = strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n")
    return {kind: fn(text) for kind, fn in _EXTRACTORS.items()}


# --------------------------------------------------------------------------- checking


_LOCATION = re.compile(r'([\w.@+~/<>-]+)(?:[:(]|:\[|", line )(\d+)(?!\d)')
_LOCATION_SEP = re.compile(r'(?:[:(]|:\[|", line )(\d+)(?!\d)')
_LOCATION_RUN = re.compile(r"[\w.@+~/<>-]*")


def locations(text: str) -> set[tuple[str, str]]:
    """``(file name, line)`` of every ``_LOCATION`` match, found from the separators: tried at
    every position, the path class re-reads each long word (a URL, a minified line) to its end,
    quadratic in its length. A separator's path is the class run before it (read backwards,
    on the reversed text), starting no earlier than the previous match's end, as ``finditer``
    would have it; the class holds no separator character, so runs never span two."""
    out = set()
    rev = None
    prev_end = 0
    for m in _LOCATION_SEP.finditer(text):
        sep = m.start()
        if sep <= prev_end:
            continue
        if rev is None:
            rev = text[::-1]
        run = _LOCATION_RUN.match(rev, len(text) - sep)
        assert run is not None  # the pattern matches the empty string
        start = max(len(text) - run.end(), prev_end)
        if start < sep:
            out.add((_basename(text[start:sep]), m.group(1)))
            prev_end = m.end()
    return out


class Summary:
    """A summary prepared once for many fact lookups: flat (whitespace-normalised), with
    forward slashes, and loosened, plus the line index grouped diagnostics need."""

    def __init__(self, summary: str):
        summary = strip_ansi(summary)
        self.flat = " ".join(summary.split())
        self.slashed = self.flat.replace("\\", "/")
        self.loose = loose(summary)
        self.lines = summary.split("\n")
        self._grouped: dict[str, set[str]] | None = None
        self._locs: set[tuple[str, str]] | None = None

    def has(self, kind: str, fact: str) -> bool:
        if kind in ("exceptions",):
            etype, _, msg = fact.partition(": ")
            return etype in self.flat and msg in self.loose
        if kind == "fatal_lines" or kind == "panics" and "#" in fact:
            return fact in self.loose
        if kind in ("path_lines", "frames"):
            path, _, line = fact.rpartition(":")
            return self._location(path.replace("\\", "/"), line)
        if kind == "pods":
            name, _, status = fact.rpartition(" ")
            return any(name in x and status in x for x in self.lines)
        return " ".join(fact.split()) in self.flat

    def _location(self, path: str, line: str) -> bool:
        """``path:line``, ``path(line,col)``, ``path:[line,col]``, ``File "path", line N``, or
        the file name with the line (a shortened absolute prefix), or a grouped ``in name:
        lines 3,7,…`` entry. One regex pass indexes every location of the summary, so checking
        thousands of facts costs a set lookup each."""
        if self._locs is None:
            self._locs = locations(self.slashed)
        name = path.rsplit("/", 1)[-1]
        return (name, line) in self._locs or line in self.grouped().get(name, ())

    def grouped(self) -> dict[str, set[str]]:
        if self._grouped is None:
            self._grouped = grouped_locations(self.lines)
        return self._grouped


GROUPED = re.compile(r"(?:^|; | — )in (\S+): lines? ([\d,]+)")


def grouped_locations(lines: list[str]) -> dict[str, set[str]]:
    """File name -> line numbers named by grouped diagnostics (``TS1005 ×12 — msg — in a.tsx:
    lines 120,121; in b.tsx: line 7``), the form ``compress/diagnostics.py`` writes."""
    out: dict[str, set[str]] = {}
    for line in lines:
        if " in " not in line:
            continue
        for m in GROUPED.finditer(line):
            name = _basename(m.group(1))
            out.setdefault(name, set()).update(x for x in m.group(2).split(",") if x)
    return out


def missing(original: str, summary, found: dict[str, set[str]] | None = None):
    """Facts of ``original`` absent from ``summary`` (a string or a prepared ``Summary``), by
    kind (kinds with none missing left out)."""
    found = extract(original) if found is None else found
    s = summary if isinstance(summary, Summary) else Summary(summary)
    out: dict[str, set[str]] = {}
    for kind, facts in found.items():
        gone = {f for f in facts if not s.has(kind, f)}
        if gone:
            out[kind] = gone
    return out


SCAN_MAX = 20_000  # longer lines are data (minified code, base64): cut as before, not scanned


def line_facts(line: str, messages: bool = True) -> list[str]:
    """The facts one line carries, as the substrings that must stay verbatim when the line is
    shortened: locations, frames, codes, exception names (with the start of their message and,
    for an exception/FATAL/ERROR line, its first 120 characters when ``messages``)."""
    out = [m.group(0) for m in path_refs(line)]
    out += [m.group(0) for m in PY_FRAME.finditer(line)] if 'File "' in line else []
    if "called by" in line:  # Class.method:line, the package is no fact
        out += [f"{m.group(1)}:{m.group(2)}" for m in CALLED_BY_FRAME.finditer(line)]
    out += [m.group() for m in _code_matches(line) if _CODE_NUM_OK.fullmatch(m.group())]
    out += _ERRNO.findall(line) if "E" in line else []
    if "clippy" in line:
        out += [a or b for a, b in _CLIPPY.findall(line)]
    out += _WFLAG.findall(line) if "[-W" in line else []
    m = LINT_CODE.match(line)  # flake8/ruff "path:1:2: F401 …" or ruff's "F401 [*] …"
    if m:
        out.append(m.group(1) or m.group(2))
    if "Error" in line or "Exception" in line:
        k = 62 if messages else 0
        out += [m.group(0)[: len(m.group(1)) + k] for m in QUALIFIED_EXC.finditer(line)]
    if messages:
        m = EXCEPTION_LINE.match(line) or CAUSED_BY.match(line) or FATAL_LINE.match(line)
        if m:
            out.append(line[m.start() : m.start() + 120].strip())
    return list(dict.fromkeys(f for f in out if f))


def shorten(line: str, limit: int, facts: list[str] | None = None) -> str | None:
    """``line`` within about ``limit`` characters, cutting only free text between its facts:
    the head and tail a plain clip keeps (3/4 and 1/4 of the limit) and every fact between them
    survive; the longest gaps become ``…[+N chars]…`` first. A line whose facts alone exceed the
    limit keeps them all. None when the line has no facts (the caller cuts it its own way)."""
    if len(line) <= limit:
        return line
    facts = line_facts(line) if facts is None else facts
    keep = bytearray(len(line))
    for f in facts:
        start = line.find(f)
        while start >= 0:
            keep[start : start + len(f)] = b"\x01" * len(f)
            start = line.find(f, start + len(f))
    if not any(keep):
        return None
    lead, tail = limit * 3 // 4, limit // 4  # what a plain clip keeps, facts added between
    keep[:lead] = b"\x01" * lead
    keep[len(line) - tail :] = b"\x01" * tail
    gaps = [(m.start(), m.end()) for m in re.finditer(b"\x00{24,}", bytes(keep))]
    excess = len(line) - limit
    cut: list[tuple[int, int]] = []
    for a, b in sorted(gaps, key=lambda g: g[0] - g[1]):
        if excess <= 0:
            break
        x, y = line.find(" ", a, b), line.rfind(" ", a, b)  # at word boundaries when it can
        x, y = (x, y + 1) if 0 <= x < y - 16 else (a + 4, b - 4)
        cut.append((x, y))
        excess -= y - x - 16
    out, pos = [], 0
    for a, b in sorted(cut):
        out.append(line[pos:a])
        out.append(f" …[+{b - a} chars]… ")
        pos = b
    out.append(line[pos:])
    return "".join(out)


def counts(found: dict[str, set[str]], gone: dict[str, set[str]]) -> tuple[int, int]:
    """(facts found, facts kept) over all kinds."""
    total = sum(len(v) for v in found.values())
    return total, total - sum(len(v) for v in gone.values())
