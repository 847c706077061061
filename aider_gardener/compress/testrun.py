"""Recognise a test runner's output and pull out what the next turn needs from it.

A test log is mostly noise (passing tests, progress dots, source listings in tracebacks) around a
few facts: how many tests passed, failed and were skipped, which ones failed and why. The log
compressor keeps the lines this module marks (``keep``), omits the ones it marks as noise
(``drop``: omitted unless the log compressor finds them important on its own; ``hide``: omitted
even though they look important, because the same fact is stated elsewhere, e.g. pytest's
``test_x FAILED [ 40%]`` progress line repeats the ``FAILED test_x - ...`` summary line, or the
line is a tool's fixed closing advice such as Maven's ``re-run with -e``), and puts the counts in
its summary line.

Runners: pytest, unittest, jest/vitest, go test, cargo test/rustc, maven/surefire (and gradle),
tsc, cypress, bun. Detection trusts the command when it names the runner (``pytest -x``,
``go test ./...``) and otherwise scores content cues, because ``npm test`` or ``make test`` could
run anything. Every parser is one pass over the lines with anchored, precompiled regexes.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

RUNNERS = ("pytest", "unittest", "jest", "go", "cargo", "maven", "tsc", "cypress", "bun")

_MAX_MESSAGE_LINES = 12  # per failure: enough for an assertion diff, not a whole dump


@dataclass
class Failure:
    """One failing test (or collection/compile unit): its id as the runner prints it."""

    test_id: str
    message: str = ""


@dataclass
class TestRun:
    runner: str
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    keep: set[int] = field(default_factory=set)
    drop: set[int] = field(default_factory=set)
    hide: set[int] = field(default_factory=set)
    runs: int = 1
    codes: Counter = field(default_factory=Counter)

    __test__ = False  # not a pytest test class despite the name

    def failed_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for f in self.failures:
            seen.setdefault(f.test_id, None)
        return list(seen)

    def summary(self) -> str:
        """``pytest: 8 failed, 105 passed``: the runner's own counts, failures first."""
        order = ("failed", "errors", "passed", "skipped", "pending", "xfailed", "xpassed")
        parts = [f"{self.counts[k]} {k}" for k in order if self.counts.get(k)]
        parts += [
            f"{v} {k}" for k, v in self.counts.items() if k not in order and v and k != "total"
        ]
        if not parts and "total" in self.counts:
            parts.append(f"{self.counts['total']} total")
        text = f"{self.runner}: " + (", ".join(parts) if parts else "no counts found")
        if self.runs > 1:
            text += f" (last of {self.runs} runs)"
        ids = self.failed_ids()
        if ids:
            text += f"; {len(ids)} failing: ids above"
        if self.codes:
            top = ", ".join(f"{c}×{n}" if n > 1 else c for c, n in self.codes.most_common(8))
            more = len(self.codes) - 8
            text += f"; codes {top}" + (f" +{more} more" if more > 0 else "")
        return text


# --------------------------------------------------------------------------- detection

_COMMAND_RUNNERS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bpy\.?test\b|-m\s+pytest\b"), "pytest"),
    (re.compile(r"-m\s+unittest\b|\bunittest\b|manage\.py\s+test\b"), "unittest"),
    (re.compile(r"\bcypress\b"), "cypress"),
    (re.compile(r"\bbun\s+test\b"), "bun"),
    (re.compile(r"\bjest\b|\bvitest\b"), "jest"),
    (re.compile(r"\bgo\s+test\b|\bgotestsum\b"), "go"),
    (re.compile(r"\bcargo\s+(?:test|nextest|build|check|clippy|run)\b|\brustc\b"), "cargo"),
    (re.compile(r"\bmvnw?\b|\bgradlew?\b"), "maven"),
    (re.compile(r"\b(?:vue-)?tsc\b"), "tsc"),
]

