"""Pattern functions that read facts out of one message: errors, decisions, follow-ups, edits.

No state and no LLM: each function looks at one text and returns what it can prove from it.
The tracker (``tracker.py``) decides what the findings mean across turns.

Precision over recall. A state block that claims a decision the user never made, or an error
that never happened, misleads the model on every later turn; a missed one only leaves the
fact to the compressed history. So decisions need explicit phrasing at the start of a sentence
(or ``use X instead of Y``), questions never count, code and edit blocks are never read as
prose, and error lines must have a recognisable shape (a test id, ``Type: message`` at the start
of a line, a compiler diagnostic with its location).

Bounded work: a command can print 100 MB. Only a head and a tail window of ``WINDOW``
characters are scanned, because test runners and compilers put their summaries at the end and
crashes stop output at the point of failure.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from .. import critical
from ..compress.base import strip_ansi
from ..compress.testrun import detect_runner, parse_test_run, split_output
from .facts import LINE_MAX, LISTING_KINDS, ErrorSig, clip  # noqa: F401  (callers use extract.X)

WINDOW = 256 * 1024  # characters scanned at each end of a long output
MAX_ERRORS = 12  # signatures per output: the first ones matter, the rest are usually fallout
MAX_PROSE = 32 * 1024  # characters of prose read for decisions (the rest is a paste)
MAX_DECISIONS = 8  # per message
MAX_MESSAGE = 1 << 20  # characters of a prompt or reply read for decisions and verdicts


# --------------------------------------------------------------------------- shared helpers


def window(text: str, size: int = WINDOW) -> str:
    """The head and tail ``size`` characters of a long text, cut at line boundaries."""
    if len(text) <= 2 * size:
        return text
    head = text[:size]
    cut = head.rfind("\n")
    head = head[:cut] if cut > size // 2 else head
    tail = text[-size:]
    cut = tail.find("\n")
    tail = tail[cut + 1 :] if 0 <= cut < size // 2 else tail
    return head + "\n" + tail


_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")
_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_LONG_HEX = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b")
_TEMP = re.compile(
    r"(?:/private)?/var/folders/[^\s'\":,)\]]*|/(?:var/)?tmp/[^\s'\":,)\]]*"
    r"|[A-Za-z]:[\\/]Users[\\/][^\\/\s]+[\\/]AppData[\\/]Local[\\/]Temp[^\s'\":,)\]]*",
    re.IGNORECASE,
)
_STAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
)
_DURATION = re.compile(
    r"\b\d+(?:\.\d+)?\s?(?:ms|µs|us|ns|s|sec|secs|seconds?|minutes?|m)\b(?![\w.])"
)
_LOCATION = re.compile(r"(\.\w{1,8})(?::\d+(?::\d+)?|\(\d+,\d+\)|:\[\d+,\d+\])")
_LINE_WORD = re.compile(r"\bline \d+\b")
_PID = re.compile(r"\b(pid|port|thread|process)[ =:#]?\d+\b", re.IGNORECASE)


def signature(text: str) -> str:
    """A key that stays the same when the same failure happens again: memory addresses, ids,
    temp paths, timestamps, durations and line numbers (an edit above the failure shifts them)
    are blanked; test ids, exception types, messages and error codes are kept."""
    s = _LOCATION.sub(r"\1", text)
    s = _TEMP.sub("<tmp>", s)
    s = _UUID.sub("<id>", s)
    s = _ADDRESS.sub("0x?", s)
    s = _LONG_HEX.sub("<hex>", s)
    s = _STAMP.sub("<time>", s)
    s = _LINE_WORD.sub("line ?", s)
    s = _DURATION.sub("<t>", s)
    s = _PID.sub(r"\1 ?", s)
    return " ".join(s.split())[:300]


# --------------------------------------------------------------------------- errors

# Each error shape is a pattern for one whole line plus a literal "hint" that every such line
# contains. The hint is found at C speed (a literal or an alternation of literals); only the
# lines holding one are matched, so a 500 kB log costs a few scans and no per-line Python.
_TSC = re.compile(
    r"(?P<path>[^\s(:][^(\n]*?)\((?P<ln>\d+),\d+\): error (?P<code>TS\d+): (?P<msg>.*)"
    r"|(?P<path2>[^\s:][^:\n]*?):(?P<ln2>\d+):\d+ - error (?P<code2>TS\d+): (?P<msg2>.*)"
)
_GCC = re.compile(
    r"(?P<path>(?:[A-Za-z]:)?[^\s:][^:\n]*\.\w{1,8}):(?P<ln>\d+)(?::\d+)?:"
    r" (?:fatal )?error: (?P<msg>.*?)(?:\s+\[(?P<code>[\w-]+)\])?\s*"
)
_GO = re.compile(r"(?P<path>(?:\./)?[\w./-]+\.go):(?P<ln>\d+):\d+: (?P<msg>.+)")
_MAVEN = re.compile(
    r"\[ERROR\] (?P<path>(?:[A-Za-z]:)?[^\s:][^\n]*?\.\w{1,8}):\[(?P<ln>\d+),\d+\] (?P<msg>.*)"
)
_RUST = re.compile(r"error\[(?P<code>E\d{4})\]: (?P<msg>.*)")
_RUST_AT = re.compile(r"\s*--> (?P<path>[^\s:]+):(?P<ln>\d+)")
_LINT = re.compile(
    r"(?P<path>(?:[A-Za-z]:)?[^\s:][^:\n]*\.\w{1,8}):(?P<ln>\d+):\d+: (?P<code>[A-Z]{1,3}\d{2,4})"
    r" (?P<msg>.*)"
)
_LINT_HINT = (re.compile(r":\d+:\d+: [A-Z]{1,3}\d"),)
# ``Type: message`` starting a line (indented, pytest's ``E`` prefix, Java's ``Caused by:``
# allowed): Python, JS, Java, C# exceptions. Warnings are not errors.
_EXC = re.compile(
    r"[ \t]{0,8}(?:E {1,8}|Caused by: |Exception in thread \"[^\"\n]*\" |Uncaught |Unhandled )?"
    r"(?P<type>(?:[A-Za-z_$][\w$]*\.)*(?:[A-Z][\w$]*)?(?:Error|Exception)"
    r"|(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Exit|Interrupt|Failure))"
    r"(?:: ?(?P<msg>.*))?\s*"
)
_EXC_HINT = (re.compile("Error|Exception|Failure"), "SystemExit", "KeyboardInterrupt")
_PANIC = re.compile(r"panic: (?P<msg>.*)|thread '(?P<thread>[^'\n]*)' panicked at (?P<where>.*)")
_GENERIC = re.compile(
    r"(?:(?:error|fatal)(?:\[\w+\])?: (?P<msg>.+)"
    r"|ERROR: (?P<pip>.+)"
    r"|npm ERR! (?P<npm>.+)"
    r"|make(?:\[\d+\])?: \*\*\* (?P<make>.+)"
    r"|(?:\S+: )?(?:line \d+: )?(?P<cmd>[\w./-]+): (?:command )?not found)\s*"
)
_GENERIC_HINT = ("error: ", "error[", "fatal: ", "ERROR: ", "npm ERR! ", ": *** ", "not found")
_CARGO_SUMMARY = re.compile(
    r"(?:aborting due to|could not compile|build failed|Some errors have detailed"
    r"|\d+ errors? generated|linking with)"
)
MAX_CANDIDATES = 4000  # hint lines looked at per shape
MAX_LINE_SCAN = 2000  # characters of one line matched against an error shape


def _lines_with(text: str, hints: Iterable[re.Pattern[str] | str]) -> list[tuple[int, int]]:
    """``(start, end)`` of each line of ``text`` containing one of ``hints``, in order, once
    per line. Literals are found with ``str.find`` and patterns should start with a literal:
    both run at C speed, while an alternation of unrelated literals would not."""
    starts: set[int] = set()
    for hint in hints:
        pos = 0
        while len(starts) < MAX_CANDIDATES:
            if isinstance(hint, str):
                at = text.find(hint, pos)
                if at < 0:
                    break
                end_at = at + len(hint)
            else:
                m = hint.search(text, pos)
                if not m:
                    break
                at, end_at = m.start(), m.end()
            starts.add(text.rfind("\n", 0, at) + 1)
            nl = text.find("\n", end_at)
            if nl < 0:
                break
            pos = nl + 1
    out = []
    for a in sorted(starts):
        b = text.find("\n", a)
        out.append((a, len(text) if b < 0 else b))
    return out


def _matches(
    text: str, hints: Iterable[re.Pattern[str] | str], pattern: re.Pattern[str]
) -> Iterator[re.Match[str]]:
    for a, b in _lines_with(text, hints):
        # a megabyte on one line (minified code, base64) is matched by its start only
        m = pattern.fullmatch(text, a, min(b, a + MAX_LINE_SCAN))
        if m:
            yield m


@dataclass
class OutputScan:
    """What one command output says: its errors and, for a test run, the runner's counts."""

    errors: list[ErrorSig]
    counts: dict[str, int]
    runner: str | None = None


