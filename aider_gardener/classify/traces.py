"""Find tracebacks and stack traces, with exact line boundaries, anywhere in a text.

A trace must stay one segment (frames, exception line, ``Caused by`` chain) so the error
compressor sees all of it, and a log's single error lines must *not* become traces. So each format
needs its own notion of where a trace starts and ends: Python (normal, and with indentation stripped
as in Aider's ``> `` history copies), pytest failure sections, Java/JS/C# ``at`` frames under an
exception header, Chrome console frames (``fn @ file.js:1``), Go panics and Rust backtraces.

Candidates are found with whole-text regexes (C speed), so a big log without any trace costs a few
scans and no per-line Python work.
"""

from __future__ import annotations

import re

from .textlines import Lines

PY_HEADER = re.compile(r"^\s*(?:E\s+)?Traceback \(most recent call last\):?\s*$")
PY_FRAME = re.compile(r'^\s*File "[^"\n]+", line \d+')
PY_CHAIN = re.compile(
    r"^\s*(?:During handling of the above exception|The above exception was the direct cause)"
)
# Every pattern here is matched against lines of any length and must stay linear on a long run
# of one character: two quantifiers that can take the same characters ([\^~ ]*\s*, \s*>?\s*)
# make a run quadratic, so each is written so that only one of them can take a given character.
PY_MARKER = re.compile(r"^\s*[\^~][\^~ ]*(?:[^\S ]\s*)?$")
EXC_NAME = re.compile(r"^\s*(?:E\s+)?[A-Za-z_][\w.]*(?::(?:\s.*)?)?\s*$")
_EXC_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt)\b")
_JAVA_LOC = re.compile(
    r"\((?:[\w$.-]+\.(?:java|kt|scala|groovy)(?::\d+)?|Native Method|Unknown Source)\)"
)
_CSHARP_LOC = re.compile(r"\) in \S.*:line \d+|\.cs:line \d+")
AT_FRAME = re.compile(r"^\s+at \S")
AT_MORE = re.compile(r"^\s*(?:\.\.\. \d+ (?:more|common frames omitted)|Caused by: |Suppressed: )")
CODE_FRAME = re.compile(r"^\s*(?:>\s*)?\d+\s*\|")
CODE_CARET = re.compile(r"^\s*\|\s*[\^~]")
EXC_HEADER = re.compile(
    r"(?:^|[\s⨯:(\[])(?:[\w$]+\.)*[\w$]*(?:Error|Exception|Throwable)\b(?![.\w])"
    r"|^\s*(?:Error|Trace|Caused by|Exception in thread|Unhandled exception|Uncaught|panic)\b"
)
CHROME_FRAME = re.compile(r"^\s*\S[^@\n]{0,200} @ \S+:\d+(?::\d+)?\s*$|^\s*[\w.\-/]+\.m?js:\d+\s*$")
GO_PANIC = re.compile(r"^(?:panic: |goroutine \d+ \[)")
GO_FRAME = re.compile(
    r"^(?:\t|\s{2,}/|goroutine \d+ \[|[\w./*()\[\]{}-]+\(.*\)\s*$|created by |\s*\[recovered\])"
)
RUST_PANIC = re.compile(r"^thread '[^'\n]*' panicked at")
RUST_FRAME = re.compile(r"^\s+(?:\d+: |at )|^stack backtrace:|^note: ")

# Candidate finders. Each starts with a literal, which the regex engine scans for at C speed;
# one big ``^(?:a|b|c)`` alternation would be tried at every character of a multi-MB log.
_FINDERS = (
    re.compile(r"Traceback \(most recent call last\)"),
    re.compile(r'File "[^"\n]+", line \d+'),
    re.compile(r"\n[ \t]+at \S"),
    re.compile(r"panic: "),
    re.compile(r"goroutine \d+ \["),
    re.compile(r"' panicked at"),
)
_CHROME = re.compile(r" @ \S+:\d+(?::\d+)?[ \t]*\r?$", re.M)
_FAIL_BAR = re.compile(r"^=+ ?(?:FAILURES|ERRORS) ?=+[ \t]*\r?$")
_SECTION = re.compile(r"\n_{3,} [^\n]{1,300}? _{3,}[ \t]*\r?(?=\n|$)")
_BAR = re.compile(r"\n={5,}")

MIN_LINES = 3


def has_marker(text: str) -> bool:
    return bool(
        any(f.search(text) for f in _FINDERS)
        or bool(_fail_bars(text))
        or (" @ " in text and _CHROME.search(text))
    )


