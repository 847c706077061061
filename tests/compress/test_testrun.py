"""Test-runner detection and result extraction, on small runs written here and on real outputs."""

from __future__ import annotations

import re

import pytest

from aider_gardener.compress import testrun
from aider_gardener.compress.testrun import analyze, detect_runner, parse_test_run
from tests.hang import finishes

PYTEST = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-8.0.0, pluggy-1.4.0
rootdir: /home/u/proj
collected 5 items

tests/test_a.py .F.                                                      [ 60%]
tests/test_b.py .E                                                       [100%]

==================================== ERRORS ====================================
________________________ ERROR at setup of test_conn ___________________________

    @pytest.fixture
    def conn():
>       raise ConnectionError("db down")
E       ConnectionError: db down

tests/test_b.py:7: ConnectionError
=================================== FAILURES ===================================
___________________________________ test_add ___________________________________

    def test_add():
>       assert add(1, 2) == 4
E       assert 3 == 4
E        +  where 3 = add(1, 2)

tests/test_a.py:12: AssertionError
=========================== short test summary info ============================
FAILED tests/test_a.py::test_add - assert 3 == 4
ERROR tests/test_b.py::test_conn - ConnectionError: db down
==================== 1 failed, 3 passed, 1 error in 0.12s =====================
"""

UNITTEST = """\
.F.E
======================================================================
ERROR: test_load (tests.test_io.TestIO.test_load)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/home/u/proj/tests/test_io.py", line 20, in test_load
    data = load("x.json")
FileNotFoundError: [Errno 2] No such file or directory: 'x.json'

======================================================================
FAIL: test_sum (tests.test_math.TestMath)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/home/u/proj/tests/test_math.py", line 9, in test_sum
    self.assertEqual(sum([1, 2]), 4)
AssertionError: 3 != 4

----------------------------------------------------------------------
Ran 4 tests in 0.003s

FAILED (failures=1, errors=1)
"""

GO = """\
=== RUN   TestParse
--- PASS: TestParse (0.00s)
=== RUN   TestRender
2024/01/02 10:00:00 rendering page
    render_test.go:42: expected "<b>" got "<i>"
--- FAIL: TestRender (0.01s)
=== RUN   TestSkip
    skip_test.go:5: needs network
--- SKIP: TestSkip (0.00s)
FAIL
FAIL\texample.com/m/render\t0.015s
ok  \texample.com/m/parse\t0.004s
"""

CARGO = """\
running 3 tests
test tests::adds ... ok
test tests::divides ... FAILED
test tests::later ... ignored

failures:

---- tests::divides stdout ----
thread 'tests::divides' panicked at src/lib.rs:21:9:
assertion `left == right` failed
  left: 2
 right: 3
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::divides

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s
"""

JEST = """\
FAIL src/sum.test.js
  ● math › adds numbers

    expect(received).toBe(expected) // Object.is equality

    Expected: 4
    Received: 3

      3 | test('adds numbers', () => {
    > 4 |   expect(sum(1, 2)).toBe(4);
        |                     ^
      5 | });

      at Object.<anonymous> (src/sum.test.js:4:21)

PASS src/other.test.js

Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 5 passed, 6 total
Snapshots:   0 total
Time:        1.2 s
"""

MAVEN = """\
[INFO] -------------------------------------------------------
[INFO]  T E S T S
[INFO] -------------------------------------------------------
[INFO] Running com.acme.CalcTest
[ERROR] Tests run: 3, Failures: 1, Errors: 0, Skipped: 1, Time elapsed: 0.05 s <<< FAILURE! \
-- in com.acme.CalcTest
[ERROR] com.acme.CalcTest.divides -- Time elapsed: 0.01 s <<< FAILURE!
org.opentest4j.AssertionFailedError: expected: <2> but was: <3>
\tat org.junit.jupiter.api.AssertionUtils.fail(AssertionUtils.java:151)
\tat com.acme.CalcTest.divides(CalcTest.java:27)
[INFO]
[INFO] Results:
[INFO]
[ERROR] Failures:
[ERROR]   CalcTest.divides:27 expected: <2> but was: <3>
[INFO]
[ERROR] Tests run: 3, Failures: 1, Errors: 0, Skipped: 1
[INFO] BUILD FAILURE
"""

TSC = """\
src/a.ts(3,5): error TS2322: Type 'string' is not assignable to type 'number'.
src/b.ts(10,1): error TS2304: Cannot find name 'foo'.
src/b.ts(11,1): error TS2304: Cannot find name 'bar'.