def scan_output(output: str, command: str | None = None) -> OutputScan:
    """Errors and test counts of one output, parsed once. Never raises."""
    try:
        return _scan_output(output, command)
    except Exception:  # noqa: BLE001 - a parser bug must not cost the turn its other facts
        return OutputScan([], {})


def errors_in(output: str, command: str | None = None) -> list[ErrorSig]:
    """Every distinct error in a command's output, most useful first: failing tests (via the
    test-runner parsers of ``compress.testrun``), compiler diagnostics, exceptions and panics,
    then tools' ``error:`` lines. At most ``MAX_ERRORS``. Never raises."""
    return scan_output(output, command).errors


def _scan_output(output: str, command: str | None) -> OutputScan:
    if not output or not isinstance(output, str):
        return OutputScan([], {})
    text = strip_ansi(window(output))
    norm, lines = split_output(text)
    found: dict[str, ErrorSig] = {}
    raw_seen: set[tuple[str, str]] = set()

    def add(kind: str, key: str, line: str) -> bool:
        if (kind, key) in raw_seen:  # the same line again: skip the signature work
            return False
        raw_seen.add((kind, key))
        key = f"{kind}:{signature(key[:1000])}"
        if key not in found:
            found[key] = ErrorSig(key, clip(line), kind)
        return len(found) >= MAX_ERRORS

    runner = detect_runner(norm, command if isinstance(command, str) else None)
    run = parse_test_run(lines, runner) if runner else None
    counts = {k: v for k, v in run.counts.items() if v} if run else {}
    done = False
    seen_ids: set[str] = set()
    for failure in run.failures if run else ():
        test_id, message = failure.test_id.strip(), failure.message.strip()
        if not test_id or test_id in seen_ids:
            continue
        seen_ids.add(test_id)
        shown = f"FAILED {test_id}" + (f" - {message}" if message else "")
        if add("test", test_id, shown):
            done = True
            break
    # A failing test's exception is its message, already on the test's line; when a runner
    # names a failure without its message (pytest's collection ``ERROR x.py``), the exception
    # lines are the only place the cause is stated.
    explained = seen_ids and all(" - " in e.line for e in found.values() if e.kind == "test")
    sources: list[Iterable[tuple[str, str, str]]] = [_diagnostics(norm)]
    if not explained:
        sources.append(_exceptions(norm))
    sources.append(_generic(norm))
    if not counts:  # a test run's summary is its verdict: tests log errors on purpose
        sources.append(_log_lines(norm))
    for source in sources:
        for kind, key, line in source:
            if done:
                break
            if kind == "error" and any(e.line.startswith(clip(line)) for e in found.values()):
                continue  # rustc's ``error[E0432]: …`` is already there with its location
            if kind == "log" and any(_names(e, line) for e in found.values()):
                continue  # a test's ``ERROR id``, a tool's ``ERROR: …``: there already
            done = add(kind, key, line)
    errors = list(found.values())
    if any(not _EXIT_LINE.match(e.line) for e in errors):
        # Claude Code's "Error: Exit code 1" heads a failed command's output: the errors below
        # it say what failed
        errors = [e for e in errors if not _EXIT_LINE.match(e.line)]
    return OutputScan(errors, counts, runner)


_EXIT_LINE = re.compile(r"Error: Exit code \d+$")
# Claude Code's answer when the user declines a tool call: the command never ran
# or a hook blocked it ("Blocked: sleep 30 followed by: …"), or its auto mode could not
# ask the model that judges a command's safety (real transcript, 2.1.x)
_REJECTED = (
    "The user doesn't want to proceed with this tool use",
    "User rejected tool use",
    "Blocked: ",
)
_NOT_JUDGED = re.compile(
    r"\S+ is temporarily unavailable, so auto mode cannot determine the safety"
)


def is_rejection(output: str) -> bool:
    """Whether ``output`` is the client's note that the user declined the call (no error of
    the command: it did not run)."""
    head = output.lstrip()[:200] if isinstance(output, str) else ""
    head = head.removeprefix("<tool_use_error>").removeprefix("Error: ")
    return head.startswith(_REJECTED) or bool(_NOT_JUDGED.match(head))


# --------------------------------------------------------------------------- commands

