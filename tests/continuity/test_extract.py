"""The pattern functions of continuity/extract.py, on synthetic inputs and on the real data."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.continuity.extract import (
    LINE_MAX,
    MAX_ERRORS,
    WINDOW,
    decisions_in,
    edit_paths,
    errors_in,
    is_substantive,
    says_failed,
    scan_output,
    signature,
)
from aider_gardener.store.priority import normalize_path

PYTEST = """============================= test session starts ==============================
platform linux -- Python 3.11.4, pytest-8.3.1, pluggy-1.5.0
rootdir: /tmp/pytest-of-me/pytest-12/proj0
collected 12 items

tests/test_app.py ..F.F.......                                           [100%]

=================================== FAILURES ===================================
_________________________________ test_parse __________________________________
    def test_parse():
>       assert parse("1") == 1
E       AssertionError: assert None == 1
tests/test_app.py:5: AssertionError
=========================== short test summary info ============================
FAILED tests/test_app.py::test_parse - AssertionError: assert None == 1
FAILED tests/test_app.py::test_load[cfg0] - KeyError: 'name'
========================= 2 failed, 10 passed in {t}s =========================
"""

TRACEBACK = """Traceback (most recent call last):
  File "/home/me/proj/src/app.py", line {line}, in main
    run(Config())
  File "/home/me/proj/src/app.py", line 12, in run
    cfg.load()