# Literal cues, counted with str.count: content detection must cost well under a millisecond on
# a megabyte of output, which regexes with many ``^`` alternatives do not.
_CUES: dict[str, tuple[str, ...]] = {
    "pytest": (
        "test session starts",
        "short test summary info",
        ".py::",
        " passed in ",
        " failed in ",
    ),
    "unittest": (
        "\nRan ",
        "\nFAIL: test",
        "\nERROR: test",
        "\nFAILED (failures=",
        "\nFAILED (errors=",
    ),
    "go": ("=== RUN", "--- FAIL:", "--- PASS:", "\nok  \t", "\nFAIL\t"),
    "cargo": ("test result: ", "\nrunning ", "error[E", "   Compiling ", "could not compile"),
    "jest": ("Test Suites:", "\nTests:  ", "Test Files  ", "\nPASS ", "\nFAIL "),
    "maven": ("[INFO] ", "[ERROR] ", "Tests run: ", "BUILD SUCCESS", "BUILD FAILURE"),
    "tsc": ("): error TS", " - error TS"),
    "cypress": ("(Run Starting)", "(Run Finished)", "Cypress:", ".cy."),
    "bun": ("bun test v", "\n(pass) ", "\n(fail) ", " tests across "),
}
_SAMPLE = 1 << 16
_CUE_CAP = 50


def detect_runner(text: str, command: str | None = None) -> str | None:
    """The runner named by the command, else the one whose content cues occur most often."""
    if command:
        for pattern, runner in _COMMAND_RUNNERS:
            if pattern.search(command):
                return runner
    body = text if len(text) <= 2 * _SAMPLE else text[:_SAMPLE] + "\n" + text[-_SAMPLE:]
    sample = "\n" + body
    best, best_score = None, 0
    for runner, cues in _CUES.items():
        score = sum(min(sample.count(cue), _CUE_CAP) for cue in cues)
        if score > best_score:
            best, best_score = runner, score
    return best


def split_output(text: str) -> tuple[str, list[str]]:
    """Newline-normalised text and its lines, as a terminal showed them: CRLF ends a line, and so
    does a bare CR (progress bars redraw with it: each redraw is a line); no trailing empty line.
    The log compressor and the pipeline's whole-run parse must cut lines the same way."""
    norm = text.replace("\r\n", "\n")
    if "\r" in norm:
        norm = norm.replace("\r", "\n")
    lines = norm.split("\n")
    if lines[-1] == "":
        lines.pop()
    return norm, lines


def parse_test_run(lines: list[str], runner: str) -> TestRun:
    return _PARSERS[runner](lines)


def analyze(text: str, lines: list[str], command: str | None = None) -> TestRun | None:
    """Detect and parse in one call; None when the text is not a test runner's output."""
    runner = detect_runner(text, command)
    return parse_test_run(lines, runner) if runner else None


def _add_counts(counts: dict[str, int], text: str, pattern: re.Pattern[str], alias=None) -> None:
    for num, word in pattern.findall(text):
        key = (alias or {}).get(word, word)
        counts[key] = counts.get(key, 0) + int(num)


def _keep_message(lines: list[str], start: int, run: TestRun, stop: Callable[[str], bool]) -> str:
    """Keep up to a few non-blank lines after a failure header, until ``stop`` says a code frame
    or stack begins (or two blank lines end the block); return the first as the message."""
    first = ""
    kept = blanks = 0
    for j in range(start, min(len(lines), start + 4 * _MAX_MESSAGE_LINES)):
        line = lines[j]
        if not line.strip():
            blanks += 1
            if blanks >= 2 and kept:
                break
            continue
        blanks = 0
        if stop(line) or kept >= _MAX_MESSAGE_LINES:
            break
        run.keep.add(j)
        kept += 1
        first = first or line.strip()
    return first


# --------------------------------------------------------------------------- pytest