# What a shell line runs, for recognising the same command run again: Claude Code writes each run
# a little differently (``sleep 15 && …``, ``cd dir && …``, ``… 2>&1 | tail -20``).
_SEPARATORS = ("&&", "||", ";", "\n")
_SETUP = frozenset("cd pushd popd sleep export source . set unset echo printf true clear".split())
_WRAPPERS = frozenset("sudo time nice nohup env stdbuf command exec".split())
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_REDIRECT = re.compile(r"^(?:\d?>>?|&>|<)(?:&\d|\S+)?$|^\d?>>?&\d$")
# Filters after a pipe that show only part of an output: an error missing from their view is not
# known to be gone. ``tail`` is not one: runners and compilers print their verdict last.
_PARTIAL_FILTERS = frozenset("head less more cut wc sort uniq awk".split())
_SEEKS_ERRORS = re.compile(r"err|fail|exception|traceback|panic|fatal|warn", re.I)
# Programs whose exit status 1 is an answer, not a failure (no match, files differ, false)
_ANSWER_EXIT_1 = frozenset("grep egrep fgrep rg ag diff cmp test [ [[".split())
MAX_SHELL = 4000  # characters of a command line read for its parts


def _shell_split(line: str, separators: tuple[str, ...]) -> list[str]:
    """``line`` cut at the unquoted ``separators`` (quotes and backslash escapes respected, so
    ``grep -E "a|b"`` is one part)."""
    parts: list[str] = []
    cur: list[str] = []
    quote = ""
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if quote:
            cur.append(ch)
            if ch == "\\" and quote == '"' and i + 1 < n:
                cur.append(line[i + 1])
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            cur.append(ch)
        elif ch == "\\" and i + 1 < n:
            cur.append(ch + line[i + 1])
            i += 1
        else:
            sep = next((s for s in separators if line.startswith(s, i)), None)
            if sep is not None:
                parts.append("".join(cur))
                cur = []
                i += len(sep)
                continue
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _words(part: str) -> list[str]:
    try:
        import shlex

        return shlex.split(part, posix=True)
    except ValueError:
        return part.split()


def _program(words: list[str]) -> list[str]:
    """The words of one simple command without what only sets it up: variable assignments,
    wrappers (``sudo``, ``timeout 60``) and redirections."""
    out = [w for w in words if not _REDIRECT.match(w)]
    while out:
        head = out[0]
        if _ASSIGNMENT.match(head) or head in _WRAPPERS:
            out = out[1:]
        elif head == "timeout" and len(out) > 1:
            out = out[2:] if not out[1].startswith("-") else out[1:]
        else:
            break
    return out


def _main_parts(command: str) -> list[list[list[str]]]:
    """The simple commands of a shell line that do the work, each as its pipeline's stages
    (words): setup steps (``cd``, ``sleep``, ``export``, ``echo``) left out."""
    line = command[:MAX_SHELL]
    if "<<" in line:  # a here-document: its body is not commands
        line = line.split("\n", 1)[0]
    out = []
    for part in _shell_split(line, ("&&", "||", ";", "\n")):
        stages = [_program(_words(s)) for s in _shell_split(part, ("|",))]
        stages = [s for s in stages if s]
        if stages and stages[0][0] not in _SETUP:
            out.append(stages)
    return out


def command_family(command: str | None) -> str:
    """What a shell line runs, written one way: ``sleep 15 && cd app && FOO=1 pytest -q tests
    2>&1 | tail -20`` -> ``pytest -q tests``. Setup steps, wrappers, redirections, what the
    output is piped into and the folder a program is run from (``/opt/bin/gh`` is ``gh``) are
    left out, and a part said twice (``a || /usr/bin/a``) once, so a re-run written
    differently is still the same command. '' when nothing is left. Never raises."""
    try:
        if not isinstance(command, str) or not command.strip():
            return ""
        parts: dict[str, None] = {}
        for stages in _main_parts(command):
            words = stages[0]
            program = re.split(r"[\\/]", words[0])[-1] or words[0]
            parts.setdefault(" ".join([program, *words[1:]]), None)
        return " && ".join(parts)[: 4 * LINE_MAX]
    except Exception:  # noqa: BLE001
        return ""


def partial_output(command: str | None) -> bool:
    """Whether a shell line shows only part of its output (piped into ``head``, ``less``, a
    ``grep`` that is not looking for errors, …): an error absent from it is not known to be
    gone. Never raises."""
    try:
        for stages in _main_parts(command or ""):
            for stage in stages[1:]:
                prog = stage[0].rsplit("/", 1)[-1]
                if prog in _PARTIAL_FILTERS:
                    return True
                if prog == "sed" and "-n" in stage:
                    return True
                if prog in ("grep", "egrep", "rg"):
                    if "-v" in stage or not any(_SEEKS_ERRORS.search(w) for w in stage[1:]):
                        return True
        return False
    except Exception:  # noqa: BLE001
        return True


# Programs that print files as they are: their output is the files' text, so an error it
# mentions (a docstring's ``Raises: ValueError: …``, a doctest's traceback) is no error of the
# command. ``sed`` prints a file too (changed or a range of it).
_VIEWERS = frozenset(
    {"cat", "head", "tail", "less", "more", "bat", "batcat", "nl", "sed", "type", "view", "tac"}
)
# A file a program writes its log into: what a viewer shows of it is that program's errors.
_LOG_FILE = re.compile(r"(?:^|[/._-])(?:log|logs|out|err|stderr|stdout)(?:$|[/._-])|\.log\b", re.I)


def prints_files(command: str | None) -> bool:
    """Whether a shell line only prints files that are not logs (``cat app.py``, ``sed -n
    1,40p a.py; sleep 1``), so that a docstring printed with ``cat`` is no open error.
    Never raises."""
    try:
        parts = _main_parts(command or "")
        if not parts:
            return False
        for stages in parts:
            words = stages[0]
            if re.split(r"[\\/]", words[0])[-1] not in _VIEWERS:
                return False
            files = [w for w in words[1:] if not w.startswith("-") and not w.isdigit()]
            if not files or any(_LOG_FILE.search(f) for f in files):
                return False
        return True
    except Exception:  # noqa: BLE001
        return False


# A frame of a real stack trace (Python, Java/JS/.NET, Go): a program that crashed prints one;
# a docstring's or a commit message's "ValueError: …" has none.
_FRAME = re.compile(
    r'^\s*(?:File "[^"\n]+", line \d+|at [\w$.<>\[\]/-]+ ?\(|goroutine \d+ \[)', re.M
)
# What may come before a log record's level: a time stamp, a pid, brackets, a logger name in
# capitals; not words of a sentence (``Errors are logged as "ERROR: bad row"``).
_LOG_PREFIX = re.compile(r"^[\s\d\[\]():.,/+TZ|-]*(?:[A-Z][A-Z_]*[\s\]:|-]+)?$")