TypeError: load() missing 1 required positional argument: 'path' (<Config object at {addr}>)
"""


# --------------------------------------------------------------------------- errors


def test_failing_test_ids_and_messages_from_pytest():
    errors = errors_in(PYTEST.format(t="0.31"), "pytest -q")
    lines = [e.line for e in errors]
    assert lines == [
        "FAILED tests/test_app.py::test_parse - AssertionError: assert None == 1",
        "FAILED tests/test_app.py::test_load[cfg0] - KeyError: 'name'",
    ]
    assert {e.kind for e in errors} == {"test"}
    assert scan_output(PYTEST.format(t="0.31")).counts == {"failed": 2, "passed": 10}


def test_signature_is_stable_across_runs_of_the_same_failure():
    a = errors_in(TRACEBACK.format(line=40, addr="0x7f3a2b1c9d10"))
    b = errors_in(TRACEBACK.format(line=44, addr="0x7f00deadbeef"))
    assert [e.key for e in a] == [e.key for e in b]
    assert a[0].kind == "exception"
    assert a[0].line.startswith("TypeError: load() missing 1 required positional argument")
    assert "0x7f3a2b1c9d10" in a[0].line  # shown verbatim, only the key is normalised
    runs = [errors_in(PYTEST.format(t=t)) for t in ("0.31", "12.70")]
    assert [e.key for e in runs[0]] == [e.key for e in runs[1]]


def test_signature_strips_what_changes_between_runs():
    sig = signature(
        "Error at 2024-05-01T12:00:01.123Z in /tmp/pytest-of-x/pytest-3/t0/a.py:12:4 after 35ms,"
        " object 0xdeadbeef, id 3f2a9c1b-1111-2222-3333-444455556666 (line 9)"
    )
    for gone in ("2024-05-01", "pytest-3", ":12:4", "35ms", "deadbeef", "3f2a9c1b", "line 9"):
        assert gone not in sig
    assert sig.startswith("Error at")


def test_a_different_message_is_a_different_error():
    a = errors_in("ValueError: bad port 80\n")
    b = errors_in("ValueError: bad host x\n")
    assert a and b and a[0].key != b[0].key


@pytest.mark.parametrize(
    "output, kind, expected",
    [
        (
            "src/a.ts(3,7): error TS2339: Property 'x' does not exist on type 'Y'.\n",
            "compile",
            "TS2339",
        ),
        (
            "error[E0432]: unresolved import `foo::Bar`\n --> src/lib.rs:5:5\n",
            "compile",
            "src/lib.rs:5",
        ),
        ("src/main.c:10:5: error: 'x' undeclared (first use in this function)\n", "compile", "x"),
        ("./cmd/main.go:12:2: undefined: foo\n", "compile", "undefined: foo"),
        ("src/app.py:3:1: F401 'os' imported but unused\n", "lint", "F401"),
        ("panic: runtime error: index out of range [3] with length 3\n", "exception", "index"),
        ("fatal: not a git repository (or any of the parent directories): .git\n", "error", "git"),
        ("bash: pytset: command not found\n", "error", "pytset"),
        (
            "  Error: canceled\n      at Interface.<anonymous> (cli.js:1:1)\n",
            "exception",
            "canceled",
        ),
    ],
)
def test_error_shapes(output, kind, expected):
    errors = errors_in(output)
    assert errors, output
    assert errors[0].kind == kind
    assert expected in errors[0].line


def test_plain_prose_and_logs_without_errors_give_none():
    text = "Everything is fine.\nINFO server started on port 8080\nhandled 12 requests\n" * 50
    assert errors_in(text) == []
    assert errors_in("") == []


def test_errors_are_capped_and_clipped():
    out = "".join(f"src/f{i}.ts(1,1): error TS2304: Cannot find name 'n{i}'.\n" for i in range(500))
    errors = errors_in(out + "x" * 5000 + ": error TS1005: ';' expected.\n")
    assert len(errors) == MAX_ERRORS
    assert all(len(e.line) <= LINE_MAX and "\n" not in e.line for e in errors)


def test_huge_output_is_scanned_at_both_ends_only():
    head = "TypeError: first failure\n"
    tail = "KeyError: 'last'\n"
    middle = "NameError: in the middle\n" + ("noise line\n" * (3 * WINDOW // 11))
    errors = errors_in(head + ("noise line\n" * (WINDOW // 11)) + middle + tail)
    lines = [e.line for e in errors]
    assert "TypeError: first failure" in lines and "KeyError: 'last'" in lines
    assert "NameError: in the middle" not in lines


def test_real_tool_outputs_keep_their_critical_facts(tool_outputs_dir: Path):
    expect = {
        "tsc_errors__wealth-aggregator.txt": ["TS2339"],
        "cargo_compile_error__tsql_wasm.txt": ["E0432", "session.rs:5"],
        "pytest_importerror__ha-whatsapp.log": [
            "tests/test_binary_sensor.py",
            "ModuleNotFoundError: No module named 'homeassistant'",
        ],
        "go_test_gin__mybatis-generator-gui-go.txt": ["TestHandleLoginAPI_Success"],
        "yarn_error__wonka.log": ["Error: canceled"],
        "c_build_log__minix.log": ["make: *** [apple-silicon] Error 1"],
    }
    for name, needles in expect.items():
        path = tool_outputs_dir / name
        if not path.exists():
            continue
        joined = "\n".join(e.line for e in errors_in(path.read_text(errors="replace")))
        for needle in needles:
            assert needle in joined, (name, needle)


def test_real_pytest_output_names_every_failing_test(tool_outputs_dir: Path):
    path = tool_outputs_dir / "pytest_failures_typeerror__X_Ray_LLM.log"
    if not path.exists():
        pytest.skip("file absent")
    text = path.read_text()
    ids = re.findall(r"^FAILED (\S+)", text, re.M)
    errors = errors_in(text, "pytest")
    shown = [e.line for e in errors if e.kind == "test"]
    assert ids and len(shown) == min(len(ids), MAX_ERRORS)
    # two summary lines were cut before their message: the exception lines say why
    assert any(e.line.startswith("TypeError: build_json_report()") for e in errors)
    for test_id in ids[:MAX_ERRORS]:
        assert any(line.startswith(f"FAILED {test_id}") for line in shown)


def test_logs_without_failures_give_no_errors(tool_outputs_dir: Path):
    for name in ("loghub_HDFS_2k.log", "jest_nestjs__neural-ticker-core.txt"):
        path = tool_outputs_dir / name
        if path.exists():
            assert errors_in(path.read_text(errors="replace")) == [], name


# --------------------------------------------------------------------------- decisions


@pytest.mark.parametrize(
    "text, kind, key, line",
    [
        (
            "use httpx instead of requests",
            "decision",
            "use:httpx|requests",
            "use httpx instead of requests",
        ),
        (
            "Fix the timeout. Let's use `httpx` rather than requests for the client.",
            "decision",
            "use:httpx|requests",
            "Let's use `httpx` rather than requests for the client.",
        ),
        ("Instead of Flask, use FastAPI.", "decision", "use:fastapi|flask", None),
        ("I prefer pytest over unittest", "decision", "use:pytest|unittest", None),
        ("ok, go with SQLite", "decision", "use:sqlite", None),
        ("We should switch to pnpm.", "decision", "use:pnpm", None),
        ("Don't change the public API.", "constraint", None, "Don't change the public API."),
        ("Never commit the .env file", "constraint", None, None),
        ("The parser must support Python 3.8.", "constraint", None, None),
        ("Please make sure the tests still pass", "constraint", None, None),
        ("- always run black before committing", "constraint", None, None),
        ("Keep the old endpoint working", "constraint", None, None),
    ],
)
def test_user_decisions_and_constraints(text, kind, key, line):
    found = decisions_in(text, "user")
    assert len(found) == 1, found
    got_kind, got_key, got_line = found[0]
    assert got_kind == kind
    if key:
        assert got_key == key
    if line:
        assert got_line == line


@pytest.mark.parametrize(
    "text",
    [
        "why does it use requests instead of httpx?",
        "should we use httpx instead of requests?",
        "I don't know why the test fails",
        "Fix the bug in the parser",
        "The function should return a list",
        "It doesn't work when the file is empty",
        "```python\n# don't use globals\nuse(x) instead of y\n```",
        "    # Never do this: use eval instead of ast\n",
        "> don't change anything\n",
        "keep going",
        "",
    ],
)
def test_no_decision_from_questions_code_or_plain_requests(text):
    assert decisions_in(text, "user") == []


def test_assistant_agreement_only_in_prose():
    reply = """I'll use httpx instead of requests, since it supports async.

