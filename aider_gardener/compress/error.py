"""Error compressor: a stack trace keeps what explains the failure; library frames fold away.

The value of a trace is the exception (type, every message line, the whole cause chain) and the
frames in the project's own code, because that is where the fix goes. Frames inside
site-packages, node_modules, the JDK, the Go runtime or Rust's std are long, repetitive and rarely
actionable, so each run of them becomes one line that still says where it went (``… 6 frames in
site-packages (click, piptools) …``). Errors are high-value context, so nothing else is dropped: a
trace with few library frames comes out nearly unchanged. Exceptions: a Python traceback's
innermost frame is kept even in a library (its ``raise`` often says more than the message), and
pytest's long format keeps a failing test's signature and the lines leading to its ``>`` line.

Frames recognised: Python, pytest, Java/Kotlin/C#, Node, Go and Rust; identical frames repeating
in a cycle (deep recursion) fold as well.

Decision record: docs/decisions/011-stack-trace-compression.md
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import cached_property

from .. import critical
from ..types import Compressed, CompressOptions
from .base import clip_line

# Lines longer than this are never frames, only clipped text. Keeping the limit for frame
# matching equal to the clip limit makes clipping unable to turn a line into a frame on a second
# pass (a clipped line is longer than the limit), which is what keeps the compressor idempotent.
PLAIN_LINE_CHARS = 1000
SOURCE_LINE_CHARS = 400
CARET_MAX_CHARS = 16
PYTEST_SOURCE_KEEP = 3  # source lines kept right above pytest's ``>`` line
PYTEST_SOURCE_MIN = 6  # shorter listings are left alone
PYTEST_ENTRY_MAX = 400  # lines searched around a ">" line for its entry's bounds
MAX_CYCLE = 4  # longest repeating frame cycle folded (mutual recursion)
MIN_REPEATS = 3

_CLIPPED = re.compile(r" …\[\+\d+ chars\]… ")
_QUOTE = re.compile(r"^(> ?)")  # Aider's chat history prefixes tool output with "> "
# Patterns run on lines of any length: none may backtrack more than linearly on a long run of one
# character (tests/compress/test_error.py feeds each one such runs). "Only these characters, and
# a caret" is a lookahead and one pass; [\s~^]*\^[\s~^]*$ is quadratic in "^^^…^x".
_CARET = re.compile(r"^(?=[\s~^]*$)[\s~]*\^")
_BLANK = re.compile(r"^\s*$")

_PY_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>.+?))?\s*$')
_PYTEST_SHORT = re.compile(
    r"^(?P<path>(?:[A-Za-z]:)?[^\s:][^:]*):(?P<line>\d+): in (?P<fn>\S+)\s*$"
)
_PYTEST_LOC = re.compile(r"^(?P<path>(?:[A-Za-z]:)?[^\s:][^:]*\.py):(?P<line>\d+):(?: [\w.]*)?\s*$")
# "===(?=.*===)", not "={3,}.*={3,}", which is cubic in a long row of "=" that ends otherwise
_PYTEST_SEP = re.compile(r"^(?:_ ){3,}_?\s*$|^_{3,} .* _{3,}\s*$|^===(?=.*===\s*$)")
_PYTEST_FAIL_LINE = re.compile(r"^>\s{3}")
_PYTEST_E = re.compile(r"^E(?:\s|$)")
_PYTEST_PARAM = re.compile(r"^[A-Za-z_]\w* = ")
_SOURCE_DEF = re.compile(r"^\s*(?:async\s+def|def|class)\b")
_SHORT_SEPARATOR = "_ _ _ _ _"
_LONG_SEPARATOR = re.compile(r"^(?:_ ){5,}_?\s*$")
_REPR = r"<(?:[^<>\n]|<[^<>\n]*>)*? at 0x[0-9a-fA-F]+>"
_ADDRESS_ARGS = re.compile(rf"^[A-Za-z_]\w* = {_REPR}(?:, [A-Za-z_]\w* = {_REPR})*\s*$")
# jest/babel: "    > 36 |   code", "      37 |"; \s*>?\s* is quadratic in a line of spaces
_CODE_FRAME = re.compile(r"^\s*(?:>\s*)?\d+ \|")
_CODE_FRAME_FAIL = re.compile(r"^\s*>\s*\d+ \|")
_CODE_FRAME_CARET = re.compile(r"^\s+\|[\s^~]*$")
CODE_FRAME_MIN = 3  # shorter frames are left alone
_PATH_REF = re.compile(r"[\w.-]\.[A-Za-z]{1,5}[:(]\d")
_EXC_LIKE = re.compile(r"^[A-Za-z_][\w.]*(?::\s.*|:)?$")
_PY_KEYWORDS = frozenset(
    "return pass break continue raise yield else try finally None True False".split()
)

_AT = re.compile(r"^(?P<indent>\s+|\s*\[\w+\]\s+)at (?P<body>\S.*?)\s*$")
_AT_QUOTED = re.compile(r"^\s*at (?P<body>\S.*?)\s*$")
_CSHARP_LOC = re.compile(r"\) in (?P<path>.+):line (?P<line>\d+)$")
_JS_PAREN = re.compile(r"^(?P<fn>.+?) \((?P<loc>[^()]+)\)$")
_JS_LOC = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+)$")
_JS_BUILTIN_LOC = re.compile(r"^(?:<anonymous>|native|index \d+)$")
_JAVA = re.compile(r"^(?P<fn>[\w$.<>/`\[\],+-]+\.[\w$<>`\[\],+-]+)\((?P<loc>[^()]*)\)$")

_FRAME_CUES = ('File "', ": in ", "at ", ".go:", ".s:")
_GO_FILE = re.compile(r"^\s+(?P<path>\S+\.(?:go|s)):(?P<line>\d+)(?: \+0x[0-9a-f]+)?\s*$")
_GO_HEADER = re.compile(r"^goroutine \d+ \[")
_RUST_START = re.compile(r"^\s*stack backtrace:\s*$")
_RUST_FRAME = re.compile(r"^\s*\d+:\s+(?P<fn>\S.*?)\s*$")
_RUST_AT = re.compile(r"^\s+at (?P<path>.+?):(?P<line>\d+)(?::\d+)?\s*$")
_RUST_STD_FN = re.compile(
    r"^(?:<?(?:std|core|alloc|test|panic_unwind|backtrace)::|rust_begin_unwind|rust_panic|__rust|"
    r"__libc_start|_start$|__scrt_common_main|BaseThreadInitThunk|RtlUserThreadStart|"
    r"start_thread|clone3?$|__clone|<unknown>)"
)

# (pattern on the slash-normalised path, place, group naming the package or None)
_PATH_RULES: list[tuple[re.Pattern[str], str, int | None]] = [
    (re.compile(r"/site-packages/(?:[^/]+\.egg/)?([^/]+)"), "site-packages", 1),
    (re.compile(r"/dist-packages/([^/]+)"), "dist-packages", 1),
    (re.compile(r".*(?:^|/)node_modules/((?:@[^/]+/)?[^/]+)"), "node_modules", 1),
    (re.compile(r"^<frozen ([\w]+)"), "stdlib", 1),
    (re.compile(r"/lib/python\d(?:\.\d+)?t?/([^/]+)", re.I), "stdlib", 1),
    (re.compile(r"/python\d+/lib/([^/]+)", re.I), "stdlib", 1),
    (re.compile(r"/(?:\.?venv|\.tox|\.nox|\.?virtualenvs?)/"), "venv", None),
    (re.compile(r"(?:^|/)pkg/mod/(?:.*/)?([^/@]+)@"), "Go modules", 1),
    (re.compile(r"(?:^|/)[\w.-]+/[\w.-]+@v\d[^/]*/"), "Go modules", None),
    (re.compile(r"/(?:go|goroot|go-?[\d.]+|golang)/src/runtime/", re.I), "Go runtime", None),
    (re.compile(r"/(?:go|goroot|go-?[\d.]+|golang)/src/([^/]+)/", re.I), "Go stdlib", 1),
    (re.compile(r"^(?:runtime|testing)/[\w/]+\.go$"), "Go runtime", None),
    (re.compile(r"^/rustc/[0-9a-f]+/library/"), "Rust std", None),
    (re.compile(r"/\.cargo/registry/src/[^/]+/([A-Za-z][\w-]*?)-\d"), "crates", 1),
    (re.compile(r"^node:|^internal/"), "node internals", None),
]

_NODE_BUILTINS = frozenset(
    "assert async_hooks buffer child_process cluster console crypto dgram dns domain events fs "
    "http http2 https inspector module net os path perf_hooks process punycode querystring "
    "readline repl stream string_decoder timers tls tty url util v8 vm worker_threads zlib "
    "bootstrap_node loader".split()
)

# Java/Kotlin/Scala/C# frames carry a qualified name, not a path: the package says whose it is.
_JVM_PREFIXES = (
    "java.",
    "javax.",
    "jdk.",
    "sun.",
    "com.sun.",
    "kotlin.",
    "kotlinx.",
    "scala.",
    "org.junit.",
    "junit.",
    "org.testng.",
    "org.apache.maven.",
    "org.apache.",
    "org.springframework.",
    "org.hibernate.",
    "org.gradle.",
    "worker.org.gradle.",
    "org.eclipse.",
    "org.mockito.",
    "net.bytebuddy.",
    "io.netty.",
    "io.cucumber.",
    "cucumber.",
    "reactor.",
    "io.reactivex.",
    "akka.",
    "com.google.common.",
    "com.fasterxml.",
    "okhttp3.",
    "android.",
    "androidx.",
    "dalvik.",
    "com.android.",
    "System.",
    "Microsoft.",
    "Xunit.",
    "NUnit.",
)


@dataclass
class _Frame:
    lines: list[str]
    place: str | None  # None: the project's own code
    pkg: str | None = None
    python: bool = False  # Python/pytest: innermost frame is last, and shows the raise
    caret_lines: set[int] = field(default_factory=set)
    source_lines: set[int] = field(default_factory=set)

    @cached_property
    def key(self) -> str:
        """What the frame looks like once rendered, so a second pass sees the same repeats."""
        return "\n".join(x.strip() for x in _render_frame(self))


Item = str | _Frame


def compress_error(text: str, opts: CompressOptions) -> Compressed:
    lines = text.split("\n")
    lines, pytest_cut = _trim_pytest_entries(lines, opts.project_root)
    lines, noise_cut = _drop_noise(lines)
    items = _parse(lines, opts.project_root)
    if opts.hot:
        _keep_hot(items, opts.hot)
    items, repeated = _fold_cycles(items)
    out, frames, collapsed = _render(items)
    result = "\n".join(out)
    counts = {
        "lines": len(text.splitlines()),
        "frames": frames,
        "frames_collapsed": collapsed,
        "frames_repeated": repeated,
        "pytest_lines_cut": pytest_cut,
        "noise_lines_cut": noise_cut,
    }
    if len(result) >= len(text):
        return Compressed(text, counts)
    counts["lines_out"] = len(result.splitlines())
    return Compressed(result, counts)


def _keep_hot(items: list[Item], hot: frozenset[str]) -> None:
    """A library frame naming something the user is working on is kept like the project's."""
    words = sorted((h for h in hot if h.strip()), key=len, reverse=True)
    if not words:
        return
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(w.strip()) for w in words) + r")(?!\w)")
    for item in items:
        if isinstance(item, _Frame) and item.place and any(pattern.search(x) for x in item.lines):
            item.place = None