def real_errors(errors: list[ErrorSig], output: str) -> list[ErrorSig]:
    """Of the errors found in the output of a command that exited 0, those the output shows
    happening: failing tests, diagnostics and panics, a log record whose level heads its line,
    and exceptions when a stack frame or one of those backs them (an Odoo log's ``ERROR …``
    then ``ValueError: …`` behind a ``grep``); not text that mentions an error (a docstring's
    ``Raises: ValueError: …``, a commit message). Never raises."""
    try:
        kept = []
        for e in errors:
            if e.kind == "log":
                m = re.search(r"\b(?:FATAL|ERROR|CRITICAL|SEVERE)\b", e.line)
                if m is None or not _LOG_PREFIX.match(e.line[: m.start()]):
                    continue
            if e.kind == "error" and e.line.startswith("error: "):
                continue  # a tool that says ``error: …`` and then exits 0 reports no failure
            kept.append(e)
        backed = any(e.kind != "exception" for e in kept) or bool(
            _FRAME.search(strip_ansi(window(output)))
        )
        return [e for e in kept if backed or e.kind != "exception" or e.line.startswith("panic")]
    except Exception:  # noqa: BLE001
        return errors


def answer_exit(command: str | None, code: int | None) -> bool:
    """Whether exit status ``code`` of this line is an answer, not a failure: ``grep`` found
    nothing, ``diff`` found differences (status 1 of the last program that ran). Never
    raises."""
    try:
        if code != 1:
            return False
        parts = _main_parts(command or "")
        if not parts:
            return False
        last = parts[-1][-1]
        return last[0].rsplit("/", 1)[-1] in _ANSWER_EXIT_1
    except Exception:  # noqa: BLE001
        return False


def _diagnostics(norm: str) -> Iterator[tuple[str, str, str]]:
    for m in _matches(norm, (" error TS",), _TSC):
        path = m.group("path") or m.group("path2")
        code = m.group("code") or m.group("code2")
        msg = m.group("msg") if m.group("msg") is not None else m.group("msg2")
        yield "compile", f"{code} {path} {msg}", m.group(0)
    for m in _matches(norm, ("error[E",), _RUST):
        after = norm[m.end() + 1 : m.end() + 400].split("\n", 3)[:3]
        at = next((x for a in after if (x := _RUST_AT.match(a))), None)
        loc = f" at {at.group('path')}:{at.group('ln')}" if at else ""
        key = f"{m.group('code')} {at.group('path') if at else ''} {m.group('msg')}"
        yield "compile", key, m.group(0) + loc
    for m in _matches(norm, (" error: ",), _GCC):
        code = m.group("code") or ""
        yield "compile", f"{code} {m.group('path')} {m.group('msg')}", m.group(0)
    for m in _matches(norm, ("[ERROR] ",), _MAVEN):
        yield "compile", f"{m.group('path')} {m.group('msg')}", m.group(0)
    for m in _matches(norm, (".go:",), _GO):
        yield "compile", f"{m.group('path')} {m.group('msg')}", m.group(0)
    for m in _matches(norm, _LINT_HINT, _LINT):
        yield "lint", f"{m.group('code')} {m.group('path')} {m.group('msg')}", m.group(0)


def _exceptions(norm: str) -> Iterator[tuple[str, str, str]]:
    for m in _matches(norm, _EXC_HINT, _EXC):
        etype, msg = m.group("type"), (m.group("msg") or "").strip()
        if etype in ("Error", "Exception") and not msg:
            continue  # a bare word on its own line, not an exception
        line = m.group(0).strip()
        if line.startswith("E ") and not line.startswith("E: "):
            line = line[1:].strip()
        yield "exception", f"{etype}: {msg}", line
    for m in _matches(norm, ("panic",), _PANIC):
        if m.group("msg") is not None:
            yield "exception", f"panic {m.group('msg')}", m.group(0)
            continue
        where = m.group("where").rstrip()
        nxt = norm[m.end() + 1 : m.end() + 300].split("\n", 1)[0].strip()
        # since Rust 1.73 the message is on the next line, the location on this one
        message = nxt if where.endswith(":") else ""
        shown = f"{m.group(0).rstrip()} {message}".rstrip()
        yield "exception", f"panic {m.group('thread')} {where} {message}", shown


def _generic(norm: str) -> Iterator[tuple[str, str, str]]:
    for m in _matches(norm, _GENERIC_HINT, _GENERIC):
        msg = m.group("msg")
        if msg is not None and _CARGO_SUMMARY.match(msg):
            continue  # cargo's closing summary repeats the diagnostics above it
        line = m.group(0).strip()
        yield "error", line, line


def _names(error: ErrorSig, line: str) -> bool:
    """Whether ``line`` is ``error`` again: its line, or the id of a failing test."""
    if error.line.rstrip("…") in line:
        return True
    words = error.line.split()
    return error.kind == "test" and len(words) > 1 and words[1] in line


_LOG_STAMP = re.compile(r"^\[?\d{4}-\d{2}-\d{2}[T ][\d:.,]+(?:Z|[+-]\d{2}:?\d{2})?\]?\s+")


def _log_lines(norm: str) -> Iterator[tuple[str, str, str]]:
    """FATAL/ERROR/CRITICAL/SEVERE log lines (an Odoo or Java server log, a docutils message)
    that no other shape named: the shared definition's ``fatal_lines`` (``facts.FATAL_LINE``,
    build tools' boilerplate left out), keyed by their loosened message. A server that logs
    ``ERROR … Failed to load registry`` and exits 0 failed all the same."""
    for m in _matches(norm, ("FATAL", "ERROR", "CRITICAL", "SEVERE"), critical.FATAL_LINE):
        message = critical.fatal_message(m)
        if message:
            yield "log", message, _LOG_STAMP.sub("", m.group(0).strip())


# --------------------------------------------------------------------------- prose and sentences

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_SR_START = re.compile(r"^\s*<{5,9} (?:SEARCH|ORIGINAL)")
_SR_END_ANY = re.compile(r"^[ \t]*>{5,9} (?:REPLACE|UPDATED)[ \t]*\r?$", re.M)
_DIFF_LINE = re.compile(r"^(?:diff --git |--- |\+\+\+ |@@ )")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,2}[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=\S)")


@functools.lru_cache(maxsize=32)
def _closing_fence(ch: str, size: int) -> re.Pattern[str]:
    return re.compile(rf"^[ \t]*{re.escape(ch)}{{{size},}}[ \t]*\r?$", re.M)