def _candidates(text: str) -> list[int]:
    """Line starts where a trace may begin (or continue), in order."""
    out = set()
    for f in _FINDERS:
        for m in f.finditer(text):
            pos = m.start() + 1 if text[m.start()] == "\n" else m.start()
            out.add(text.rfind("\n", 0, pos) + 1)
    if " @ " in text:
        for m in _CHROME.finditer(text):
            out.add(text.rfind("\n", 0, m.start()) + 1)
    return sorted(out)


def find_traces(text: str, lines: Lines | None = None) -> list[tuple[int, int, str]]:
    """Character spans ``(start, end, lang)`` of every trace, in order, not overlapping."""
    if not has_marker(text):
        return []
    L = lines or Lines(text)
    sections = _pytest_sections(text)  # sorted, disjoint
    found: list[tuple[int, int, str]] = []
    si = 0
    covered_to = -1
    for pos in _candidates(text):  # sorted
        while si < len(sections) and sections[si][1] <= pos:
            si += 1
        if pos < covered_to or (si < len(sections) and sections[si][0] <= pos):
            continue
        region = _region(L, L.index(pos))
        if region is None:
            continue
        a, b, lang = region
        start, end = L.span(a, b)
        if si < len(sections) and sections[si][0] < end:
            end = sections[si][0]  # stop where pytest's next failure section begins
            if end <= start:
                continue
        found.append((start, end, lang))
        covered_to = end
    found.extend(sections)
    found.sort()
    return found


def _region(L: Lines, k: int) -> tuple[int, int, str] | None:
    line = L.lines[k]
    if PY_HEADER.match(line) or PY_FRAME.match(line):
        r = _python(L, k)
        return (*r, "python") if r else None
    if AT_FRAME.match(line):
        r = _at_frames(L, k)
        return (*r, _at_lang(L.lines[k])) if r else None
    if GO_PANIC.match(line):
        r = _simple(L, k, GO_FRAME)
        return (*r, "go") if r else None
    if RUST_PANIC.match(line):
        r = _rust(L, k)
        return (*r, "rust") if r else None
    if CHROME_FRAME.match(line):
        r = _chrome(L, k)
        return (*r, "javascript") if r else None
    return None


def _at_lang(frame: str) -> str:
    """``at`` frames are shared by Java/Kotlin, C# and JavaScript; their locations differ."""
    if _JAVA_LOC.search(frame):
        return "java"
    if _CSHARP_LOC.search(frame):
        return "csharp"
    return "javascript"


def _indent(s: str) -> int:
    return len(s) - len(s.lstrip())


def _python(L: Lines, k: int) -> tuple[int, int] | None:
    lines, n = L.lines, len(L.lines)
    a = k
    if PY_FRAME.match(lines[k]):
        prev = lines[k - 1] if k else ""
        if prev.strip() and prev.rstrip().endswith(":") and not PY_FRAME.match(prev):
            a = k - 1  # "Traceback:" (pytest), "Unhandled exception in event loop:"
        i = k
    else:
        i = k + 1
    frames = 0
    last = i
    while i < n:
        s = lines[i]
        if PY_FRAME.match(s):
            frames += 1
            i += 1
            if i < n and _is_source(lines, i, _indent(s)):
                i += 1
            while i < n and PY_MARKER.match(lines[i]) and lines[i].strip():
                i += 1
            last = i
            continue
        if PY_HEADER.match(s) or PY_CHAIN.match(s):
            i += 1
            last = i
            continue
        if not s.strip():
            j = _next_nonblank(lines, i)
            if j < n and (PY_CHAIN.match(lines[j]) or PY_HEADER.match(lines[j])):
                i = j
                continue
            if frames and j < n and j - i <= 1 and _EXC_LINE.match(lines[j]):
                i = j  # prompt_toolkit & co. print a blank line before the exception
                continue
            break
        if not frames:
            break
        i += 1  # the exception line
        last = i
        while i < n and lines[i][:1] in (" ", "\t") and lines[i].strip() and i - last < 30:
            if PY_FRAME.match(lines[i]):
                break
            i += 1
            last = i
        j = _next_nonblank(lines, i)
        if j < n and (PY_CHAIN.match(lines[j]) or PY_HEADER.match(lines[j])):
            i = j
            continue
        break
    if not frames or last - a < MIN_LINES:
        return None
    return a, last


def _is_source(lines: list[str], i: int, frame_indent: int) -> bool:
    """Is the line after a ``File "…", line N`` frame its source line (not the exception)?"""
    s = lines[i]
    if not s.strip() or PY_FRAME.match(s) or PY_HEADER.match(s) or PY_CHAIN.match(s):
        return False
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    if PY_FRAME.match(nxt) or (PY_MARKER.match(nxt) and nxt.strip()):
        return True
    if _indent(s) > frame_indent:
        return True
    return not EXC_NAME.match(s)