# --- classification -------------------------------------------------------------------------


def _norm_path(path: str) -> str:
    path = path.strip().replace("\\", "/")
    if path.startswith("file://"):
        path = path[len("file://") :]
        if re.match(r"^/[A-Za-z]:/", path):
            path = path[1:]
    return path


def _is_absolute(path: str) -> bool:
    return path.startswith("/") or bool(re.match(r"^[A-Za-z]:/", path))


def _classify_path(path: str, root: str | None) -> tuple[str | None, str | None]:
    """(place, package) for a library frame, (None, None) for the project's own code."""
    norm = _norm_path(path)
    for pattern, place, group in _PATH_RULES:
        m = pattern.search(norm)
        if m:
            pkg = m.group(group) if group else None
            if pkg and place in ("site-packages", "dist-packages", "stdlib"):
                pkg = re.sub(r"\.(?:py|pyc|so|pyd)$|-[\d.]+.*$", "", pkg)
            return place, pkg or None
    if root and _is_absolute(norm):
        base = _norm_path(root).rstrip("/") + "/"
        if not norm.lower().startswith(base.lower()):
            return "outside project", None
    return None, None


def _classify_jvm(name: str) -> str | None:
    name = re.sub(r"^[\w.-]+/", "", name)  # Java 9 module prefix: java.base/java.lang.Thread
    for prefix in _JVM_PREFIXES:
        if name.startswith(prefix):
            return prefix + "*"
    return None