def prose_lines(text: str, limit: int = MAX_PROSE) -> Iterator[str]:
    """The lines of a message that are prose: not inside a code fence or an edit block, not a
    quote (``>``), not indented code, not a diff. At most ``limit`` characters of prose, and
    lines are looked at one by one for at most ``limit`` characters (a pasted log or paste after
    the user's own words is not read to the end: decisions are stated up front); blank
    and skipped lines come out as ``""`` (paragraph breaks). A fence or edit block is skipped
    with one search for its end, so a reply that is mostly code costs little."""
    budget = limit
    walked = 0  # characters of lines looked at one by one (a skipped fence or block is free)
    pos, n = 0, len(text)
    while pos < n and budget > 0 and walked < limit:
        nl = text.find("\n", pos)
        end = n if nl < 0 else nl
        line = text[pos:end]
        pos = end + 1
        walked += len(line) + 1
        head = line.lstrip()[:1]
        if head in ("`", "~"):
            m = _FENCE.match(line)
            if m:
                ch, size = m.group(1)[0], len(m.group(1))
                found = _closing_fence(ch, size).search(text, pos)
                pos = found.end() + 1 if found else n
                yield ""
                continue
        if head == "<" and _SR_START.match(line):
            found = _SR_END_ANY.search(text, pos)
            pos = found.end() + 1 if found else n
            yield ""
            continue
        if (
            not head
            or line.startswith(("    ", "\t", ">"))
            or head in ("<", "|", "@")
            or line.lstrip().startswith("#!")
            or (head in ("-", "+", "d") and _DIFF_LINE.match(line))
        ):
            yield ""
            continue
        line = line[:budget]
        budget -= len(line)
        yield line


def sentences(text: str, limit: int = MAX_PROSE) -> Iterator[str]:
    """Sentences of the prose of ``text``: paragraphs joined, list items on their own."""
    para: list[str] = []

    def flush() -> Iterator[str]:
        if para:
            joined = " ".join(para)
            para.clear()
            for s in _SENTENCE_END.split(joined):
                s = s.strip()
                if s:
                    yield s

    for line in prose_lines(text, limit):
        if not line:
            yield from flush()
            continue
        bullet = _BULLET.match(line)
        if bullet or line.lstrip().startswith("#"):
            yield from flush()
            line = line[bullet.end() :] if bullet else line.lstrip().lstrip("#")
        para.append(line.strip())
    yield from flush()


# --------------------------------------------------------------------------- decisions

_FILLER = re.compile(
    r"^(?:(?:please|pls|also|and|but|so|ok|okay|now|then|just|oh|hey|actually|btw|instead(?=,)|"
    r"also,|important|note|remember|from now on|going forward|for now|in general|finally|first|"
    r"one more thing|i think|i'd say|yes|yeah|no|nope|great|thanks|thank you)[,:!.]?\s+)+",
    re.IGNORECASE,
)
_THING = r"(?P<{0}>[^,;:!?()]{{1,80}}?)"
_CUT = re.compile(
    r"\s+(?:for|in|to|because|since|so|as|when|where|which|that|and|but|with|on|from|if|"
    r"everywhere|throughout|here|there|now|going|from now|please)\b.*$|[,;:(].*$",
    re.IGNORECASE,
)
_ARTICLE = re.compile(r"^(?:the|a|an|our|my|your|its)\s+", re.IGNORECASE)
_KIND_WORD = re.compile(
    r"\s+(?:library|lib|package|module|crate|framework|instead|one|approach)$", re.IGNORECASE
)

_INSTEAD = r"(?:instead of|rather than)"
_CHOOSE = r"(?:use|go with|switch(?: over)? to|stick with|move to|migrate to)"
_USER_DECISIONS = [
    # use X instead of Y (anywhere in the sentence: "I think we should use X instead of Y")
    re.compile(rf"\b{_CHOOSE}\s+{_THING.format('x')}\s+{_INSTEAD}\s+(?P<y>.+)$", re.I),
    re.compile(rf"^{_INSTEAD}\s+{_THING.format('y')},?\s+(?:.*?\b)?{_CHOOSE}\s+(?P<x>.+)$", re.I),
    re.compile(rf"^(?:i|we)?\s*prefer\s+{_THING.format('x')}\s+(?:over|to)\s+(?P<y>.+)$", re.I),
    re.compile(r"^switch(?: over)? from\s+" + _THING.format("y") + r"\s+to\s+(?P<x>.+)$", re.I),
    re.compile(
        rf"^(?:let'?s|let us|we(?:'ll| will| should| are going to)|i(?:'d like to| want to| want"
        rf" you to| want us to)|you should)\s+{_CHOOSE}\s+(?P<x>.+)$",
        re.I,
    ),
    re.compile(r"^(?:go with|switch(?: over)? to|stick with|prefer)\s+(?P<x>.+)$", re.I),
]
_ASSISTANT_DECISIONS = [
    re.compile(
        rf"\b(?:i'll|i will|i'm going to|we'll|we will|let's|let me|i'll now)\s+{_CHOOSE}\s+"
        rf"{_THING.format('x')}\s+{_INSTEAD}\s+(?P<y>.+)$",
        re.I,
    ),
    re.compile(
        rf"^{_INSTEAD}\s+{_THING.format('y')},\s*(?:i'll|i will|we'll|we will|let's)\s+"
        rf"{_CHOOSE}\s+(?P<x>.+)$",
        re.I,
    ),
    re.compile(
        r"^(?:i'm |we're |i am |we are |i'll be |i will be )?switching(?: over)?(?: from\s+"
        + _THING.format("y")
        + r")?\s+to\s+(?P<x>.+)$",
        re.I,
    ),
    re.compile(
        r"^(?:i'll|i will|we'll|we will|let's)\s+switch(?: over)?(?: from\s+"
        + _THING.format("y")
        + r")?\s+to\s+(?P<x>.+)$",
        re.I,
    ),
]
_CONSTRAINT_START = re.compile(
    r"^(?:don'?t|do not|never|dont|avoid|always|make sure|ensure|be sure to|keep|only use|"
    r"only ever|no need to)\b",
    re.I,
)
_CONSTRAINT_NOT = re.compile(
    r"^(?:don'?t|do not|dont)\s+(?:know|understand|see|think|get|remember|really|have|need|"
    r"want|like|mind|care|believe|forget)\b|^keep (?:going|trying|it up|up)\b",
    re.I,
)
_CONSTRAINT_MODAL = re.compile(
    r"^(?!i\b)(?:[\w`'\"./-]+\s+){1,6}?(?:must(?: not|n't)?|has to|should (?:always|never|not)|"
    r"shouldn't|needs to be|is required to|are required to|may not|cannot be|can't be)\s+\S",
    re.I,
)
_QUESTION = re.compile(
    r"\?\s*$|^(?:why|how|what|which|who|where|when|is|are|does|do|did|can|could|would|should|"
    r"will|was|were|have|has)\b",
    re.I,
)


def _subject(raw: str | None) -> str:
    """The thing a decision is about, as a key: ``the `httpx` library for calls`` -> ``httpx``."""
    if not raw:
        return ""
    s = raw.replace("`", "").strip().strip("'\"*")
    s = _CUT.sub("", s)
    s = s.strip().strip(".!`'\"*")
    s = _ARTICLE.sub("", s)
    s = _KIND_WORD.sub("", s)
    s = s.strip().strip("`'\"*").lower()
    return " ".join(s.split()[:6])