_PY_SESSION = re.compile(r"^=+ test session starts =+$")
_PY_SECTION = re.compile(r"^=+ (.*?) =+$")
_PY_FINAL = re.compile(
    r"^=*\s*((?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|warnings?|deselected|rerun)"
    r"(?:, )?)+|no tests ran)(?: in [\d.]+s\b.*?)\s*=*$"
)
_PY_COUNT = re.compile(
    r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|warnings?|deselected|rerun)"
)
_PY_SUMMARY_ID = re.compile(r"^(FAILED|ERROR) (\S+(?:\[[^\]]*\])?)(?: - (.*))?$")
_PY_PROGRESS = re.compile(
    r"^(?:(\S+::.*?)\s+)?(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b.*?\[\s*\d+%\]\s*$"
)
# No two quantifiers here may take the same blanks (\s*(?:…)?\s*$) or the same "::" (\S+::\S+),
# and a count starts where its digits start: each was quadratic in a long line of such a run.
_PY_DOTS = re.compile(r"^(?:\S+\.py )?[.FEsxX]+\s*(?:\[\s*\d+%\]\s*)?$")
_PY_HEADER = re.compile(
    r"^(?:platform |cachedir: |rootdir: |configfile: |plugins: |asyncio: |hypothesis profile |"
    r"benchmark: |django: |Using --randomly-seed|collecting \.\.\. |testpaths: |-- Docs: )"
)
_PY_TEST_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$")
# -v with live logs: the result comes lines later
_PY_TEST_START = re.compile(r"^(?=\S+?::\S)\S+\s*$")
_PY_LIVE = re.compile(r"^-+ (?:live log|Captured) [\w ]+ -+$")
_PY_ALIAS = {"error": "errors", "warning": "warnings"}


def _parse_pytest(lines: list[str]) -> TestRun:
    run = TestRun("pytest", runs=0)
    section = ""
    headers: list[tuple[int, str]] = []
    progress_failed: list[tuple[int, str]] = []
    summary_ids: set[str] = set()
    final = None
    verbose_starts: list[int] = []
    for i, line in enumerate(lines):
        c = line[:1]
        if c == "=" or c.isdigit():
            if _PY_SESSION.match(line):
                run.runs += 1
                section = ""
                continue
            m = _PY_FINAL.match(line)
            if m:
                final = m.group(1)
                section = ""
                run.keep.add(i)
                continue
            m = _PY_SECTION.match(line)
            if m:
                section = m.group(1).lower()
                continue
        if section in ("failures", "errors"):
            m = _PY_TEST_HEADER.match(line)
            if m:
                headers.append((i, m.group(1)))
            elif c == "E" and line[1:2] in (" ", ""):
                run.keep.add(i)
            elif c == ">":
                run.keep.add(i)
            elif line.startswith("_ _ _") or _PY_LIVE.match(line):
                run.hide.add(i)
            elif c == " " and not line.lstrip().startswith('File "'):
                run.hide.add(i)  # source listing: the ``>`` and ``E`` lines say what failed
            else:
                run.drop.add(i)
            continue
        if c == "F" or c == "E":
            m = _PY_SUMMARY_ID.match(line)
            if m:
                test_id = m.group(2)
                summary_ids.add(test_id)
                run.failures.append(Failure(test_id, m.group(3) or ""))
                run.keep.add(i)
                continue
        if line.endswith("]") or line.endswith("] ") or line.endswith("%"):
            m = _PY_PROGRESS.match(line)
            if m:
                if m.group(2) in ("FAILED", "ERROR"):
                    progress_failed.append((i, m.group(1) or ""))
                else:
                    run.hide.add(i)
                continue
        if _PY_DOTS.match(line) and ("[" in line or ".py " in line):
            run.hide.add(i)
        elif "::" in line and _PY_TEST_START.match(line):
            verbose_starts.append(i)
        elif _PY_HEADER.match(line) or _PY_LIVE.match(line):
            run.drop.add(i)
    run.runs = max(run.runs, 1)
    if final:
        _add_counts(run.counts, final, _PY_COUNT, _PY_ALIAS)
    if summary_ids:
        # the short summary names every failure with its message: the rest say it again
        run.hide.update(i for i, _ in progress_failed)
        run.hide.update(i for i, _ in headers)
        run.hide.update(verbose_starts)
    else:
        for i, test_id in progress_failed:
            run.keep.add(i)
            if test_id:
                run.failures.append(Failure(test_id))
        for i, name in headers:
            run.keep.add(i)
            run.failures.append(Failure(name))
    return run


# --------------------------------------------------------------------------- unittest