def _classify_js(loc: str, root: str | None) -> tuple[str | None, str | None]:
    if _JS_BUILTIN_LOC.match(loc):
        return "node internals", None
    m = _JS_LOC.match(loc)
    path = m.group("path") if m else loc
    place, pkg = _classify_path(path, root)
    if place:
        return place, pkg
    bare = _norm_path(path)
    if "/" not in bare and bare.endswith(".js") and bare[:-3].lstrip("_") in _NODE_BUILTINS:
        return "node internals", None
    if bare.startswith("_stream_") or bare.startswith("_http_"):
        return "node internals", None
    return None, None


# --- pytest long format ---------------------------------------------------------------------


def _trim_pytest_entries(lines: list[str], root: str | None) -> tuple[list[str], int]:
    """Shorten pytest's long-format entries.

    What is kept: docs/decisions/011-stack-trace-compression.md."""
    fail_idx = [i for i, x in enumerate(lines) if _PYTEST_FAIL_LINE.match(x)]
    if not fail_idx:
        return lines, 0
    drop: set[int] = set()
    insert: dict[int, str] = {}
    bounds = [i for i, x in enumerate(lines) if _is_pytest_boundary(x)]
    e_lines = [i for i, x in enumerate(lines) if _PYTEST_E.match(x)]
    for g in fail_idx:
        b = bisect.bisect_left(bounds, g)
        start = max(bounds[b - 1] + 1 if b else 0, g - PYTEST_ENTRY_MAX)
        end = min(bounds[b] if b < len(bounds) else len(lines), g + PYTEST_ENTRY_MAX)
        loc = lines[end] if end < len(lines) else ""
        m = _PYTEST_LOC.match(loc)
        e = bisect.bisect_right(e_lines, g)
        if not m and not (e < len(e_lines) and e_lines[e] < end):
            continue  # a ">" line that is not pytest's failing-line marker
        place, pkg = _classify_path(m.group("path"), root) if m else (None, None)
        if place:
            body = [
                i
                for i in range(start, end)
                if not _PYTEST_E.match(lines[i]) and not _BLANK.match(lines[i])
            ]
            if any(_is_marker(lines[i]) for i in body):
                continue  # already trimmed
            if body:
                drop.update(body)
                where = f"{place}: {pkg}" if pkg else place
                insert[body[0]] = f"… {len(body)} lines of library source omitted ({where}) …"
            continue
        drop.update(
            i
            for i in range(g + 1, end)
            if _CARET.match(lines[i]) and len(lines[i].strip()) > CARET_MAX_CHARS
        )
        src_start = g
        while src_start > start and (
            lines[src_start - 1].startswith("    ") or _BLANK.match(lines[src_start - 1])
        ):
            src_start -= 1
        while src_start < g and _BLANK.match(lines[src_start]):
            src_start += 1
        region = list(range(src_start, g))
        if len(region) <= PYTEST_SOURCE_MIN or any(_is_marker(lines[k]) for k in region):
            continue
        head = region[: len(region) - PYTEST_SOURCE_KEEP]
        signature = next((k for k in head if _SOURCE_DEF.match(lines[k])), None)
        # the signature and any line citing a path:line stay; runs between them are cut
        keep = {k for k in head if k == signature or _PATH_REF.search(lines[k])}
        run: list[int] = []
        for k in head + [-1]:
            if k != -1 and k not in keep:
                run.append(k)
                continue
            if len(run) >= 2:  # a run of one line is cheaper kept than replaced
                drop.update(run)
                insert[run[0]] = f"    … {len(run)} source lines …"
            run = []
    if not drop:
        return lines, 0
    out = []
    for i, line in enumerate(lines):
        if i in insert:
            out.append(insert[i])
        if i not in drop:
            out.append(line)
    return out, len(drop)