def decisions_in(text: str, role: str = "user") -> list[tuple[str, str, str]]:
    """``(kind, key, line)`` for each decision or constraint stated in ``text``.

    kind ``decision``: a choice (use X instead of Y, let's use X, go with X, switch to X, prefer X
    over Y); its key is ``use:<x>`` or ``use:<x>|<y>`` (chosen | replaced) so the tracker can
    relate later choices. kind ``constraint`` (user only): don't / never / always / make sure /
    keep …, or ``… must / has to / should always …``; key ``rule:<normalized words>``. ``line``
    is the sentence in the speaker's own words, clipped to ``LINE_MAX``. For the assistant only
    agreement phrasing counts ("I'll use X instead of Y", "switching to X"), in prose outside code
    fences and edit blocks. Questions never count. Never raises."""
    try:
        return _decisions_in(text, role)
    except Exception:  # noqa: BLE001
        return []


def _decisions_in(text: str, role: str) -> list[tuple[str, str, str]]:
    if not text or not isinstance(text, str):
        return []
    text = text[:MAX_MESSAGE]
    assistant = role == "assistant"
    out: dict[str, tuple[str, str, str]] = {}
    for sentence in sentences(text):
        if len(sentence) > 400 or _QUESTION.search(sentence):
            continue
        body = _FILLER.sub("", sentence).strip()
        if not body or _QUESTION.search(body):
            continue
        found = _decision(body, _ASSISTANT_DECISIONS if assistant else _USER_DECISIONS)
        if found is not None:
            x, y = found
            key = f"use:{x}|{y}" if y else f"use:{x}"
            out.setdefault(key, ("decision", key, clip(sentence)))
        elif not assistant and _is_constraint(body):
            key = "rule:" + " ".join(re.findall(r"[a-z0-9_.]+", body.lower())[:12])
            out.setdefault(key, ("constraint", key, clip(sentence)))
        if len(out) >= MAX_DECISIONS:
            break
    return list(out.values())


def _decision(body: str, patterns: Iterable[re.Pattern[str]]) -> tuple[str, str] | None:
    for pattern in patterns:
        m = pattern.search(body)
        if not m:
            continue
        x = _subject(m.group("x"))
        y = _subject(m.groupdict().get("y"))
        if x and x != y and len(x) <= 60 and not x.startswith(("it ", "this ", "that ")):
            return x, y
    return None


# "Ground rules: X must …, and don't …": a rule often follows a label or sits in a later clause.
_CLAUSES = re.compile(
    r"(?:^|[;:]\s+|,\s+(?:and|but|also)\s+|\s+and\s+(?=(?:don'?t|do not|never|always)\b))", re.I
)


def _is_constraint(body: str) -> bool:
    for clause in _CLAUSES.split(body):
        clause = clause.strip()
        if clause and _clause_is_constraint(clause):
            return True
    return False


def _clause_is_constraint(body: str) -> bool:
    if _CONSTRAINT_START.match(body):
        return not _CONSTRAINT_NOT.match(body) and len(body.split()) >= 3
    return bool(_CONSTRAINT_MODAL.match(body))


# --------------------------------------------------------------------------- follow-ups

_ACK_WORDS = frozenset(
    """yes y yeah yep yup sure ok okay k go ahead do it that this please pls thanks thank you thx
    ty try again retry continue proceed keep going fix lgtm looks good great perfect nice cool
    fine now next done right correct alright awesome sounds the same and then on apply go yes,
    good job well excellent agreed agree approve approved let's lets carry run it's its all of
    them those these one more""".split()
)
_CHAT_MODES = re.compile(r"^/(?:ask|code|architect|context|chat-mode \w+)\b\s*", re.I)
# Messages Aider writes into the chat itself (not the user's words).
_AIDER_MADE = (
    "I ran this command:",
    "I added these files to the chat",
    "I committed the changes",
    "I switched to a new code base",
    "I did `git reset --hard",
    "I updated the files",
    "# Fix any errors below",
    "Fix any errors below",
    "The LLM did not conform",
    "Please answer with one of:",
    "I have *added these files to the chat*",
    "I made those changes to the files",
)
_SR_FAILED = re.compile(r"^#? ?\d+ SEARCH/REPLACE blocks? failed to match", re.M)


def is_aider_message(text: str) -> bool:
    """Did Aider write this "user" message itself (a ``/run`` output wrapper, a lint or test
    reflection, an edit-error report, "I added these files")? Such messages are not the
    user's words: no goal, decision or verdict comes from them."""
    try:
        stripped = text[:4096].lstrip() if isinstance(text, str) else ""
        return stripped.startswith(_AIDER_MADE) or bool(_SR_FAILED.search(stripped[:2000]))
    except Exception:  # noqa: BLE001
        return False


def is_substantive(prompt: str) -> bool:
    """Is this a new request (a goal), not a slash command, Aider's own message, or a short
    follow-up such as "yes", "ok", "go ahead", "thanks", "try again", "fix it"? ``/ask``,
    ``/code`` and ``/architect`` carry a request after the command and count by their text."""
    try:
        if not prompt or not isinstance(prompt, str):
            return False
        text = prompt[:MAX_MESSAGE].strip()
        m = _CHAT_MODES.match(text)
        if m:
            text = text[m.end() :].strip()
        elif text.startswith("/") or text.startswith("!"):
            return False
        if not text or text.startswith(_AIDER_MADE) or _SR_FAILED.search(text[:2000]):
            return False
        words = re.findall(r"[a-z0-9']+", text.lower()[:400])
        if not words:
            return False
        return not all(w in _ACK_WORDS for w in words)
    except Exception:  # noqa: BLE001
        return False


# "can you …?", "could we …?", "please …?": a request put as a question
_ASKS_FOR_WORK = re.compile(r"^(?:(?:can|could|would|will)\s+(?:you|we|u)\b|please\b)", re.I)


def is_question(prompt: str) -> bool:
    """A question about the work ("where were we?", "what about negative numbers?", "why does
    it fail?"), not a request for new work: it keeps the goal rather than becoming it. "Can
    you add …?" asks for work. Never raises."""
    try:
        text = _CHAT_MODES.sub("", (prompt or "")[:MAX_MESSAGE].strip(), count=1).strip()
        if not text.endswith("?") or "\n" in text.strip():
            return False
        return not _ASKS_FOR_WORK.match(text)
    except Exception:  # noqa: BLE001
        return False