Found 3 errors in 2 files.
"""

CYPRESS = """\
====================================================================================================

  (Run Starting)

  Running:  login.cy.js                                                                     (1 of 1)

  Login
    ✓ shows the form (120ms)
    1) logs in

  1 passing (4s)
  1 failing

  1) Login
       logs in:
     AssertionError: Timed out retrying after 4000ms: Expected to find element: `#user`
      at Context.eval (webpack:///./cypress/e2e/login.cy.js:10:8)

  (Run Finished)
"""

BUN = """\
bun test v1.1.8

src/a.test.ts:
(pass) math > adds [0.12ms]
(fail) math > divides [0.30ms]
error: expect(received).toBe(expected)

Expected: 2
Received: 3

      at /home/u/src/a.test.ts:9:21
(skip) math > later

 1 pass
 1 skip
 1 fail
 3 expect() calls
Ran 3 tests across 1 files. [15.00ms]
"""

SAMPLES = {
    "pytest": PYTEST,
    "unittest": UNITTEST,
    "go": GO,
    "cargo": CARGO,
    "jest": JEST,
    "maven": MAVEN,
    "tsc": TSC,
    "cypress": CYPRESS,
    "bun": BUN,
}


def _lines(text: str) -> list[str]:
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def _index(lines: list[str], prefix: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(prefix))


@pytest.mark.parametrize("runner", list(SAMPLES))
def test_content_detects_each_runner(runner):
    assert detect_runner(SAMPLES[runner]) == runner


@pytest.mark.parametrize(
    "command, runner",
    [
        ("pytest -x tests/", "pytest"),
        ("python -m pytest -q", "pytest"),
        ("python -m unittest discover", "unittest"),
        ("go test ./...", "go"),
        ("cargo test --all", "cargo"),
        ("npx jest --ci", "jest"),
        ("npx vitest run", "jest"),
        ("mvn -q test", "maven"),
        ("./gradlew test", "maven"),
        ("npx tsc --noEmit", "tsc"),
        ("npx cypress run", "cypress"),
        ("bun test", "bun"),
    ],
)
def test_command_names_the_runner(command, runner):
    # the command wins even over content that looks like another runner
    assert detect_runner(GO if runner != "go" else PYTEST, command) == runner


def test_generic_command_falls_back_to_content():
    assert detect_runner(JEST, "npm test") == "jest"
    assert detect_runner(PYTEST, "make test") == "pytest"


def test_plain_application_log_is_no_test_run():
    log = "\n".join(
        f"2024-05-01 12:00:{i % 60:02d} INFO worker-{i % 3} handled request {1000 + i}"
        for i in range(200)
    )
    assert detect_runner(log) is None
    assert analyze(log, log.split("\n")) is None


def test_pytest_counts_ids_and_noise():
    lines = _lines(PYTEST)
    run = parse_test_run(lines, "pytest")
    assert run.counts == {"failed": 1, "passed": 3, "errors": 1}
    assert run.failed_ids() == ["tests/test_a.py::test_add", "tests/test_b.py::test_conn"]
    assert run.failures[0].message == "assert 3 == 4"
    e_lines = {i for i, line in enumerate(lines) if line.startswith("E ")}
    assert e_lines and e_lines <= run.keep
    assert _index(lines, "tests/test_a.py .F.") in run.hide  # progress dots
    assert _index(lines, "    def test_add") in run.hide  # source listing
    assert _index(lines, "platform linux") in run.drop
    assert len(lines) - 1 in run.keep  # the final counts line
    assert "pytest: 1 failed, 1 errors, 3 passed" in run.summary()


def test_pytest_without_short_summary_uses_headers_and_progress():
    text = (
        "tests/test_x.py::test_one PASSED                                [ 50%]\n"
        "tests/test_x.py::test_two FAILED                                [100%]\n"
        "=================================== FAILURES ===================================\n"
        "___________________________________ test_two ___________________________________\n"
        "E       assert 0\n"
        "========================= 1 failed, 1 passed in 0.01s ==========================\n"
    )
    lines = _lines(text)
    run = parse_test_run(lines, "pytest")
    assert "tests/test_x.py::test_two" in run.failed_ids()
    assert "test_two" in run.failed_ids()
    assert 1 in run.keep and 3 in run.keep  # the only places the failing id is named
    assert 0 in run.hide


def test_pytest_quiet_summary_line_is_counted():
    run = parse_test_run(
        ["..F", "FAILED t.py::test_z - x", "1 failed, 2 passed in 0.05s"], "pytest"
    )
    assert run.counts == {"failed": 1, "passed": 2}


def test_unittest():
    run = parse_test_run(_lines(UNITTEST), "unittest")
    assert run.failed_ids() == [
        "tests.test_io.TestIO.test_load",
        "tests.test_math.TestMath.test_sum",
    ]
    assert run.counts == {"failed": 1, "errors": 1, "passed": 2, "skipped": 0}


def test_go_keeps_the_failing_tests_own_output_only():
    lines = _lines(GO)
    run = parse_test_run(lines, "go")
    assert run.counts == {
        "passed": 1,
        "failed": 1,
        "skipped": 1,
        "packages_failed": 1,
        "packages_ok": 1,
    }
    assert [f.test_id for f in run.failures] == ["TestRender"]
    assert run.failures[0].message.startswith("render_test.go:42:")
    assert _index(lines, "    render_test.go:42") in run.keep
    assert _index(lines, "2024/01/02") not in run.keep  # app log, not the test's message
    assert _index(lines, "    skip_test.go") not in run.keep  # belongs to a passing test


def test_cargo_tests_and_panics():
    lines = _lines(CARGO)
    run = parse_test_run(lines, "cargo")
    assert run.failed_ids() == ["tests::divides"]
    assert run.counts == {"passed": 1, "failed": 1, "ignored": 1}
    assert _index(lines, "---- tests::divides") in run.keep
    assert _index(lines, "assertion `left == right`") in run.keep
    assert _index(lines, " right: 3") in run.keep


def test_cargo_compile_errors_collect_codes():
    text = (
        "error[E0425]: cannot find value `x` in this scope\n"
        " --> src/main.rs:2:13\n"
        "  |\n"
        "2 |     let y = x;\n"
        "  |             ^ not found in this scope\n"
        "\n"
        "error[E0308]: mismatched types\n"
        " --> src/main.rs:5:5\n"
        "warning: unused variable: `y`\n"
        " --> src/main.rs:2:9\n"
        "  |\n"
        "  = note: `#[warn(unused_variables)]` on by default\n"
    )
    lines = _lines(text)
    run = parse_test_run(lines, "cargo")
    assert set(run.codes) == {"E0425", "E0308"}
    assert run.counts == {"compile_errors": 2, "compile_warnings": 1}
    assert 3 in run.drop  # the code snippet
    assert 11 in run.drop  # a warning's note
    assert "codes" in run.summary() and "E0425" in run.summary()


def test_jest_failure_blocks():
    lines = _lines(JEST)
    run = parse_test_run(lines, "jest")
    assert run.failed_ids() == ["math › adds numbers"]
    assert run.failures[0].message.startswith("expect(received)")
    assert run.counts == {"failed": 1, "passed": 5, "total": 6, "suites_failed": 1}
    assert _index(lines, "    Expected: 4") in run.keep
    assert _index(lines, "    > 4 |") in run.drop
    assert "5 passed" in run.summary() and "total" not in run.summary()


def test_maven_surefire():
    run = parse_test_run(_lines(MAVEN), "maven")
    assert run.counts == {"failed": 1, "errors": 0, "passed": 1, "skipped": 1}
    assert "com.acme.CalcTest.divides" in run.failed_ids()
    assert "CalcTest.divides:27" in run.failed_ids()


def test_maven_closing_advice_is_hidden_but_the_failure_is_not():
    tail = (
        "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.5.0:test"
        " (default-test) on project calc: There are test failures.\n"
        "[ERROR] \n"
        "[ERROR] Please refer to dump files (if any exist) [date].dump and [date].dumpstream.\n"
        "[ERROR] -> [Help 1]\n"
        "[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.\n"
        "[ERROR] Re-run Maven using the -X switch to enable full debug logging.\n"
        "[ERROR] For more information about the errors and possible solutions, please read\n"
        "[ERROR] [Help 1] http://cwiki.apache.org/confluence/display/MAVEN/MojoFailureException\n"
    )
    lines = _lines(MAVEN + tail)
    run = parse_test_run(lines, "maven")
    advice = [i for i, x in enumerate(lines) if i >= _index(lines, "[ERROR] Failed to execute")]
    assert advice[0] not in run.hide  # which goal failed, on which project
    assert set(advice[1:]) <= run.hide
    assert _index(lines, "[ERROR]   CalcTest.divides:27") not in run.hide
    assert run.failed_ids() == parse_test_run(_lines(MAVEN), "maven").failed_ids()


def test_gradle_lines():
    text = (
        "CalcTest > divides() FAILED\n"
        "    org.opentest4j.AssertionFailedError\n"
        "3 tests completed, 1 failed\n"
    )
    run = parse_test_run(_lines(text), "maven")
    assert run.failed_ids() == ["CalcTest > divides()"]
    assert run.counts["failed"] == 1 and run.counts["passed"] == 2


def test_tsc_diagnostics():
    run = parse_test_run(_lines(TSC), "tsc")
    assert run.counts == {"errors": 3, "files": 2}
    assert run.codes == {"TS2304": 2, "TS2322": 1}
    assert "TS2304×2" in run.summary()


def test_tsc_pretty_format():
    text = "src/a.ts:3:5 - error TS2322: Type 'string' is not assignable to type 'number'.\n"
    run = parse_test_run(_lines(text), "tsc")
    assert run.counts["errors"] == 1 and "TS2322" in run.codes


def test_cypress():
    lines = _lines(CYPRESS)
    run = parse_test_run(lines, "cypress")
    assert run.failed_ids() == ["Login logs in"]
    assert run.counts == {"passed": 1, "failed": 1}
    assert _index(lines, "       logs in:") in run.keep
    assert _index(lines, "    1) logs in") not in run.keep  # the listing, not the failure report


def test_bun():
    run = parse_test_run(_lines(BUN), "bun")
    assert run.failed_ids() == ["math > divides"]
    assert run.counts == {"passed": 1, "skipped": 1, "failed": 1}


@pytest.mark.parametrize("runner", testrun.RUNNERS)
def test_parsers_survive_junk(runner):
    junk = ["", "\x00\x01", "=" * 5000, "--- FAIL: ", "test result: FAILED.", "●", "Tests run: x"]
    run = parse_test_run(junk, runner)
    assert run.runner == runner
    assert isinstance(run.summary(), str)


# ------------------------------------------------------------------ real outputs


def _read(tool_outputs_dir, name):
    path = tool_outputs_dir / name
    if not path.is_file():
        pytest.skip(f"{name} not present")
    text = path.read_text(encoding="utf-8", errors="replace")
    return text, _lines(text)


def test_real_pytest_typeerror(tool_outputs_dir):
    text, lines = _read(tool_outputs_dir, "pytest_failures_typeerror__X_Ray_LLM.log")
    run = analyze(text, lines)
    final = re.search(r"(\d+) failed, (\d+) passed in", text)
    assert run.runner == "pytest"
    assert run.counts == {"failed": int(final.group(1)), "passed": int(final.group(2))}
    expected = re.findall(r"^FAILED (\S+)", text, re.M)
    assert run.failed_ids() == expected


def test_real_pytest_two_sessions(tool_outputs_dir):
    text, lines = _read(tool_outputs_dir, "pytest_long_warnings__STREAMLINE.log")
    run = analyze(text, lines, "pytest -v")
    assert run.runs == text.count("test session starts")
    last = re.findall(r"^=+ (\d+) passed, (\d+) skipped", text, re.M)[-1]
    assert (run.counts["passed"], run.counts["skipped"]) == tuple(map(int, last))
    assert set(run.failed_ids()) == set(re.findall(r"^FAILED (\S+)", text, re.M))


def test_real_go(tool_outputs_dir):
    text, lines = _read(tool_outputs_dir, "go_test_gin__mybatis-generator-gui-go.txt")
    run = analyze(text, lines, "go test -v ./...")
    assert run.counts["passed"] == text.count("--- PASS:")
    assert run.failed_ids() == re.findall(r"--- FAIL: (\S+)", text)
    trace = _index(lines, "        \tError Trace:")
    assert trace in run.keep


def test_real_maven(tool_outputs_dir):
    text, lines = _read(tool_outputs_dir, "maven_cucumber_java__simple-dtu-pay.txt")
    run = analyze(text, lines)
    assert run.runner == "maven"
    total = re.findall(
        r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)$", text, re.M
    )
    t, f, e, s = map(int, total[-1])
    assert run.counts == {"failed": f, "errors": e, "passed": t - f - e - s, "skipped": s}
    for name in re.findall(r"^\[ERROR\] (.+?) -- Time elapsed.*<<< ERROR!$", text, re.M):
        assert name in run.failed_ids()


def test_real_jest(tool_outputs_dir):
    text, lines = _read(tool_outputs_dir, "jest_nestjs__neural-ticker-core.txt")
    run = analyze(text, lines, "npm test")
    m = re.search(r"^Tests:\s+(\d+) skipped, (\d+) passed, (\d+) total", text, re.M)
    assert run.counts == {"skipped": int(m[1]), "passed": int(m[2]), "total": int(m[3])}
    assert run.failures == []  # every suite passed; "● Console" blocks are not failures


def test_real_tsc(tool_outputs_dir):
    text, lines = _read(tool_outputs_dir, "tsc_errors__wealth-aggregator.txt")
    run = analyze(text, lines, "npx tsc --noEmit")
    codes = re.findall(r"error (TS\d+):", text)
    assert run.counts["errors"] == len(codes)
    assert run.codes == {c: codes.count(c) for c in set(codes)}


def test_real_cargo_compile_error(tool_outputs_dir):
    text, lines = _read(tool_outputs_dir, "cargo_compile_error__tsql_wasm.txt")
    run = analyze(text, lines, "cargo test")
    assert set(run.codes) == set(re.findall(r"error\[(E\d+)\]", text))
    # diagnostics only: "error: could not compile" reports the same error, not another one
    diagnostics = re.findall(r"^error(?:\[E\d+\])?: (?!could not compile|aborting)", text, re.M)
    assert run.counts["compile_errors"] == len(diagnostics) >= 1
    warnings = re.findall(r"^warning: (?!build failed|`\w+` \(.*\) generated)", text, re.M)
    assert run.counts["compile_warnings"] == len(warnings) >= 1
    noise = _index(lines, "warning: build failed, waiting")
    assert noise in run.hide and _index(lines, "For more information about this error") in run.hide


RUN = 200_000  # milliseconds now; these lines were quadratic


@pytest.mark.parametrize(
    "runner, lines",
    [
        ("pytest", ["tests/a.py ." + " " * RUN + "\x00", "1 passed in 0.1s"]),  # \s*(…)?\s*$
        ("pytest", ["a::" * (RUN // 3) + " x", "1 passed in 0.1s"]),  # \S+::\S+
        ("jest", ["FAIL src/a.test.js", "Tests:       " + "1" * RUN + " x"]),  # (\d+) word
        ("maven", ["[ERROR] [Help 1] http://x" + " " * RUN + "!"]),  # (\S.*?)\s+Time elapsed
    ],
    ids=["pytest dots", "pytest test start", "jest counts", "maven blanks"],
)
def test_long_runs_in_runner_lines_do_not_hang(runner, lines):
    run = finishes(parse_test_run, lines, runner)
    assert run is not None