# --- noise that says nothing the rest of the entry does not -----------------------------------


def _drop_noise(lines: list[str]) -> tuple[list[str], int]:
    """Shorten or drop three kinds of line that carry no fact, only bulk: pytest's 80-character
    frame separator ``_ _ _ …`` (a short one still reads as a separator on a second pass), a
    pytest argument line whose every value is a default repr with an address (the header
    already names the type; the address changes every run), and the lines around a jest/babel
    code frame's ``>`` line (the stack's first own frame gives line and column)."""
    out: list[str] = []
    cut = 0
    n = len(lines)
    i = 0
    while i < n:
        line = lines[i]
        if len(line) > len(_SHORT_SEPARATOR) and _LONG_SEPARATOR.match(line):
            out.append(_SHORT_SEPARATOR)
            cut += 1
            i += 1
            continue
        if line[:1].isalpha() and " at 0x" in line and _ADDRESS_ARGS.match(line):
            cut += 1
            i += 1
            if out and not out[-1].strip() and i < n and not lines[i].strip():
                cut += 1  # the blank lines around it would now stand two in a row
                i += 1
            continue
        if _CODE_FRAME.match(line):
            j = i
            while j < n and (_CODE_FRAME.match(lines[j]) or _CODE_FRAME_CARET.match(lines[j])):
                j += 1
            failing = [k for k in range(i, j) if _CODE_FRAME_FAIL.match(lines[k])]
            if failing and j - i >= CODE_FRAME_MIN:
                out.extend(lines[k] for k in failing)
                cut += j - i - len(failing)
            else:
                out.extend(lines[i:j])
            i = j
            continue
        out.append(line)
        i += 1
    return (out, cut) if cut else (lines, 0)


