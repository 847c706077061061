"""The error compressor keeps the exception, its chain and the project's frames; libraries fold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.compress.error import compress_error
from aider_gardener.types import CompressOptions
from tests.conftest import tool_output_files
from tests.critical_facts import missing_facts
from tests.hang import finishes

OPTS = CompressOptions()

PY_TRACE = """\
Traceback (most recent call last):
  File "/home/dev/proj/app/cli.py", line 12, in <module>
    main()
  File "/home/dev/proj/.venv/lib/python3.12/site-packages/click/core.py", line 1157, in __call__
    return self.main(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/dev/proj/.venv/lib/python3.12/site-packages/click/core.py", line 1078, in main
    rv = self.invoke(ctx)
  File "/home/dev/proj/.venv/lib/python3.12/site-packages/click/decorators.py", line 33, in new_func
    return f(get_current_context(), *args, **kwargs)
  File "/home/dev/proj/app/commands.py", line 40, in run
    data = load(path)
           ^^^^
  File "/home/dev/proj/app/io.py", line 7, in load
    return json.loads(raw)
  File "/usr/lib/python3.12/json/__init__.py", line 346, in loads
    return _default_decoder.decode(s)
  File "/usr/lib/python3.12/json/decoder.py", line 355, in raw_decode
    raise JSONDecodeError("Expecting value", s, err.value) from None
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
"""

JAVA_TRACE = """\
Exception in thread "main" java.lang.IllegalStateException: Failed to load config
\tat com.acme.app.Config.load(Config.java:42)
\tat com.acme.app.Main.main(Main.java:10)
Caused by: java.io.FileNotFoundException: /etc/acme.yml (No such file or directory)
\tat java.base/java.io.FileInputStream.open0(Native Method)
\tat java.base/java.io.FileInputStream.open(FileInputStream.java:213)
\tat java.base/java.io.FileInputStream.<init>(FileInputStream.java:152)
\tat org.springframework.core.io.FileSystemResource.getInputStream(FileSystemResource.java:100)
\tat com.acme.app.Config.read(Config.java:77)
\tat com.acme.app.Config.load(Config.java:40)
\t... 1 more
"""

NODE_TRACE = """\
TypeError: Cannot read properties of undefined (reading 'id')
    at UserService.find (/srv/app/src/users/service.ts:31:22)
    at Layer.handle [as handle_request] (/srv/app/node_modules/express/lib/router/layer.js:95:5)
    at next (/srv/app/node_modules/express/lib/router/route.js:149:13)
    at Route.dispatch (/srv/app/node_modules/express/lib/router/route.js:119:3)
    at /srv/app/node_modules/express/lib/router/index.js:284:15
    at processTicksAndRejections (node:internal/process/task_queues:95:5)
    at async Controller.get (/srv/app/src/users/controller.ts:12:5)
"""

GO_TRACE = """\
panic: runtime error: index out of range [5] with length 3

goroutine 1 [running]:
main.process(...)
\t/home/u/proj/main.go:12
main.main()
\t/home/u/proj/main.go:7 +0x1d
runtime.main()
\t/usr/local/go/src/runtime/proc.go:271 +0x29d
runtime.goexit({})
\t/usr/local/go/src/runtime/asm_amd64.s:1695 +0x1
exit status 2
"""

RUST_TRACE = """\
thread 'main' panicked at src/main.rs:4:5:
explicit panic
stack backtrace:
   0: rust_begin_unwind
             at /rustc/07dca489ac2d933c78d3c5158e3f43beefeb02ce/library/std/src/panicking.rs:645:5
   1: core::panicking::panic_fmt
             at /rustc/07dca489ac2d933c78d3c5158e3f43beefeb02ce/library/core/src/panicking.rs:72:14
   2: demo::main
             at ./src/main.rs:4:5
   3: core::ops::function::FnOnce::call_once
             at /rustc/07dca489ac2d933c/library/core/src/ops/function.rs:250:5
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.
"""

CSHARP_TRACE = """\
Unhandled exception. System.InvalidOperationException: Sequence contains no elements
   at System.Linq.ThrowHelper.ThrowNoElementsException()
   at System.Linq.Enumerable.First[TSource](IEnumerable`1 source)
   at Acme.Orders.OrderService.GetFirst() in /src/Acme/Orders/OrderService.cs:line 42
   at Acme.Program.Main(String[] args) in /src/Acme/Program.cs:line 12
"""

LIB_MARKERS = (
    "site-packages",
    "dist-packages",
    "node_modules",
    "/lib/python",
    "<frozen",
    "/.venv/",
)


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _check_invariants(text: str, opts: CompressOptions = OPTS) -> str:
    out = compress_error(text, opts).text
    assert len(out) <= len(text)
    assert compress_error(out, opts).text == out
    return out


# --- synthetic traces, one per language -----------------------------------------------------


def test_python_keeps_project_frames_and_folds_libraries():
    out = _check_invariants(PY_TRACE)
    lines = _lines(out)
    for frame in ("app/cli.py", "app/commands.py", "app/io.py"):
        hit = [x for x in lines if frame in x and x.lstrip().startswith("File ")]
        assert len(hit) == 1, frame
    assert "    data = load(path)" in lines  # source line under a kept frame
    assert "           ^^^^" in lines  # short caret marker kept
    assert "           ^^^^^^^^^^^^^^^^^^^^^^^^^^" not in lines  # long one dropped
    assert "click/core.py" not in out
    assert any("3 frames in site-packages (click)" in x for x in lines)
    # the innermost frame shows the raise, so it stays even though it is in the stdlib
    assert 'raise JSONDecodeError("Expecting value", s, err.value) from None' in out
    assert "json/__init__.py" not in out
    assert lines[-1] == "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"


def test_python_chain_and_multiline_message_survive():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/requests/api.py", line 59, in request\n'
        "    return session.request(method=method, url=url, **kwargs)\n"
        '  File "/opt/venv/lib/python3.11/site-packages/requests/adapters.py", line 519, in send\n'
        "    raise ConnectionError(e, request=request)\n"
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='x', port=443)\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/work/svc/fetch.py", line 20, in fetch\n'
        "    raise FetchError(url) from err\n"
        "svc.errors.FetchError: could not fetch\n"
        "  url: https://example.org\n"
        "  attempts: 3\n"
    )
    out = _check_invariants(text)
    for needle in (
        "During handling of the above exception, another exception occurred:",
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='x', port=443)",
        "svc.errors.FetchError: could not fetch",
        "  url: https://example.org",
        "  attempts: 3",
        '  File "/work/svc/fetch.py", line 20, in fetch',
        "    raise ConnectionError(e, request=request)",
    ):
        assert needle in out


def test_project_root_decides_what_is_own_code():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/work/proj/run.py", line 3, in <module>\n'
        "    helper.go()\n"
        '  File "/opt/tools/helper.py", line 9, in go\n'
        "    inner()\n"
        '  File "/opt/tools/helper.py", line 12, in inner\n'
        "    step()\n"
        '  File "/work/proj/steps.py", line 5, in step\n'
        "    raise ValueError('bad step')\n"
        "ValueError: bad step\n"
    )
    with_root = _check_invariants(text, CompressOptions(project_root="/work/proj"))
    assert "/opt/tools/helper.py" not in with_root
    assert "2 frames in outside project" in with_root
    assert '  File "/work/proj/run.py", line 3, in <module>' in with_root
    without_root = compress_error(text, OPTS).text
    assert "/opt/tools/helper.py" in without_root  # nothing recognisably a library


def test_hot_identifiers_keep_library_frames():
    hot = CompressOptions(hot=frozenset({"invoke"}))
    out = _check_invariants(PY_TRACE, hot)
    assert '/click/core.py", line 1078, in main' in out  # its source line calls invoke
    assert "    rv = self.invoke(ctx)" in out
    assert '/click/core.py", line 1157, in __call__' not in out


def test_quoted_history_trace_keeps_exception_line():
    # Aider's chat history quotes tool output with "> " and drops the indentation
    text = (
        "> Traceback (most recent call last):  \n"
        '> File "/u/p/.venv/lib/python3.12/site-packages/litellm/utils.py", line 1, in a  \n'
        "> self.fetch()  \n"
        '> File "/u/p/.venv/lib/python3.12/site-packages/litellm/utils.py", line 2, in b  \n'
        "> self.make_call()  \n"
        "> ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^  \n"
        '> File "/u/p/.venv/lib/python3.12/site-packages/litellm/llms/x.py", line 3, in c  \n'
        "> raise AnthropicError(status_code=500)  \n"
        "> litellm.llms.anthropic.AnthropicError: overloaded  \n"
    )
    out = _check_invariants(text)
    assert "> litellm.llms.anthropic.AnthropicError: overloaded  " in _lines(out)
    assert "> raise AnthropicError(status_code=500)  " in _lines(out)
    # folded library frames keep their locations (issue 14: every frame is a critical fact)
    assert "> … 2 frames in site-packages (litellm): utils.py:1 utils.py:2 …" in _lines(out)


def test_frames_without_source_do_not_swallow_the_exception():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/work/app/main.py", line 1, in <module>\n'
        "    import missing_mod\n"
        '  File "<frozen importlib._bootstrap>", line 1204, in _gcd_import\n'
        '  File "<frozen importlib._bootstrap>", line 1176, in _find_and_load\n'
        '  File "<frozen importlib._bootstrap>", line 1140, in _find_and_load_unlocked\n'
        "ModuleNotFoundError: No module named 'missing_mod'\n"
    )
    out = _check_invariants(text)
    assert "ModuleNotFoundError: No module named 'missing_mod'" in _lines(out)
    assert any("2 frames in stdlib (importlib)" in x for x in _lines(out))


def test_java_cause_chain_and_more_lines():
    out = _check_invariants(JAVA_TRACE)
    lines = _lines(out)
    assert lines[0] == JAVA_TRACE.splitlines()[0]
    assert (
        "Caused by: java.io.FileNotFoundException: /etc/acme.yml (No such file or directory)"
        in lines
    )
    for own in ("Config.load(Config.java:42)", "Main.main(Main.java:10)", "Config.read(Config"):
        assert own in out
    assert "\t... 1 more" in lines
    assert "FileInputStream(" not in out and "springframework.core" not in out
    marker = [x for x in lines if "4 frames in" in x]
    assert marker and marker[0].startswith("\t… 4 frames in java.*, org.springframework.*: ")
    assert "FileInputStream.java:213" in marker[0]


def test_node_frames():
    out = _check_invariants(NODE_TRACE)
    assert "TypeError: Cannot read properties of undefined (reading 'id')" in out
    assert "(/srv/app/src/users/service.ts:31:22)" in out
    assert "(/srv/app/src/users/controller.ts:12:5)" in out
    assert "express/lib" not in out and "task_queues" not in out
    marker = [x for x in _lines(out) if "frames in" in x]
    assert marker == [
        "    … 5 frames in node_modules (express), node internals:"
        " layer.js:95 route.js:149 route.js:119 index.js:284 …"
    ]


def test_go_panic():
    out = _check_invariants(GO_TRACE)
    for keep in (
        "panic: runtime error: index out of range [5] with length 3",
        "goroutine 1 [running]:",
        "\t/home/u/proj/main.go:12",
        "\t/home/u/proj/main.go:7 +0x1d",
        "exit status 2",
    ):
        assert keep in _lines(out)
    assert "proc.go" not in out and "asm_amd64" not in out
    assert "… 2 frames in Go runtime …" in _lines(out)


def test_rust_backtrace():
    out = _check_invariants(RUST_TRACE)
    for keep in (
        "thread 'main' panicked at src/main.rs:4:5:",
        "explicit panic",
        "   2: demo::main",
        "             at ./src/main.rs:4:5",
    ):
        assert keep in _lines(out)
    assert "library/std/src/panicking.rs" not in out  # folded: the file and line stay
    assert "panicking.rs:645" in out and "function.rs:250" in out
    assert sum("frames in Rust std" in x or "frame in Rust std" in x for x in _lines(out)) == 2


def test_csharp():
    out = _check_invariants(CSHARP_TRACE)
    assert _lines(out)[0] == _lines(CSHARP_TRACE)[0]
    assert "OrderService.cs:line 42" in out and "Program.cs:line 12" in out
    assert "ThrowHelper" not in out and "Enumerable.First" not in out
    assert "   … 2 frames in System.* …" in _lines(out)


def test_deep_recursion_folds_to_one_cycle():
    frames = "".join(
        '  File "/w/p/tree.py", line 8, in walk\n    return walk(node.left)\n' for _ in range(60)
    )
    text = "Traceback (most recent call last):\n" + frames + "RecursionError: too deep\n"
    result = compress_error(text, OPTS)
    out = result.text
    assert out.count('File "/w/p/tree.py", line 8, in walk') == 1
    assert "previous frame repeated 59 more times" in out
    assert result.counts["frames_repeated"] == 59
    assert "RecursionError: too deep" in out
    assert compress_error(out, OPTS).text == out


def test_repeats_are_judged_on_what_is_printed():
    # the third frame differs only by a caret line that is dropped: a second pass must not fold
    frame = '  File "/proj/app.py", line 9, in g'
    text = "\n".join([frame, frame, frame, "    ^^^^^^^^^^^^^^^^^^^^^^^^", "ValueError: x"])
    out = _check_invariants(text)
    assert out.count(frame) == 1 and "repeated 2 more times" in out


def test_single_short_library_frame_is_not_replaced_by_a_longer_marker():
    text = "Error: x\n    at a (node:fs:1:1)\n    at main (/p/app.js:3:1)\n"
    out = compress_error(text, OPTS).text
    assert "at a (node:fs:1:1)" in out  # the marker would be longer than the frame


def test_pytest_long_format_trims_source_but_keeps_failure():
    body = "".join(f"        step_{k}()\n" for k in range(12))
    text = (
        "________________________________ test_flow ________________________________\n"
        "\n"
        "    def test_flow():\n"
        f"{body}"
        "        value = compute()\n"
        ">       assert value == 3\n"
        "E       assert 2 == 3\n"
        "E        +  where 2 = compute()\n"
        "\n"
        "tests/test_flow.py:17: AssertionError\n"
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n"
        "\n"
        "    def get(url):\n"
        + "".join(f"        line_{k} = {k}\n" for k in range(10))
        + ">       raise ConnectionError(url)\n"
        "E       requests.exceptions.ConnectionError: http://x\n"
        "\n"
        "/venv/lib/python3.11/site-packages/requests/api.py:73: ConnectionError\n"
        "FAILED tests/test_flow.py::test_flow - assert 2 == 3\n"
    )
    out = _check_invariants(text)
    lines = _lines(out)
    for keep in (
        "    def test_flow():",
        ">       assert value == 3",
        "E       assert 2 == 3",
        "E        +  where 2 = compute()",
        "tests/test_flow.py:17: AssertionError",
        "E       requests.exceptions.ConnectionError: http://x",
        "/venv/lib/python3.11/site-packages/requests/api.py:73: ConnectionError",
        "FAILED tests/test_flow.py::test_flow - assert 2 == 3",
    ):
        assert keep in lines
    assert "        step_0()" not in lines and "        step_11()" in lines
    assert "        line_3 = 3" not in lines and "    def get(url):" not in lines
    assert any("source lines" in x for x in lines)
    assert any("library source omitted (site-packages: requests)" in x for x in lines)


def test_pytest_separators_shrink_and_address_only_arguments_go():
    text = (
        "______________________________ test_run ______________________________\n"
        "\n"
        "self = <tests.test_app.TestApp object at 0x000001D3D3ECE300>\n"
        "\n"
        "    def test_run(self):\n"
        ">       app.start(port=0)\n"
        "\n"
        "tests/test_app.py:12: \n" + "_ " * 40 + "\n"
        "\n"
        "self = <app.App object at 0x7fd754039250>, port = 0\n"
        "callback = <function App.start.<locals>.cb at 0x7fd7540daf70>\n"
        "\n"
        "    def start(self, port):\n"
        ">       raise ValueError(f'bad port {port}')\n"
        "E       ValueError: bad port 0\n"
        "\n"
        "app/core.py:40: ValueError\n"
    )
    out = _check_invariants(text)
    lines = _lines(out)
    assert "_ _ _ _ _" in lines and "_ " * 40 not in out
    assert not any(x.startswith("self = <tests.test_app.TestApp object") for x in lines)
    assert not any(x.startswith("callback = <function") for x in lines)
    assert "self = <app.App object at 0x7fd754039250>, port = 0" in lines  # port = 0 is a value
    assert "" in lines and "\n\n\n" not in out  # a dropped line leaves no double blank
    assert not missing_facts(text, out)


def test_jest_code_frames_keep_only_the_failing_line():
    text = (
        "  ● Calculator › adds numbers\n"
        "\n"
        "    expect(received).toBe(expected) // Object.is equality\n"
        "\n"
        "    Expected: 4\n"
        "    Received: 5\n"
        "\n"
        "      10 |   it('adds numbers', () => {\n"
        "      11 |     const calc = new Calculator();\n"
        "    > 12 |     expect(calc.add(2, 2)).toBe(4);\n"
        "         |                            ^\n"
        "      13 |   });\n"
        "      14 |\n"
        "\n"
        "      at Object.<anonymous> (src/calc.test.js:12:28)\n"
    )
    out = _check_invariants(text)
    lines = _lines(out)
    assert "    > 12 |     expect(calc.add(2, 2)).toBe(4);" in lines
    assert not any(re.match(r"^\s+1[0134] \|", x) for x in lines)
    assert not any(re.match(r"^\s+\|\s+\^", x) for x in lines)
    for keep in (
        "    Expected: 4",
        "    Received: 5",
        "      at Object.<anonymous> (src/calc.test.js:12:28)",
    ):
        assert keep in lines
    short = "    > 12 |     x();\n      13 |   });\n"  # too short to be worth trimming
    assert compress_error(short, OPTS).text == short


def test_plain_text_and_empty_input_pass_through():
    assert compress_error("", OPTS).text == ""
    text = "just a message\nwith two lines\n"
    assert compress_error(text, OPTS).text == text


def test_huge_single_line_is_clipped_not_matched():
    line = "ValueError: " + "x" * 1_000_000
    out = compress_error(line, OPTS).text
    assert out.startswith("ValueError: ")
    assert len(out) < 2000
    assert compress_error(out, OPTS).text == out


# --- real material --------------------------------------------------------------------------


def _tracebacks(text: str) -> list[str]:
    """Every Python traceback block in a chat history, up to its exception line."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if not re.match(r"^(> )?Traceback \(most recent call last\):", line):
            continue
        j = i + 1
        while j < len(lines) and j - i < 200:
            body = re.sub(r"^> ?", "", lines[j]).strip()
            if not body or body.startswith("#### ") or lines[j].startswith("#"):
                break
            j += 1
        blocks.append("\n".join(lines[i:j]) + "\n")
    return blocks


def _exception_lines(block: str) -> list[str]:
    return [
        x
        for x in block.splitlines()
        if re.match(r"^(> )?[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Found|Impossible)\b", x)
    ]


def test_real_history_tracebacks_keep_facts(histories_dir: Path):
    text = (histories_dir / "Aider-AI__aider.md").read_text(encoding="utf-8", errors="replace")
    blocks = _tracebacks(text)
    assert len(blocks) > 20
    before = after = 0
    for block in blocks:
        out = _check_invariants(block)
        before += len(block)
        after += len(out)
        for exc in _exception_lines(block):
            assert exc[:300] in out
        for line in block.splitlines():
            if 'File "' in line and not any(m in line for m in LIB_MARKERS):
                assert line in out.splitlines()
            for marker in ("During handling of the above", "The above exception was the direct"):
                if marker in line:
                    assert line in out.splitlines()
    assert after < before


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def test_real_pytest_failures_keep_ids_messages_and_locations(tool_outputs_dir: Path):
    for name in ("pytest_failures_typeerror__X_Ray_LLM.log", "pytest_importerror__ha-whatsapp.log"):
        text = _read(tool_outputs_dir / name)
        out = _check_invariants(text)
        out_lines = out.splitlines()
        for line in text.splitlines():
            if line.startswith(("FAILED ", "ERROR ", "E ")) or re.match(r"^_{3,} .* _{3,}$", line):
                assert line in out_lines, line
            loc = re.match(r"^(tests[\\/]\S+\.py):(\d+):", line)
            if loc:
                assert line in out_lines, line
    big = _read(tool_outputs_dir / "pytest_failures_typeerror__X_Ray_LLM.log")
    assert len(compress_error(big, OPTS).text) < 0.9 * len(big)


def test_real_jest_output_folds_node_modules(tool_outputs_dir: Path):
    text = _read(tool_outputs_dir / "jest_nestjs__neural-ticker-core.txt")
    result = compress_error(text, OPTS)
    out_lines = result.text.splitlines()
    assert result.counts["frames_collapsed"] > 0
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("at ") and "node_modules" not in s and "node:" not in s and "<" not in s:
            assert line in out_lines, line
        if re.search(r"\b\w*Error: ", s):
            assert line in out_lines, line


def test_real_maven_output_keeps_exceptions(tool_outputs_dir: Path):
    text = _read(tool_outputs_dir / "maven_cucumber_java__simple-dtu-pay.txt")
    out_lines = _check_invariants(text).splitlines()
    for line in text.splitlines():
        if re.search(r"\b[\w.]+(Exception|Error)\b", line) or line.lstrip().startswith("at "):
            assert line in out_lines, line


@pytest.mark.parametrize("path", tool_output_files(), ids=lambda p: p.name)
def test_real_tool_outputs_never_grow_are_stable_and_keep_facts(path: Path):
    text = _read(path)
    out = _check_invariants(text)
    assert not missing_facts(text, out)


# --- properties -----------------------------------------------------------------------------

FRAGMENTS = [
    "Traceback (most recent call last):",
    '  File "/x/site-packages/lib/a.py", line 3, in f',
    '  File "/proj/app.py", line 9, in g',
    '> File "/proj/app.py", line 1, in h',
    "    return f(x)",
    "    ^^^^^^^^^^^^^^^^^^^^^^^^",
    "ValueError: boom",
    "    at foo (/app/node_modules/p/index.js:1:2)",
    "    at bar (/app/src/x.js:3:4)",
    "\tat java.lang.Thread.run(Thread.java:750)",
    "\tat com.acme.Main.main(Main.java:3)",
    "Caused by: java.io.IOException: nope",
    "\t... 3 more",
    "goroutine 1 [running]:",
    "main.main()",
    "\t/usr/local/go/src/runtime/proc.go:250 +0x1",
    "stack backtrace:",
    "   0: std::rt::lang_start",
    "             at /rustc/abc/library/std/src/rt.rs:1:1",
    ">       assert x",
    "E       assert 0",
    "tests/test_a.py:3: AssertionError",
    "/v/site-packages/q/m.py:9: ValueError",
    "_ _ _ _ _ _ _ _ _ _ _ _",
    "_ " * 40,
    "self = <app.Loader object at 0x7f00ab>",
    "",
    "      11 |     const calc = new Calculator();",
    "    > 12 |     expect(calc.add(2, 2)).toBe(4);",
    "         |                            ^",
    "    … 3 frames in site-packages …",
    "\x1b[31mred\x1b[0m",
    "\ufffd\ufffd\x00binary",
    "",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=60)), max_size=60))
def test_property_never_longer_and_idempotent(parts):
    text = "\n".join(parts)
    out = compress_error(text, OPTS).text
    assert len(out) <= len(text)
    assert compress_error(out, OPTS).text == out


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=2000))
def test_property_arbitrary_text(text):
    out = compress_error(text, CompressOptions(project_root="/proj"))
    assert len(out.text) <= len(text)


# --- speed ----------------------------------------------------------------------------------


def test_benchmark_error_on_real_jest_output(benchmark, tool_outputs_dir: Path):
    text = _read(tool_outputs_dir / "jest_nestjs__neural-ticker-core.txt")
    result = benchmark(compress_error, text, OPTS)
    assert len(result.text) < len(text)


def test_benchmark_error_on_deep_trace(benchmark):
    text = PY_TRACE * 200
    result = benchmark(compress_error, text, OPTS)
    assert len(result.text) < len(text)


RUN = 200_000  # a few ms per pattern when linear; hours for the quadratic ones this replaced


@pytest.mark.parametrize(
    "line",
    [
        "=" * RUN + "!",  # pytest's ===…=== separator: ={3,}.*={3,} was cubic
        " " * RUN + "!",  # jest code frame: \s*>?\s*\d+ was quadratic
        "\t" * RUN,
        "  " + "^" * RUN + "!",  # caret line: [\s~^]*\^[\s~^]*$ was quadratic
    ],
    ids=["equals", "spaces", "tabs", "carets"],
)
def test_long_runs_in_one_line_do_not_hang(line):
    """A pytest failure with the run under its failing line and again after its location."""
    text = (
        "=" * 30 + " FAILURES " + "=" * 30 + "\n" + "_" * 20 + " test_x " + "_" * 20 + "\n\n"
        "    def test_x():\n        value = compute()\n>       assert value == 2\n"
        f"{line}\nE       assert 1 == 2\n\ntests/test_x.py:3: AssertionError\n{line}\n"
        "FAILED tests/test_x.py::test_x - assert 1 == 2\n"
    )
    out = finishes(compress_error, text, CompressOptions())
    assert "tests/test_x.py:3" in out.text and len(out.text) <= len(text)