_FAILED = re.compile(
    r"\b(?:it|that|this|those|these|your (?:change|fix|edit|code|solution)s?|"
    r"the (?:change|fix|edit|patch|update|solution)s?)\s+(?:still\s+)?"
    r"(?:didn'?t|did not|does(?:n'?t| not)|don'?t|do not|isn'?t|is not|wasn'?t|was not|won'?t)\s+"
    r"(?:\w+\s+)?(?:work|working|help|fix|change anything|solve|resolve|do anything|compile|build|"
    r"run)"
    r"|\bstill\s+(?:fail|failing|fails|failed|broken|breaks|crash|crashing|crashes|erroring|"
    r"errors?|not\b|does(?:n'?t| not)|isn'?t|is not|can'?t|cannot|won'?t|getting|get|seeing|see|"
    r"shows?|showing|happens?|happening|the same|there|returns?|returning|throws?|throwing|raises?|"
    r"raising|nothing|wrong|red|an? error|no luck)"
    r"|\bsame\s+(?:error|errors|issue|issues|problem|failure|failures|result|exception|"
    r"output|behavior|behaviour|bug|message|stack ?trace|traceback|test failures?)\b"
    r"(?! (?:as|if)\b)"
    r"|\b(?:it'?s|it is|that'?s|this is|everything is|now it'?s)\s+(?:still\s+)?"
    r"(?:broken|worse)\b"
    r"|\b(?:revert|undo|roll ?back)\s+"
    r"(?:that|this|it|those|these|the|your|last|my|everything|all)\b"
    r"|^\s*(?:undo|revert|roll ?back)\s*[.!]*\s*$"
    r"|\b(?:made (?:it|things) worse|broke (?:it|everything|the build|the tests)|nothing changed|"
    r"did(?:n'?t| not) fix|does(?:n'?t| not) fix|didn'?t help|did not help|no luck|"
    r"not fixed|that'?s wrong|that is wrong|wrong fix)\b",
    re.I,
)


FAILED_WINDOW = 300
_CONDITIONAL = re.compile(r"\b(?:if|when|whether|unless|sure|ensure|until)\b[^.!?]*$", re.I)


def says_failed(prompt: str) -> bool:
    """Does the user say the last attempt did not work ("that didn't work", "still failing",
    "same error", "it's still broken", "revert that", "undo")? Only the user's own prose is read:
    a pasted log saying "still failing" is not the user's verdict."""
    try:
        if not prompt or not isinstance(prompt, str):
            return False
        text = prompt[:MAX_MESSAGE].strip()
        if text.startswith(_AIDER_MADE) or (text.startswith("/") and not _CHAT_MODES.match(text)):
            return False
        m = _CHAT_MODES.match(text)
        if m:
            text = text[m.end() :]
        # The verdict opens the message ("that didn't work, now I get …"); the same words deep
        # in a long spec are conditions ("if it still fails, …"), not a verdict.
        opening = " ".join(x for x in prose_lines(text, FAILED_WINDOW) if x)[:FAILED_WINDOW]
        for m in _FAILED.finditer(opening):
            if not _CONDITIONAL.search(opening[max(0, m.start() - 24) : m.start()]):
                return True
        return False
    except Exception:  # noqa: BLE001
        return False


_FIXED = re.compile(
    r"(?P<tests>\b(?:all\s+(?:\d+\s+)?(?:the\s+)?tests?\s+(?:now\s+)?pass(?:ed|es|ing)?"
    r"|(?:the\s+)?tests?\s+(?:now\s+)?pass(?:es|ed|ing)?(?:\s+now)?"
    r"|(?:the\s+)?tests?\s+(?:are|is)\s+(?:now\s+)?(?:passing|green)"
    r"|\d+\s+passed(?:,\s+0\s+failed)?\b(?!,\s+[1-9]))\b)"
    r"|(?P<build>\b(?:the\s+)?(?:build|compilation|compile|lint|linter|type[- ]?check)\s+"
    r"(?:now\s+)?(?:passes|succeeds|succeeded|works|is\s+(?:clean|green|fixed))\b)"
    r"|(?P<fixed>^\W*fixed\b(?!\s+(?:in|by|at|on|to|width|size|point|number|price|cost))"
    r"|\b(?:that|this|it|everything|the\s+(?:error|issue|bug|problem|failure|crash))"
    r"(?:'s|\s+is|\s+are|\s+has\s+been|\s+was)\s+(?:now\s+)?(?:fixed|resolved|solved|gone)\b"
    r"|\b(?:errors?|issues?|problems?|bugs?)\s+(?:is\s+|are\s+)?(?:now\s+)?fixed\b"
    r"|^[#\s*_>-]*(?:\W\s*)?\w[\w ./-]{0,60}\s+fixed\W*$)"
    r"|(?P<clean>\b(?:that|this|it|everything)\s+(?:works|worked|is\s+working)(?:\s+now)?\b"
    r"|^\W*works\s+now\b|\bno\s+(?:more\s+)?errors\b|\bwithout\s+(?:any\s+)?errors\b)",
    re.I | re.M,
)
_HEDGED = re.compile(
    r"\b(?:if|when|once|until|unless|whether|should|would|could|might|will|can|cannot|must|"
    r"needs?\s+to|to\s+be|make\s+sure|ensure|verify|check|to\s+see|expect|hope|let'?s\s+see|"
    r"not|never|no\s+longer|how|what|why|where|which|whose)\b[^.!?\n]*$|n't\b[^.!?\n]*$",
    re.I,
)
FIXED_WINDOW = 300


def _fixed_claim(text: str) -> tuple[str, re.Match[str], str] | None:
    """(what is fixed, the match, the opening it is in) of the first unhedged claim."""
    if not text or not isinstance(text, str) or says_failed(text):
        return None
    opening = "\n".join(x for x in prose_lines(text[:MAX_MESSAGE], FIXED_WINDOW) if x)
    opening = opening[:FIXED_WINDOW]
    for m in _FIXED.finditer(opening):
        start = opening.rfind("\n", 0, m.start()) + 1
        before = opening[start : m.start()]
        cut = max(before.rfind(". "), before.rfind("! "), before.rfind("? "))
        before = before[cut + 1 :] if cut >= 0 else before
        rest = re.search(r"[.!?\n]|$", opening[m.end() :])
        stop = opening[m.end() + rest.start() : m.end() + rest.start() + 1] if rest else ""
        if _HEDGED.search(before + m.group(0)) or stop == "?":
            continue
        kind = next(k for k in ("tests", "build", "fixed", "clean") if m.group(k))
        return kind, m, opening
    return None


def says_fixed(text: str) -> str | None:
    """Does a message say the problem is fixed: "Fixed.", "that works now", "tests pass now",
    "all 42 tests passed", "the build succeeds", "no errors"? Returns what is fixed: ``tests``,
    ``build`` or ``any`` (the latest failure), else None. Only the opening prose is read, as
    for ``says_failed``, and not a question, a condition or a negation ("if the tests pass",
    "does it work now?", "not fixed", "should be fixed"); a message that says the attempt
    failed says nothing fixed. Never raises."""
    try:
        found = _fixed_claim(text)
        if found is None:
            return None
        return found[0] if found[0] in ("tests", "build") else "any"
    except Exception:  # noqa: BLE001
        return None