def _is_marker(line: str) -> bool:
    return line.lstrip().startswith("… ")


def _is_pytest_boundary(line: str) -> bool:
    return bool(_PYTEST_SEP.match(line) or _PYTEST_LOC.match(line))


# --- parsing --------------------------------------------------------------------------------


def _split_quote(line: str) -> tuple[str, str, bool]:
    """(prefix, body, quoted): Aider's history quotes tool output with "> " and drops indents."""
    m = _QUOTE.match(line)
    if m and not _PYTEST_FAIL_LINE.match(line):
        return m.group(1), line[m.end() :].rstrip(), True
    return "", line.rstrip(), False


def _indent(s: str) -> int:
    return len(s) - len(s.lstrip())


def _parse(lines: list[str], root: str | None) -> list[Item]:
    items: list[Item] = []
    i = 0
    n = len(lines)
    in_rust = False  # below "stack backtrace:", where "  3: name" lines are frames
    while i < n:
        line = lines[i]
        if len(line) <= PLAIN_LINE_CHARS:
            _, body, quoted = _split_quote(line)
            frame, used = _match_frame(lines, i, body, quoted, root, in_rust)
            if frame is not None:
                items.append(frame)
                i += used
                continue
            in_rust = bool(_RUST_START.match(body))
        else:
            in_rust = False
        items.append(line)
        i += 1
    return items


def _match_frame(
    lines: list[str], i: int, body: str, quoted: bool, root: str | None, in_rust: bool
) -> tuple[_Frame | None, int]:
    if in_rust:
        r = _RUST_FRAME.match(body)
        if r:
            return _rust_frame(lines, i, r.group("fn"), root)
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    if not any(cue in body for cue in _FRAME_CUES) and ".go:" not in nxt and ".s:" not in nxt:
        return None, 0  # the common case, decided without running every pattern
    m = _PY_FRAME.match(body)
    if m:
        place, pkg = _classify_path(m.group("path"), root)
        return _python_frame(lines, i, body, quoted, place, pkg)
    m = _PYTEST_SHORT.match(body)
    if m and not body[:1].isspace():
        place, pkg = _classify_path(m.group("path"), root)
        return _python_frame(lines, i, body, quoted, place, pkg)
    m = (_AT_QUOTED if quoted else _AT).match(body)
    if m:
        frame = _at_frame(lines[i], m.group("body"), root)
        if frame is not None:
            return frame, 1
    if i + 1 < len(lines) and body.strip() and not _GO_HEADER.match(body):
        nxt = lines[i + 1]
        g = _GO_FILE.match(_split_quote(nxt)[1]) if len(nxt) <= PLAIN_LINE_CHARS else None
        if g and not _GO_FILE.match(body):
            place, pkg = _classify_path(g.group("path"), root)
            return _Frame([lines[i], nxt], place, pkg), 2
    g = _GO_FILE.match(body)
    if g:
        place, pkg = _classify_path(g.group("path"), root)
        return _Frame([lines[i]], place, pkg), 1
    return None, 0