def _next_nonblank(lines: list[str], i: int) -> int:
    n = len(lines)
    while i < n and not lines[i].strip():
        i += 1
    return i


def _at_frames(L: Lines, k: int) -> tuple[int, int] | None:
    """``at`` frames count only directly under an exception header: jest prints ``at`` lines
    under every console.log (after a blank line), and those are log, not traces."""
    lines, n = L.lines, len(L.lines)
    if k > 0 and AT_FRAME.match(lines[k - 1]):
        return None  # candidates come in order: this run's first frame was already judged
    f = k
    head = None
    j = f - 1
    while j >= 0 and f - j <= 4 and lines[j].strip() and not AT_FRAME.match(lines[j]):
        if EXC_HEADER.search(lines[j]):
            head = j
        j -= 1
    if head is None:
        return None
    i = k
    while i < n:
        s = lines[i]
        if AT_FRAME.match(s) or AT_MORE.match(s) or CODE_FRAME.match(s) or CODE_CARET.match(s):
            i += 1
            continue
        if (
            s.strip()
            and i > 0
            and AT_MORE.match(lines[i - 1])
            and lines[i - 1].lstrip().startswith(("Caused by", "Suppressed"))
        ):
            i += 1  # message line under "Caused by:"
            continue
        j = _next_nonblank(lines, i)
        if j > i and j < n and (CODE_FRAME.match(lines[j]) or AT_FRAME.match(lines[j])):
            i = j
            continue
        break
    if i - head < 2:
        return None
    return head, i


def _chrome(L: Lines, k: int) -> tuple[int, int] | None:
    lines, n = L.lines, len(L.lines)
    i, frames, last, gap = k, 0, k, 0
    while i < n:
        s = lines[i]
        if CHROME_FRAME.match(s):
            frames += 1
            last = i + 1
            gap = 0
        elif s.strip():
            gap += 1
            if gap > 1:
                break
        i += 1
    a = k
    j = k - 1
    while j >= 0 and not lines[j].strip() and k - j < 3:
        j -= 1
    if j >= 0 and lines[j].strip() and not CHROME_FRAME.match(lines[j]):
        a = j
    if frames < 3:
        return None
    return a, last


def _simple(L: Lines, k: int, frame: re.Pattern[str]) -> tuple[int, int] | None:
    lines, n = L.lines, len(L.lines)
    i = k + 1
    last = i
    while i < n:
        s = lines[i]
        if frame.match(s) or GO_PANIC.match(s):
            i += 1
            last = i
            continue
        if not s.strip():
            j = _next_nonblank(lines, i)
            if j < n and (GO_PANIC.match(lines[j]) or lines[j].startswith("goroutine ")):
                i = j
                continue
        break
    return (k, last) if last - k >= MIN_LINES else None


def _rust(L: Lines, k: int) -> tuple[int, int] | None:
    lines, n = L.lines, len(L.lines)
    j = k + 1
    while j < n and j - k <= 3 and not lines[j].startswith("stack backtrace:"):
        j += 1
    if j >= n or not lines[j].startswith("stack backtrace:"):
        return None
    i = j + 1
    while i < n and RUST_FRAME.match(lines[i]):
        i += 1
    return (k, i) if i - k >= MIN_LINES else None


def _fail_bars(text: str) -> list[int]:
    """Ends of pytest's ``==== FAILURES ====`` / ``==== ERRORS ====`` bar lines."""
    out = []
    for word in (" FAILURES ", " ERRORS "):
        pos = text.find(word)
        while pos >= 0:
            a = text.rfind("\n", 0, pos) + 1
            b = text.find("\n", pos)
            b = len(text) if b < 0 else b
            if _FAIL_BAR.match(text[a:b]):
                out.append(b)
            pos = text.find(word, b)
    return sorted(out)


def _pytest_sections(text: str) -> list[tuple[int, int, str]]:
    """Each ``____ test_x ____`` section after a FAILURES/ERRORS bar, up to the next section or
    ``====`` bar: pytest's rendering of one failure's traceback (source, ``E`` lines, location)."""
    out: list[tuple[int, int, str]] = []
    for bar_end in _fail_bars(text):
        nxt = _BAR.search(text, bar_end)
        stop = nxt.start() + 1 if nxt else len(text)
        heads = [m.start() + 1 for m in _SECTION.finditer(text, bar_end, stop)]
        for a, b in zip(heads, heads[1:] + [stop]):
            out.append((a, b, "python"))
    return out