_SPECIFIC = re.compile(r"[A-Za-z_][\w.:/-]*\w")
_EXPLAINS = re.compile(r"\b(?:error|issue|problem|bug|exception|fail\w*|crash\w*|cause)\b", re.I)
_CLAIM_GENERIC = frozenset(
    """fixed fix fixes error errors issue issues problem problems bug bugs test tests build now
    works work working that this it the all everything done great perfect good should pass
    passed passes passing clean green resolved solved gone more without any again here there
    with after before what which also just line lines where was were has have been thanks
    thank successfully complete completed operation now the and for you are not has""".split()
)


def claim_words(text: str) -> set[str]:
    """The specific words of a claim that something was fixed ("Fixed! The syntax error was on
    line 23, an incomplete elif" -> {"syntax", "incomplete", "elif"}: the sentence after a bare
    "Fixed!" counts when it explains an error): such a claim fixes only an error that shares one
    of them. Empty for a bare "Fixed.", "That works now" or "no errors", which speak of the
    latest failure whatever it was. Never raises."""
    try:
        found = _fixed_claim(text)
        if found is None or found[0] != "fixed":
            return set()
        _kind, m, opening = found
        sentences = re.split(r"(?<=[.!?])\s+", opening[m.start() :].strip(), maxsplit=2)
        words: set[str] = set()
        for n, sentence in enumerate(sentences[:2]):
            if n and not _EXPLAINS.search(sentence):
                break
            words |= {w.lower() for w in _SPECIFIC.findall(sentence) if len(w) >= 3}
            words -= _CLAIM_GENERIC
            if words:
                break
        return words
    except Exception:  # noqa: BLE001
        return set()


# --------------------------------------------------------------------------- edits

# Aider's edit formats (``coder.edit_format``) by the parser that reads them; ``ask``,
# ``architect``, ``help`` and ``context`` replies edit nothing.
_FORMATS = {
    "diff": "diff",
    "diff-fenced": "diff",
    "editor-diff": "diff",
    "editor-diff-fenced": "diff",
    "editblock": "diff",
    "udiff": "udiff",
    "udiff-simple": "udiff",
    "patch": "patch",
    "whole": "whole",
    "editor-whole": "whole",
}
_TAG_OPEN = re.compile(r"^\s*<(source|code|pre|codeblock|sourcecode)>\s*$")
_TAG_ANY = re.compile(r"^<(source|code|pre|codeblock|sourcecode)>", re.M)
_GAP_BEFORE_FENCE = re.compile(
    r"^([^\n`<>]+)\n[ \t]*\n((?:```|<source>)[^\n]*\n<{5,9} SEARCH)", re.M
)
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.M)
_WHOLE_NAME = re.compile(r"^[\w.~\\/@()$+\-\[\]]*\.[\w]{1,10}$|^[\w.~\\/@()$+\-\[\]]*/[\w.\-]+$")


def edit_paths(reply: str, fmt: str | None = None, valid_fnames: Iterable[str] = ()) -> list[str]:
    """Files an assistant reply edits, in order, as written: SEARCH/REPLACE blocks (Aider's own
    ``find_original_update_blocks``), unified diffs (``udiff_coder.find_diffs``), patch-format
    ``*** Update File:`` lines and, for the ``whole`` format (or when nothing else is found and
    ``fmt`` is None), a file name alone on the line before a code fence. ``valid_fnames`` (the
    chat's files) lets Aider's parser resolve a misspelt name as it does when applying. Never
    raises."""
    try:
        return _edit_paths(reply, fmt, list(valid_fnames or ()))
    except Exception:  # noqa: BLE001
        return []


def _edit_paths(reply: str, fmt: str | None, valid: list[str]) -> list[str]:
    if not reply or not isinstance(reply, str):
        return []
    found: dict[str, None] = {}
    family = _FORMATS.get(fmt or "", "" if not fmt else "none")
    if family in ("", "diff") and "<<<<<<<" in reply:
        for name in _search_replace_paths(reply, valid):
            found.setdefault(name, None)
    if family in ("", "udiff") and "```diff" in reply:
        from aider.coders.udiff_coder import find_diffs

        for name, _hunk in find_diffs(reply):
            if name and name != "/dev/null":
                found.setdefault(name.strip(), None)
    if family in ("", "patch") and "*** " in reply:
        for m in _PATCH_FILE.finditer(reply):
            found.setdefault(m.group(1), None)
    if family == "whole":
        for name in _whole_file_paths(reply):
            found.setdefault(name, None)
    return list(found)


def _search_replace_paths(reply: str, valid: list[str]) -> Iterator[str]:
    from aider.coders.editblock_coder import find_original_update_blocks

    # The fence only matters for reading file names: when Aider switched to ``<source>`` (a
    # file holds backticks), ``<source>python`` must not be taken for a file name.
    tag = _TAG_ANY.search(reply)
    fence = (f"<{tag.group(1)}>", f"</{tag.group(1)}>") if tag else ("```", "```")
    found: list[str] = []
    for attempt in (reply, _GAP_BEFORE_FENCE.sub(r"\1\n\2", reply)):
        blocks = find_original_update_blocks(attempt, fence=fence, valid_fnames=valid or None)
        try:
            for block in blocks:
                if block[0]:  # (None, text) is a shell block
                    found.append(block[0].strip())
            break
        except ValueError as err:
            # Aider rejects the reply from a malformed block on. A blank line between the file
            # name and the fence made Aider 0.50 (and older) no trouble, the current parser
            # gives up on it: try once more without such gaps.
            if "filename" not in str(err) or attempt is not reply:
                break
            found.clear()
    return iter(found)


def _whole_file_paths(reply: str) -> Iterator[str]:
    """Aider's whole-file format: the file name alone on the line before an opening fence
    (backticks, or the ``<source>``-style tags Aider switches to when a file holds backticks)."""
    lines = reply.split("\n")
    close: re.Pattern[str] | str | None = None
    for i, line in enumerate(lines):
        if close is not None:
            if (line.strip() == close) if isinstance(close, str) else close.match(line):
                close = None
            continue
        m = _FENCE.match(line)
        tag = None if m else _TAG_OPEN.match(line)
        if m:
            close = m.group(1)
        elif tag:
            close = re.compile(rf"^\s*</{tag.group(1)}>\s*$")
        else:
            continue
        if i == 0:
            continue
        name = lines[i - 1].strip().strip("*").rstrip(":").strip("`").lstrip("#").strip()
        if name and len(name) <= 250 and _WHOLE_NAME.match(name) and not name[0].isdigit():
            yield name