src/client.py
```python
<<<<<<< SEARCH
import requests
=======
import httpx  # let's use httpx instead of requests
>>>>>>> REPLACE
```

Don't forget to install it. You must restart the server.
"""
    found = decisions_in(reply, "assistant")
    assert found == [
        (
            "decision",
            "use:httpx|requests",
            "I'll use httpx instead of requests, since it supports async.",
        )
    ]
    assert decisions_in("Switching to aiohttp for the client.", "assistant")[0][1] == "use:aiohttp"
    assert decisions_in("You should use httpx instead of requests.", "assistant") == []


def test_decision_lines_are_clipped_single_lines():
    long = "use httpx instead of requests " + "because " * 30
    ((_, _, line),) = decisions_in(long, "user")
    assert len(line) <= LINE_MAX and "\n" not in line


# --------------------------------------------------------------------------- follow-ups


@pytest.mark.parametrize(
    "prompt, expected",
    [
        ("Add a --verbose flag to the CLI", True),
        ("/ask how does the parser work?", True),
        ("fix the failing test in tests/test_app.py", True),
        ("yes", False),
        ("ok go ahead", False),
        ("Thanks!", False),
        ("try again", False),
        ("fix it", False),
        ("/run pytest -q", False),
        ("/add src/app.py", False),
        ("I ran this command:\n\npytest\n\nAnd got this output:\n\nok", False),
        ("", False),
    ],
)
def test_is_substantive(prompt, expected):
    assert is_substantive(prompt) is expected


@pytest.mark.parametrize(
    "prompt, expected",
    [
        ("that didn't work", True),
        ("It's still failing with the same error", True),
        ("same error", True),
        ("still broken", True),
        ("this does not fix it", True),
        ("please revert that change", True),
        ("undo", True),
        ("The login button doesn't work, please fix it", False),
        ("Add retries to the HTTP client", False),
        ("```\nFAILED test_x - still failing\n```", False),
        ("/undo", False),
        ("", False),
    ],
)
def test_says_failed(prompt, expected):
    assert says_failed(prompt) is expected


# --------------------------------------------------------------------------- edits

SR_REPLY = """Here are the changes.

src/app.py
```python
<<<<<<< SEARCH
old
=======
new
>>>>>>> REPLACE
```

tests/test_app.py
```python
<<<<<<< SEARCH
=======
def test_new(): pass
>>>>>>> REPLACE
```