_UT_HEAD = re.compile(r"^(FAIL|ERROR): (\w+) \(([\w.]+)\)")
_UT_RAN = re.compile(r"^Ran (\d+) tests? in ")
_UT_RESULT = re.compile(r"^(OK|FAILED)(?: \((.*)\))?\s*$")
_UT_RESULT_COUNT = re.compile(
    r"(failures|errors|skipped|expected failures|unexpected successes)=(\d+)"
)
_UT_CODE = re.compile(r"^    \S")


def _parse_unittest(lines: list[str]) -> TestRun:
    run = TestRun("unittest")
    ran = 0
    result: dict[str, int] = {}
    in_trace = False
    for i, line in enumerate(lines):
        m = _UT_HEAD.match(line)
        if m:
            name, where = m.group(2), m.group(3)
            test_id = where if where.endswith("." + name) else f"{where}.{name}"
            run.failures.append(Failure(test_id))
            run.keep.add(i)
            in_trace = True
            continue
        m = _UT_RAN.match(line)
        if m:
            ran = int(m.group(1))
            in_trace = False
            run.keep.add(i)
            continue
        m = _UT_RESULT.match(line)
        if m and ran:
            result = {k: int(v) for k, v in _UT_RESULT_COUNT.findall(m.group(2) or "")}
            run.keep.add(i)
            continue
        if in_trace and _UT_CODE.match(line):
            run.drop.add(i)  # the source line under each ``File "...", line N`` frame
    if ran:
        failed = result.get("failures", 0)
        errors = result.get("errors", 0)
        skipped = result.get("skipped", 0)
        other = result.get("expected failures", 0) + result.get("unexpected successes", 0)
        run.counts = {
            "failed": failed,
            "errors": errors,
            "passed": max(ran - failed - errors - skipped - other, 0),
            "skipped": skipped,
        }
    return run


# --------------------------------------------------------------------------- go test

_GO_RUN = re.compile(r"^\s*=== (?:RUN|PAUSE|CONT|NAME)\s+(\S+)")
_GO_RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(([\d.]+)s\)")
_GO_PKG = re.compile(r"^(ok|FAIL)\s+(\S+)\s+(?:[\d.]+s|\(cached\)|\[)")
_GO_INDENTED = re.compile(r"^(?: {4}|\t)\s*\S")