def _rust_frame(lines: list[str], i: int, fn: str, root: str | None) -> tuple[_Frame, int]:
    taken = [lines[i]]
    place: str | None = None
    pkg: str | None = None
    if i + 1 < len(lines) and len(lines[i + 1]) <= PLAIN_LINE_CHARS:
        at = _RUST_AT.match(_split_quote(lines[i + 1])[1])
        if at:
            taken.append(lines[i + 1])
            place, pkg = _classify_path(at.group("path"), root)
    if place is None and _RUST_STD_FN.match(fn):
        place = "Rust std"
        pkg = None
    return _Frame(taken, place, pkg), len(taken)


def _python_frame(
    lines: list[str],
    i: int,
    body: str,
    quoted: bool,
    place: str | None,
    pkg: str | None,
) -> tuple[_Frame, int]:
    """A frame line plus the source (and caret) lines Python or pytest prints under it."""
    frame = _Frame([lines[i]], place, pkg, python=True)
    base = _indent(body)
    j = i + 1
    took_source = False
    while j < len(lines) and len(lines[j]) <= PLAIN_LINE_CHARS:
        nb = _split_quote(lines[j])[1]
        if not nb.strip() or _PY_FRAME.match(nb) or _PYTEST_SHORT.match(nb):
            break
        if _PYTEST_E.match(nb):
            break
        if _CARET.match(nb):
            frame.caret_lines.add(len(frame.lines))
        elif quoted:
            # no indentation to go by: one source line, never one that looks like the exception
            if took_source or _looks_like_exception(nb):
                break
            frame.source_lines.add(len(frame.lines))
            took_source = True
        elif _indent(nb) > base:
            frame.source_lines.add(len(frame.lines))
            took_source = True
        else:
            break
        frame.lines.append(lines[j])
        j += 1
    return frame, j - i


def _looks_like_exception(body: str) -> bool:
    s = body.strip()
    return bool(_EXC_LIKE.match(s)) and s.split(":")[0] not in _PY_KEYWORDS


def _at_frame(line: str, body: str, root: str | None) -> _Frame | None:
    cs = _CSHARP_LOC.search(body)
    if cs:
        fn = body[: body.find("(")] if "(" in body else body
        place = _classify_jvm(fn)
        pkg = None
        if place is None:
            place, pkg = _classify_path(cs.group("path"), root)
        return _Frame([line], place, pkg)
    m = _JS_PAREN.match(body)
    if m and (_JS_LOC.match(m.group("loc")) or _JS_BUILTIN_LOC.match(m.group("loc"))):
        place, pkg = _classify_js(m.group("loc"), root)
        return _Frame([line], place, pkg)
    if _JS_LOC.match(body) and " " not in body.strip():
        place, pkg = _classify_js(body, root)
        return _Frame([line], place, pkg)
    m = _JAVA.match(body)
    if m:
        place = _classify_jvm(m.group("fn"))
        pkg = None
        loc = m.group("loc")
        if place is None and loc.startswith("file:"):
            place, pkg = _classify_path(loc.rsplit(":", 1)[0], root)
        return _Frame([line], place, pkg)
    return None


# --- folding --------------------------------------------------------------------------------