```bash
pytest -q
```
"""


def test_search_replace_blocks():
    assert edit_paths(SR_REPLY) == ["src/app.py", "tests/test_app.py"]
    assert edit_paths(SR_REPLY, "diff") == ["src/app.py", "tests/test_app.py"]
    assert edit_paths(SR_REPLY, "ask") == []


def test_source_fence_and_blank_line_before_fence():
    block = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n"
    source = f"aider/commands.py\n<source>python\n{block}</source>\n"
    assert edit_paths(source) == ["aider/commands.py"]
    gap = f"app/styles/app.css\n\n```css\n{block}```\n"
    assert edit_paths(gap) == ["app/styles/app.css"]


def test_malformed_block_keeps_the_blocks_before_it():
    broken = SR_REPLY.split("tests/test_app.py")[0] + "<<<<<<< SEARCH\nno divider\n"
    assert edit_paths(broken) == ["src/app.py"]


def test_unified_diff_and_patch_formats():
    udiff = "```diff\n--- a/src/app.py\n+++ b/src/app.py\n@@ ... @@\n-old\n+new\n```\n"
    assert edit_paths(udiff) == ["src/app.py"]
    assert edit_paths(udiff, "udiff") == ["src/app.py"]
    patch = (
        "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n"
        "*** Add File: src/new.py\n+x\n*** End Patch\n"
    )
    assert edit_paths(patch, "patch") == ["src/app.py", "src/new.py"]


def test_whole_file_format_only_when_asked():
    whole = (
        "Here it is:\n\nsrc/app.py\n```python\nprint(1)\n```\n\n"
        ".gitignore\n<source>\n*.pyc\n</source>\n"
    )
    assert edit_paths(whole, "whole") == ["src/app.py", ".gitignore"]
    assert edit_paths(whole, "editor-whole") == ["src/app.py", ".gitignore"]
    assert edit_paths(whole) == []  # an ask-style reply with a named snippet edits nothing
    assert edit_paths("Run this:\n\n```bash\nmake\n```\n", "whole") == []


# Real transcripts: which reply did Aider apply, and to which files?
_APPLIED = re.compile(r"^> (?:Applied edit to|Did not apply edit to) (.+?)\s*$")
_FORMAT = re.compile(r"^> (?:Main model|Models?|Model): .*? with (?:\S+ )?([\w-]+) edit format")
_EDITOR = re.compile(r"^> Editor model: .*? with (?:\S+ )?([\w-]+) edit format")
_EDIT_ERROR = re.compile(r"did not conform|failed to match|SEARCH/REPLACE block")
# Outcomes that make a reply's "Applied edit" lines meaningless: Aider rejected or discarded it.
_UNKNOWN = re.compile(
    r"did not conform|failed to match|Skipping edits to|Did not apply edit|Malformed"
    r"|SEARCH/REPLACE block|hit a token limit|KeyboardInterrupt|\^C"
    r"|Add (?:file|these files) to the chat\?.*: ?[yYaA]\w*\s*$"
)


def _chunks(text: str) -> list[tuple[str, list[str]]]:
    """(role, lines) runs of an ``.aider.chat.history.md``: ``#### `` user, ``> `` tool (old
    Aider versions continue a tool message on unprefixed lines), anything else assistant."""
    out: list[tuple[str, list[str]]] = []
    role: str | None = None
    cur: list[str] = []
    prev_tool = False
    for line in text.split("\n"):
        if line.startswith("#### "):
            r = "user"
        elif line.startswith("> ") or line.rstrip() == ">":
            r = "tool"
        elif role == "tool" and line.strip() and prev_tool:
            r = "tool"
        elif not line.strip() and role is not None:
            r = role
        else:
            r = "assistant"
        prev_tool = r == "tool" and bool(line.strip())
        if r != role:
            if cur and role:
                out.append((role, cur))
            role, cur = r, []
        cur.append(line)
    if cur and role:
        out.append((role, cur))
    return out


def _replies(text: str) -> Iterator[tuple[str, str | None, list[str], list[str]]]:
    """``(reply, edit format, applied paths, tool lines after it)`` for each assistant reply.

    The format is the session's (``Main model: … with diff edit format``), ``/chat-mode``
    switches it, ``/ask`` and ``/architect`` set it for one turn; in architect mode Aider
    sends the architect's reply to the editor as the next user message, and the reply to that
    is the editor's (its format from ``Editor model:``, else Aider's default)."""
    chunks = _chunks(text)
    fmt = editor = turn_fmt = None
    last_reply = ""
    for i, (role, lines) in enumerate(chunks):
        if role == "tool":
            for line in lines:
                if m := _FORMAT.match(line):
                    fmt = m.group(1)
                if m := _EDITOR.match(line):
                    editor = m.group(1)
            continue
        if role == "user":
            prompt = "\n".join(x[5:] for x in lines if x.startswith("#### ")).strip()
            if m := re.match(r"/chat-mode\s+(\S+)", prompt):
                fmt, turn_fmt = m.group(1), None
                continue
            echo = (
                bool(last_reply)
                and " ".join(prompt.split())[:150] == " ".join(last_reply.split())[:150]
            )
            if echo and turn_fmt in ("architect", "editor"):
                turn_fmt = "editor"
            elif prompt.startswith("/ask"):
                turn_fmt = "ask"
            elif prompt.startswith("/architect"):
                turn_fmt = "architect"
            elif prompt.startswith("/code"):
                turn_fmt = None if fmt in ("ask", "architect") else fmt
            else:
                turn_fmt = fmt
            continue
        body = "\n".join(lines)
        if not body.strip():
            continue
        before = chunks[i - 1][1] if i and chunks[i - 1][0] == "tool" else []
        if any(_EDIT_ERROR.search(x) for x in before[-3:]):
            continue  # the unprefixed rest of Aider's edit-error message
        last_reply = body
        reply_fmt = turn_fmt
        if turn_fmt == "editor":
            reply_fmt = editor or ("editor-whole" if fmt == "whole" else "editor-diff")
        tool: list[str] = []
        j = i + 1
        while j < len(chunks) and chunks[j][0] == "tool":
            tool += chunks[j][1]
            j += 1
        applied = [m.group(1) for x in tool if (m := _APPLIED.match(x))]
        yield body, reply_fmt, applied, tool


def test_edit_paths_against_aiders_applied_edits(histories_dir: Path):
    """Precision and recall of ``edit_paths`` against the ``> Applied edit to PATH`` lines
    Aider wrote after each reply. Replies are left out when the transcript cannot tell what
    Aider did with them: no tool output follows (interrupted), Aider rejected the reply (edit
    format errors, failed matches, a truncated reply), or it discarded the reply to re-ask
    with files the user just added ("Add file to the chat? y")."""
    tp = fp = fn = replies = 0
    for path in sorted(histories_dir.glob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for reply, fmt, applied, tool in _replies(text):
            if not tool or any(_UNKNOWN.search(x) for x in tool):
                continue
            replies += 1
            got = {normalize_path(p) for p in edit_paths(reply, fmt)}
            want = {normalize_path(p) for p in applied}
            tp += len(got & want)
            fp += len(got - want)
            fn += len(want - got)
    precision = tp / (tp + fp)
    recall = tp / (tp + fn)
    print(
        f"\nedit_paths over {replies} replies: {tp + fn} applied paths,"
        f" precision {precision:.3f}, recall {recall:.3f} (tp={tp} fp={fp} fn={fn})"
    )
    assert tp + fn > 500
    assert precision >= 0.95
    assert recall >= 0.95


# --------------------------------------------------------------------------- robustness

_odd_text = st.one_of(
    st.text(max_size=400),
    st.text(alphabet=st.sampled_from(list("<=>`~#/\\:.\n -_|EF*@")), max_size=400),
    st.sampled_from(
        [
            "\udcff\udc80 lone surrogates",
            "\x00\x01\x02binary\x1b[31mred\x1b[0m",
            "<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE\n",
            "```diff\n--- \n+++ \n@@\n```",
            "x" * 5000,
        ]
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_odd_text, st.sampled_from([None, "pytest -q", "tsc", "", "cargo test"]))
def test_errors_in_never_raises(text, command):
    errors = errors_in(text, command)
    assert len(errors) <= MAX_ERRORS
    assert all(len(e.line) <= LINE_MAX and "\n" not in e.line for e in errors)
    assert [e.key for e in errors] == [e.key for e in errors_in(text, command)]


@settings(max_examples=150, deadline=None)
@given(_odd_text, st.sampled_from(["user", "assistant", "tool"]))
def test_text_functions_never_raise(text, role):
    for kind, key, line in decisions_in(text, role):
        assert kind in ("decision", "constraint") and key and len(line) <= LINE_MAX
    assert isinstance(is_substantive(text), bool)
    assert isinstance(says_failed(text), bool)


@settings(max_examples=150, deadline=None)
@given(_odd_text, st.sampled_from([None, "diff", "whole", "udiff", "patch", "ask", "bogus"]))
def test_edit_paths_never_raises(text, fmt):
    paths = edit_paths(text, fmt)
    assert all(isinstance(p, str) and p for p in paths)
    assert len(paths) == len(set(paths))


def test_non_strings_are_handled():
    for value in (None, 42, b"bytes", ["a"]):
        assert errors_in(value) == []  # type: ignore[arg-type]
        assert decisions_in(value) == []  # type: ignore[arg-type]
        assert is_substantive(value) is False  # type: ignore[arg-type]
        assert says_failed(value) is False  # type: ignore[arg-type]
        assert edit_paths(value) == []  # type: ignore[arg-type]


def test_server_log_errors_and_failure_exceptions_are_errors():
    """An Odoo upgrade that exits 0 but logs ERROR lines and a ``…Failure`` exception (seen in a
    real Claude Code session): each is an error, keyed by its message, the timestamp gone."""
    out = (
        "2026-05-05 23:10:11,248 1225 WARNING odoo18 odoo.modules.loading: states were reset\n"
        "2026-05-05 23:10:11,249 1225 ERROR odoo18 odoo.modules.registry: Failed to load registry\n"
        "psycopg2.errors.SerializationFailure: could not serialize access due to concurrent"
        " update\n"
    )
    errors = errors_in(out, "odoo -d odoo18 -u x --stop-after-init")
    lines = {e.kind: e.line for e in errors}
    assert lines["log"] == "1225 ERROR odoo18 odoo.modules.registry: Failed to load registry"
    assert lines["exception"].startswith("psycopg2.errors.SerializationFailure: could not")
    assert not any("WARNING" in e.line for e in errors)
    again = errors_in(out.replace("23:10:11,249 1225", "23:12:40,001 1301"), "odoo")
    assert {e.key for e in again} == {e.key for e in errors}


def test_log_errors_do_not_repeat_a_test_or_tool_error():
    out = (
        "FAILED tests/x.py::test_a - ValueError: boom\nERROR tests/y.py::test_c - ImportError: x\n"
    )
    assert [e.kind for e in errors_in(out, "pytest")] == ["test", "test"]
    assert [e.kind for e in errors_in("ERROR: could not build wheels for x\n")] == ["error"]


def test_claude_codes_exit_line_gives_way_to_the_errors_below_it():
    out = "Error: Exit code 127\n/usr/bin/bash: line 1: Select-Object: command not found\n"
    assert [e.line for e in errors_in(out)] == [
        "/usr/bin/bash: line 1: Select-Object: command not found"
    ]
    assert [e.line for e in errors_in("Error: Exit code 2\n")] == ["Error: Exit code 2"]


def test_a_declined_tool_call_is_no_error():
    from aider_gardener.continuity.extract import is_rejection

    assert is_rejection("User rejected tool use")
    assert is_rejection("Error: The user doesn't want to proceed with this tool use. The tool")
    assert is_rejection("Error: Blocked: sleep 30 followed by: docker exec web odoo")
    assert not is_rejection("Error: Exit code 1\nUser rejected nothing")


# --- commands run again, and fixes said (issue 22, point 6) ---


@pytest.mark.parametrize(
    "line, family",
    [
        # the shapes one command took in a real Claude Code session (an Odoo module install)
        (
            "sleep 15 && docker exec web-1 odoo -d db -i leads --stop-after-init 2>&1 | grep -iE"
            ' "leads|error|loaded in" | head -30',
            "docker exec web-1 odoo -d db -i leads --stop-after-init",
        ),
        (
            "docker exec web-1 odoo -d db -i leads --stop-after-init 2>&1 | tail -10",
            "docker exec web-1 odoo -d db -i leads --stop-after-init",
        ),
        (
            "cd /srv/app && FOO=1 timeout 60 python -m pytest -q tests/",
            "python -m pytest -q tests/",
        ),
        ("export PATH=/opt/bin:$PATH && make -j4 2>/dev/null", "make -j4"),
        ('git add -A && git commit -m "fix: a && b"', "git add -A && git commit -m fix: a && b"),
        ("ls -la /x 2>/dev/null && echo done", "ls -la /x"),
        ("pytest", "pytest"),
        # a real session: `gh` was missing, then found by its full path
        (
            "/opt/homebrew/bin/gh pr view 6621 2>/dev/null || ~/bin/gh pr view 6621",
            "gh pr view 6621",
        ),
        ("cd /tmp", ""),
        ("", ""),
    ],
)
def test_command_family(line, family):
    from aider_gardener.continuity.extract import command_family

    assert command_family(line) == family


def test_partial_output_is_a_view_that_cannot_show_an_error_gone():
    from aider_gardener.continuity.extract import partial_output

    assert partial_output("pytest -q 2>&1 | head -30")
    assert partial_output("make | grep -v warning")
    assert partial_output("odoo -i leads | grep -iE 'leads|loaded in'")
    assert partial_output("cargo build | sed -n '1,40p'")
    assert not partial_output("pytest -q 2>&1 | tail -20")  # the verdict comes last
    assert not partial_output("odoo -i leads 2>&1 | grep -iE 'leads|error|loaded in'")
    assert not partial_output('pytest -q -k "a or b"')  # a quoted | is no pipe
    assert not partial_output("pytest -q")


def test_grep_finding_nothing_is_an_answer_not_a_failure():
    from aider_gardener.continuity.extract import answer_exit

    assert answer_exit('grep -n "class.*Model" src/models.py', 1)
    assert answer_exit("cd src && rg TODO 2>/dev/null", 1)
    assert answer_exit("pytest -q | grep FAILED", 1)
    assert not answer_exit("grep -n x missing.py", 2)  # no such file: an error
    assert not answer_exit("pytest -q", 1)
    assert not answer_exit("grep x a.py && make", 1)  # make ran last


def test_claude_codes_unjudged_command_did_not_run():
    from aider_gardener.continuity.extract import is_rejection

    # Claude Code 2.1.x auto mode, when the model that judges a command's safety is down
    assert is_rejection(
        "Error: claude-opus-4-8 is temporarily unavailable, so auto mode cannot determine the"
        " safety of Bash right now."
    )
    assert is_rejection("<tool_use_error>Blocked: sleep 30 followed by: make</tool_use_error>")


@pytest.mark.parametrize(
    "text, scope",
    [
        # said in real Claude Code sessions
        ("Tests pass. Now I'll stage and commit the changes.", "tests"),
        ("All tests pass with 100% line coverage.", "tests"),
        ("Fixed. The base search view defines the filter as `name='stage'`.", "any"),
        ("Fixed! The syntax error was on line 22-23 where an `elif` was incomplete.", "any"),
        ("Both modules installed successfully — `Modules loaded`, no errors.", "any"),
        ("## DNS Resolution Fixed", "any"),
        # said by users
        ("that works now, thanks", "any"),
        ("it works now! next: the export button", "any"),
        ("tests pass now", "tests"),
        ("the build succeeds now", "build"),
        ("12 passed in 0.41s", "tests"),
        # not a fix
        ("does it work now?", None),
        ("if the tests pass, commit", None),
        ("not fixed yet, same error", None),
        ("that didn't work", None),
        ("the tests should pass now", None),
        ("Let me make sure the tests pass", None),
        ("I fixed the import; let me run the tests", None),
        ("Two things need to be fixed first", None),
        ("fixed width columns please", None),
        ("The column width is fixed at 400px", None),
        ("Correct! Here's how it works: same-day rows are replaced", None),
        ("3 passed, 1 failed", None),
        ("", None),
    ],
)
def test_says_fixed(text, scope):
    from aider_gardener.continuity.extract import says_fixed

    assert says_fixed(text) == scope


def test_a_claim_naming_what_it_fixed_keeps_those_words():
    from aider_gardener.continuity.extract import claim_words

    assert claim_words("Fixed the KeyError in parse().") == {"keyerror", "parse"}
    assert {"syntax", "elif"} <= claim_words(
        "Fixed! The syntax error was on line 22-23 where an `elif` was incomplete."
    )
    assert claim_words("## DNS Resolution Fixed") == {"dns", "resolution"}
    assert claim_words("Fixed. Now let me restart the server.") == set()  # a bare claim
    assert claim_words("that works now") == set()
    assert claim_words("tests pass") == set()


@settings(max_examples=150, deadline=None)
@given(_odd_text)
def test_command_and_claim_functions_never_raise(text):
    from aider_gardener.continuity.extract import (
        answer_exit,
        claim_words,
        command_family,
        partial_output,
        says_fixed,
    )

    assert isinstance(command_family(text), str)
    assert isinstance(partial_output(text), bool)
    assert isinstance(answer_exit(text, 1), bool)
    assert says_fixed(text) in (None, "tests", "build", "any")
    assert isinstance(claim_words(text), set)