def _parse_go(lines: list[str]) -> TestRun:
    run = TestRun("go")
    started: dict[str, int] = {}
    counts: Counter[str] = Counter()
    pkgs: Counter[str] = Counter()
    for i, line in enumerate(lines):
        m = _GO_RUN.match(line)
        if m:
            started.setdefault(m.group(1), i)
            run.drop.add(i)
            continue
        m = _GO_RESULT.match(line)
        if m:
            status, name = m.group(1), m.group(2)
            counts[{"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}[status]] += 1
            if status == "FAIL":
                run.keep.add(i)
                message = ""
                # t.Error/t.Log output is indented; app logs (log.Printf, gin) are not
                start = started.get(name, i)
                body = [j for j in range(start + 1, i) if _GO_INDENTED.match(lines[j])]
                for j in range(i + 1, min(len(lines), i + 4 * _MAX_MESSAGE_LINES)):
                    if not _GO_INDENTED.match(lines[j]) or _GO_RESULT.match(lines[j]):
                        break
                    body.append(j)
                for j in body[: 2 * _MAX_MESSAGE_LINES]:
                    run.keep.add(j)
                    message = message or lines[j].strip()
                run.failures.append(Failure(name, message))
            continue
        m = _GO_PKG.match(line)
        if m:
            pkgs["packages_ok" if m.group(1) == "ok" else "packages_failed"] += 1
            run.keep.add(i)
    run.counts = {**counts, **pkgs}
    return run


# --------------------------------------------------------------------------- cargo / rustc

_RS_RESULT = re.compile(
    r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured"
)
_RS_TEST = re.compile(r"^test (\S+) \.\.\. (ok|FAILED|ignored)\b")
_RS_STDOUT = re.compile(r"^---- (\S+) std(?:out|err) ----$")
_RS_DIAG = re.compile(r"^(error|warning)(?:\[(\w+)\])?: (.*)$")
_RS_SNIPPET = re.compile(r"^\s*\d*\s*\|")
_RS_NOTE = re.compile(r"^\s*= (?:help|note): ")
_RS_SUMMARY = re.compile(
    r"^(?:warning|error): .*\bgenerated \d+ warnings?|^error: aborting due to"
    r"|^error: could not compile|^warning: build failed"
)
# cargo's own chatter around diagnostics: the code is on the diagnostic line, the failure on
# "could not compile"
_RS_NOISE = re.compile(
    r"^warning: build failed, waiting for other jobs|^For more information about this error, try"
    r"|^Some errors have detailed explanations: "
)


def _parse_cargo(lines: list[str]) -> TestRun:
    run = TestRun("cargo")
    counts: Counter[str] = Counter()
    saw_result = False
    diag = ""
    for i, line in enumerate(lines):
        c = line[:1]
        if c == "t":
            m = _RS_RESULT.match(line)
            if m:
                saw_result = True
                run.keep.add(i)
                for key, val in zip(("passed", "failed", "ignored"), m.groups()):
                    counts[key] += int(val)
                continue
            m = _RS_TEST.match(line)
            if m and m.group(2) == "FAILED":
                run.failures.append(Failure(m.group(1)))
                run.keep.add(i)
                continue
        if c == "-":
            m = _RS_STDOUT.match(line)
            if m:
                run.keep.add(i)
                _keep_message(lines, i + 1, run, lambda s: s.startswith(("note:", "----")))
                continue
        if c in "wFS" and _RS_NOISE.match(line):
            run.hide.add(i)
            diag = ""
            continue
        if c == "e" or c == "w":
            m = _RS_DIAG.match(line)
            if m and not _RS_SUMMARY.match(line):
                diag = m.group(1)
                if m.group(2):
                    run.codes[m.group(2)] += 1
                counts["compile_errors" if diag == "error" else "compile_warnings"] += 1
                continue
        if diag:
            if not line.strip():
                diag = ""
            elif _RS_SNIPPET.match(line) or (diag == "warning" and _RS_NOTE.match(line)):
                run.drop.add(i)
            elif diag == "error":
                run.keep.add(i)
    if not saw_result:
        counts.pop("passed", None)
    run.counts = dict(counts)
    return run


# --------------------------------------------------------------------------- jest / vitest

_JS_TESTS = re.compile(r"^\s*Tests:?\s+(.*\d.*)$")
_JS_SUITES = re.compile(r"^\s*(?:Test Suites:|Test Files)\s+(.*\d.*)$")
_JS_COUNT = re.compile(r"(?<!\d)(\d+) (failed|passed|skipped|todo|pending|total)")
_JS_BULLET = re.compile(r"^\s*(?:●|ΓùÅ) (.+?)\s*$")
_JS_CROSS = re.compile(r"^\s*(?:✕|×|✗) (.+?)(?: \(\d+(?:\.\d+)? ?m?s\))?\s*$")
_JS_FAIL_SUITE = re.compile(r"^\s*FAIL (\S+)")
_JS_FRAME = re.compile(r"^\s*(?:>\s*)?\d+ \||^\s+\|\s|^\s+at ")


def _parse_jest(lines: list[str]) -> TestRun:
    run = TestRun("jest")
    tests_line = suites_line = ""
    in_block = False
    for i, line in enumerate(lines):
        m = _JS_BULLET.match(line)
        if m and not m.group(1).startswith("Console"):
            test_id = m.group(1)
            run.keep.add(i)
            msg = _keep_message(lines, i + 1, run, lambda s: bool(_JS_FRAME.match(s)))
            run.failures.append(Failure(test_id, msg))
            in_block = True
            continue
        if m:
            in_block = False
            continue
        m = _JS_CROSS.match(line)
        if m:
            run.keep.add(i)
            run.failures.append(Failure(m.group(1)))
            continue
        m = _JS_FAIL_SUITE.match(line)
        if m:
            run.keep.add(i)
            continue
        m = _JS_TESTS.match(line)
        if m:
            tests_line = m.group(1)
            run.keep.add(i)
            continue
        m = _JS_SUITES.match(line)
        if m:
            suites_line = m.group(1)
            run.keep.add(i)
            continue
        if in_block and _JS_FRAME.match(line) and not line.lstrip().startswith("at "):
            run.drop.add(i)  # the code frame under each failure; the message says what failed
    _add_counts(run.counts, tests_line, _JS_COUNT)
    suites: Counter[str] = Counter()
    _add_counts(suites, suites_line, _JS_COUNT)
    if suites.get("failed"):
        run.counts["suites_failed"] = suites["failed"]
    if not run.failures and suites.get("failed"):
        run.failures.extend(
            Failure(m.group(1)) for line in lines if (m := _JS_FAIL_SUITE.match(line))
        )
    return run


# --------------------------------------------------------------------------- maven / gradle

_MVN_RUN = re.compile(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)")
# The test's name ends with a non-blank (the shortest one always did), so the blanks before "Time
# elapsed" are taken once, not again after every character (quadratic in a long blank run); a
# line without "<<< FAILURE!" is dismissed before any of that.
_MVN_FAIL = re.compile(
    r"^\[ERROR\]\s+(?=.*<<< (?:FAILURE|ERROR)!)(\S(?:.*?\S)??)\s+(?:--\s+)?Time elapsed:"
    r".*<<< (?:FAILURE|ERROR)!"
)
_MVN_RESULT_ID = re.compile(r"^\[ERROR\]\s{2,}(\w[\w.$]*[.:]\w+(?::\d+)?)\s")
_GRADLE_FAIL = re.compile(r"^(\S+) > (.+) FAILED$")
_GRADLE_COUNT = re.compile(r"^(\d+) tests? completed, (\d+) failed(?:, (\d+) skipped)?")
_CUKE_SCEN = re.compile(r"^(\d+) Scenarios? \((.*)\)$")
# Maven closes every failed build with the same advice; it states nothing about this build
_MVN_BOILERPLATE = re.compile(
    r"^\[ERROR\] (?:-> \[Help \d+\]|To see the full stack trace of the errors, re-run Maven"
    r"|Re-run Maven using the -X switch|For more information about the errors and possible"
    r"|\[Help \d+\] https?://\S+$|Please refer to dump files \(if any exist\))"
    r"|^\[ERROR\]\s*$"
)


def _parse_maven(lines: list[str]) -> TestRun:
    run = TestRun("maven")
    aggregate = None
    per_class = [0, 0, 0, 0]
    vals: list[int] | None
    section = ""
    for i, line in enumerate(lines):
        if "Tests run:" in line:
            m = _MVN_RUN.search(line)
            if m:
                vals = [int(v) for v in m.groups()]
                if " in " in line or "<<<" in line:
                    per_class = [a + b for a, b in zip(per_class, vals)]
                else:
                    aggregate = vals
                run.keep.add(i)
                continue
        if line.startswith("[ERROR]"):
            if _MVN_BOILERPLATE.match(line):
                run.hide.add(i)
                continue
            m = _MVN_FAIL.match(line)
            if m:
                run.failures.append(Failure(m.group(1)))
                continue
            if line.rstrip() in ("[ERROR] Failures:", "[ERROR] Errors:"):
                section = "results"
                continue
            if section == "results":
                m = _MVN_RESULT_ID.match(line)
                if m:
                    run.failures.append(Failure(m.group(1), line.split(None, 2)[-1]))
            continue
        m = _GRADLE_FAIL.match(line)
        if m:
            run.failures.append(Failure(f"{m.group(1)} > {m.group(2)}"))
            run.keep.add(i)
            continue
        m = _GRADLE_COUNT.match(line)
        if m:
            run.keep.add(i)
            total, failed, skipped = (int(v or 0) for v in m.groups())
            aggregate = [total, failed, 0, skipped]
    vals = aggregate or (per_class if any(per_class) else None)
    if vals:
        total, failed, errors, skipped = vals
        run.counts = {
            "failed": failed,
            "errors": errors,
            "passed": max(total - failed - errors - skipped, 0),
            "skipped": skipped,
        }
    return run


# --------------------------------------------------------------------------- tsc

_TSC_DIAG = re.compile(r"^(.+?)(?:\((\d+),(\d+)\): | ?:(\d+):(\d+) - )(error|warning) (TS\d+): ")
_TSC_FOUND = re.compile(r"^Found (\d+) errors?(?: in (\d+) files?)?")


def _parse_tsc(lines: list[str]) -> TestRun:
    run = TestRun("tsc")
    files: set[str] = set()
    errors = warnings = 0
    found = None
    for i, line in enumerate(lines):
        if " TS" in line:
            m = _TSC_DIAG.match(line)
            if m:
                files.add(m.group(1))
                run.codes[m.group(7)] += 1
                if m.group(6) == "error":
                    errors += 1
                else:
                    warnings += 1
                continue
        m = _TSC_FOUND.match(line)
        if m:
            found = int(m.group(1))
            run.keep.add(i)
    run.counts = {"errors": found if found is not None else errors, "files": len(files)}
    if warnings:
        run.counts["warnings"] = warnings
    return run


# --------------------------------------------------------------------------- cypress (mocha)

_CY_MOCHA = re.compile(r"^\s+(\d+) (passing|failing|pending)\b")
_CY_BOX = re.compile(r"^\s*│\s*(Tests|Passing|Failing|Pending|Skipped):\s+(\d+)")
_CY_FAIL = re.compile(r"^\s+(\d+)\) (.+?)\s*$")
_CY_ALIAS = {
    "passing": "passed",
    "failing": "failed",
    "pending": "pending",
    "Passing": "passed",
    "Failing": "failed",
    "Pending": "pending",
    "Skipped": "skipped",
    "Tests": "total",
}


def _parse_cypress(lines: list[str]) -> TestRun:
    run = TestRun("cypress")
    mocha: Counter[str] = Counter()
    box: Counter[str] = Counter()
    in_failing = False
    for i, line in enumerate(lines):
        m = _CY_MOCHA.match(line)
        if m:
            mocha[_CY_ALIAS[m.group(2)]] += int(m.group(1))
            run.keep.add(i)
            in_failing = m.group(2) == "failing"
            continue
        m = _CY_BOX.match(line)
        if m:
            box[_CY_ALIAS[m.group(1)]] += int(m.group(2))
            continue
        if in_failing:
            m = _CY_FAIL.match(line)
            if m:
                parts = [m.group(2).rstrip(":")]
                run.keep.add(i)
                indent = len(line) - len(line.lstrip())
                for j in range(i + 1, min(len(lines), i + 6)):
                    nxt = lines[j]
                    if len(nxt) - len(nxt.lstrip()) > indent and nxt.rstrip().endswith(":"):
                        parts.append(nxt.strip().rstrip(":"))
                        run.keep.add(j)
                    else:
                        break
                run.failures.append(Failure(" ".join(parts)))
    counts = box if box else mocha
    run.counts = dict(counts)
    return run


# --------------------------------------------------------------------------- bun

_BUN_LINE = re.compile(r"^\((pass|fail|skip|todo)\) (.+?)(?: \[[\d.]+m?s\])?\s*$")
_BUN_SUM = re.compile(r"^\s*(\d+) (pass|fail|skip|todo)\s*$")
_BUN_ALIAS = {"pass": "passed", "fail": "failed", "skip": "skipped", "todo": "todo"}


def _parse_bun(lines: list[str]) -> TestRun:
    run = TestRun("bun")
    seen: Counter[str] = Counter()
    summary: Counter[str] = Counter()
    for i, line in enumerate(lines):
        m = _BUN_LINE.match(line)
        if m:
            seen[_BUN_ALIAS[m.group(1)]] += 1
            if m.group(1) == "fail":
                run.failures.append(Failure(m.group(2)))
                run.keep.add(i)
            continue
        m = _BUN_SUM.match(line)
        if m:
            summary[_BUN_ALIAS[m.group(2)]] += int(m.group(1))
            run.keep.add(i)
    run.counts = dict(summary or seen)
    return run


_PARSERS: dict[str, Callable[[list[str]], TestRun]] = {
    "pytest": _parse_pytest,
    "unittest": _parse_unittest,
    "go": _parse_go,
    "cargo": _parse_cargo,
    "jest": _parse_jest,
    "maven": _parse_maven,
    "tsc": _parse_tsc,
    "cypress": _parse_cypress,
    "bun": _parse_bun,
}