def _fold_cycles(items: list[Item]) -> tuple[list[Item], int]:
    """Deep recursion prints the same frames hundreds of times; keep one cycle and a count."""
    out: list[Item] = []
    folded = 0
    i = 0
    n = len(items)
    while i < n:
        item = items[i]
        if not isinstance(item, _Frame):
            out.append(item)
            i += 1
            continue
        best: tuple[int, int] | None = None
        for p in range(1, MAX_CYCLE + 1):
            reps = _repeats(items, i, p)
            if reps >= MIN_REPEATS and (best is None or reps * p > best[0] * best[1]):
                best = (reps, p)
        if best is None:
            out.append(item)
            i += 1
            continue
        reps, p = best
        out.extend(items[i : i + p])
        prefix = _prefix(item.lines[0])
        what = "previous frame" if p == 1 else f"previous {p} frames"
        out.append(f"{prefix}… {what} repeated {reps - 1} more times …")
        folded += (reps - 1) * p
        i += reps * p
    return out, folded


def _repeats(items: list[Item], i: int, p: int) -> int:
    if i + p > len(items) or not all(isinstance(x, _Frame) for x in items[i : i + p]):
        return 0
    keys = [x.key for x in items[i : i + p]]  # type: ignore[union-attr]
    reps = 1
    j = i + p
    while j + p <= len(items):
        chunk = items[j : j + p]
        if not all(isinstance(x, _Frame) and x.key == k for x, k in zip(chunk, keys)):
            break
        reps += 1
        j += p
    return reps


# --- rendering ------------------------------------------------------------------------------


def _prefix(line: str) -> str:
    m = re.match(r"^(?:> ?)?[ \t]*", line)
    return m.group(0) if m else ""


def _clip(line: str, limit: int) -> str:
    if len(line) <= limit or _CLIPPED.search(line):
        return line
    return clip_line(line, limit)


def _render(items: list[Item]) -> tuple[list[str], int, int]:
    out: list[str] = []
    frames = sum(1 for x in items if isinstance(x, _Frame))
    collapsed = 0
    i = 0
    n = len(items)
    while i < n:
        item = items[i]
        if not isinstance(item, _Frame):
            out.append(_clip(item, PLAIN_LINE_CHARS))
            i += 1
            continue
        if item.place is None:
            out.extend(_render_frame(item))
            i += 1
            continue
        j = i
        while j < n and isinstance(nxt := items[j], _Frame) and nxt.place is not None:
            j += 1
        run: list[_Frame] = items[i:j]  # type: ignore[assignment]
        keep_last = run[-1].python and (j >= n or not isinstance(items[j], _Frame))
        if keep_last:
            run = run[:-1]
        if run:
            marker = _prefix(run[0].lines[0]) + _marker(run)
            if len(marker) < sum(len(x) + 1 for f in run for x in f.lines):
                out.append(marker)
                collapsed += len(run)
            else:
                for f in run:
                    out.extend(_render_frame(f))
        if keep_last:
            out.extend(_render_frame(items[j - 1]))  # type: ignore[arg-type]
        i = j
    return out, frames, collapsed


def _render_frame(frame: _Frame) -> list[str]:
    out = []
    for k, line in enumerate(frame.lines):
        if k in frame.caret_lines and len(line.strip().lstrip(">").strip()) > CARET_MAX_CHARS:
            continue
        out.append(_clip(line, SOURCE_LINE_CHARS) if k in frame.source_lines else line)
    return out


def _marker(run: list[_Frame]) -> str:
    places: dict[str, list[str]] = {}
    for f in run:
        pkgs = places.setdefault(f.place or "", [])
        if f.pkg and f.pkg not in pkgs:
            pkgs.append(f.pkg)
    parts = []
    for place, pkgs in list(places.items())[:3]:
        shown = ", ".join(pkgs[:3]) + (", …" if len(pkgs) > 3 else "")
        parts.append(f"{place} ({shown})" if shown else place)
    if len(places) > 3:
        parts.append("…")
    noun = "frame" if len(run) == 1 else "frames"
    # every distinct frame location stays (a critical fact, ``critical.frames``), compactly
    locs: dict[str, None] = {}
    for f in run:
        locs.update(dict.fromkeys(sorted(critical.frames("\n".join(f.lines)))))
    at = f": {' '.join(locs)}" if locs else ""
    return f"… {len(run)} {noun} in {', '.join(parts)}{at} …"
