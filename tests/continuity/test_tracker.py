"""FactTracker: Aider's messages and events in, facts out."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.continuity.extract import LINE_MAX
from aider_gardener.continuity.facts import FactBook
from aider_gardener.continuity.tracker import FactTracker, command_key

PYTEST_FAIL = """============================= test session starts ==============================
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
FAILED tests/test_app.py::test_load - KeyError: 'name'
========================= 2 failed, 10 passed in {t}s =========================
"""
PYTEST_ONE = PYTEST_FAIL.replace("FAILED tests/test_app.py::test_load - KeyError: 'name'\n", "")
PYTEST_ONE = PYTEST_ONE.replace("2 failed, 10 passed", "1 failed, 11 passed")
PYTEST_PASS = "============================= 12 passed in 0.20s ==============================\n"

REPLY_EDIT = """I'll fix the parser.

src/app.py
```python
<<<<<<< SEARCH
def parse(s):
    pass
=======
def parse(s):
    return int(s)
>>>>>>> REPLACE
```
"""

PARSE = "test:tests/test_app.py::test_parse"
LOAD = "test:tests/test_app.py::test_load"


def texts(tracker: FactTracker, kind: str) -> list[str]:
    return [f.text for f in tracker.book.find(kind)]


def check_lines(tracker: FactTracker) -> None:
    for fact in tracker.book:
        assert fact.text and len(fact.text) <= LINE_MAX and "\n" not in fact.text, fact


def test_scripted_session():
    t = FactTracker()
    # turn 1: the request, the reply with its edit, Aider applies and commits, tests fail
    t.on_prompt("Add a config parser to src/app.py", 1, "p1")
    t.on_files_added(["src/app.py"], 1)
    t.on_reply(REPLY_EDIT, 1, "r1")
    t.on_edit_applied(["src/app.py"], 1)
    t.on_commit("a1b2c3d", "feat: add config parser", ["src/app.py"], 1)
    assert texts(t, "file") == ["src/app.py: edited, commit a1b2c3d feat: add config parser"]
    t.on_output("/test pytest -q", PYTEST_FAIL.format(t="0.31"), 1, "o1", exit_code=1)
    assert texts(t, "command") == ["`pytest -q` -> 2 failed, 10 passed"]
    errors = {f.key: f for f in t.book.find("error")}
    assert set(errors) == {PARSE, LOAD}
    assert errors[PARSE].text == (
        "FAILED tests/test_app.py::test_parse - AssertionError: assert None == 1"
    )
    assert errors[PARSE].detail["command"] == "pytest -q" and errors[PARSE].entry_id == "o1"
    assert t.open_error_entry_ids() == {"o1"}

    # turn 2: an edit that fixes nothing: the same failures again -> a failed approach
    t.on_prompt("fix the failing tests", 2, "p2")
    t.on_reply(REPLY_EDIT.replace("int(s)", "int(s or 0)"), 2, "r2")
    t.on_edit_applied(["src/app.py"], 2)
    t.on_commit("b2c3d4e", "fix: default to zero", ["src/app.py"], 2)
    t.on_output("pytest -q", PYTEST_FAIL.format(t="0.29"), 2, "o2", exit_code=1)
    (failed,) = t.book.find("failed")
    assert failed.text.startswith(
        "edit of src/app.py (commit b2c3d4e fix: default to zero, turn 2): did not fix: FAILED"
    )
    assert "(+1 more)" in failed.text
    assert failed.detail["paths"] == ["src/app.py"] and failed.detail["commits"][0][0] == "b2c3d4e"
    assert all(f.status == "open" for f in t.book.find("error"))  # the errors stay open
    assert t.book.current("error", PARSE).detail["failed_again"] == 1
    assert t.failed_entry_ids() == {"r2", "o2"}
    assert t.open_error_entry_ids() == {"o1", "o2"}

    # turn 3: an edit that fixes test_load: resolved by that edit; test_parse fails again
    t.on_prompt("fix the KeyError in load", 3, "p3")
    t.on_edit_applied(["src/config.py"], 3, created=["src/config.py"])
    t.on_commit("c3d4e5f", "fix: load name", ["src/config.py"], 3)
    t.on_output("pytest -q", PYTEST_ONE.format(t="0.30"), 3, "o3", exit_code=1)
    load = t.book.current("error", LOAD)
    assert load.status == "resolved"
    assert (
        load.detail["resolved_by"]
        == "edit of src/config.py (commit c3d4e5f fix: load name, turn 3)"
    )
    assert load.detail["resolved_turn"] == 3 and load.text.startswith("FAILED tests/")
    assert t.book.current("error", PARSE).status == "open"
    # turn 3's edit fixed test_load: it was aimed at that, so test_parse still failing after it
    # does not make it a failed approach (issue 13: one was pinned on an edit that fixed
    # another test)
    assert [f.key for f in t.book.find("failed")] == ["attempt:2"]

    # turn 4: decisions; the later one replaces the choice of httpx
    t.on_prompt("use httpx instead of requests", 4, "p4")
    t.on_prompt("use aiohttp instead of httpx", 5, "p5")
    decisions = t.book.find("decision", live=False)
    assert [d.text for d in decisions] == [
        "use httpx instead of requests",
        "use aiohttp instead of httpx",
    ]
    assert decisions[0].status == "superseded" and decisions[0].superseded_by == decisions[1].id
    assert decisions[1].detail == {"use": "aiohttp", "instead_of": "httpx", "by": "user"}
    assert texts(t, "goal") == ["fix the KeyError in load"]  # rules alone are not a goal

    # turn 6: /undo of the commit that fixed test_load: failed approach, error open again
    t.on_undo("c3d4e5f", "fix: load name", 6)
    assert t.book.current("error", LOAD).status == "open"
    assert t.book.current("error", LOAD).detail["reopened_turn"] == 6
    undone = t.book.current("failed", "attempt:3")
    assert undone.text == (
        "edit of src/config.py (commit c3d4e5f fix: load name, turn 3): undone: commit c3d4e5f"
        " fix: load name (turn 6)"
    )
    assert undone.detail["undone"] is True
    # an undone commit's files are not "edited"/"created" any more
    config = t.book.current("file", "src/config.py")
    assert config.text == "src/config.py: undone, commit c3d4e5f fix: load name (in turn 6)"
    assert config.detail["op"] == "undone"

    # turn 7: an edit, then everything passes: resolved by that edit
    t.on_edit_applied(["src/app.py"], 7)
    t.on_commit("d4e5f6a", "fix: parse ints", ["src/app.py"], 7)
    t.on_output("pytest -q", PYTEST_PASS, 7, "o4", exit_code=0)
    parse = t.book.current("error", PARSE)
    assert parse.status == "resolved"
    assert (
        parse.detail["resolved_by"] == "edit of src/app.py (commit d4e5f6a fix: parse ints, turn 7)"
    )
    assert t.open_error_entry_ids() == set()
    assert texts(t, "command") == ["`pytest -q` -> 12 passed"]
    assert {"r2", "o2"} <= t.failed_entry_ids()
    check_lines(t)


def test_user_saying_it_failed_blames_the_latest_edits():
    t = FactTracker()
    t.on_prompt("Make the header sticky", 1, "p1")
    t.on_edit_applied(["app/Header.tsx", "app/app.css"], 1)
    t.on_commit("abc1234", "feat: sticky header", [], 1)  # no paths: the latest attempt's
    t.on_prompt("that didn't work, it still scrolls away", 2, "p2")
    (failed,) = t.book.find("failed")
    assert failed.text.startswith("edit of app/Header.tsx, app/app.css (commit abc1234")
    assert 'user said "that didn\'t work, it still scrolls away"' in failed.text
    assert failed.entry_id == "p2" and "p2" in t.failed_entry_ids()
    assert texts(t, "goal") == ["Make the header sticky"]  # a complaint is not a new goal
    t.on_prompt("still broken", 3, "p3")  # no new edit since: nothing new to blame
    assert len(t.book.find("failed")) == 1
    assert texts(t, "file") == [
        "app/Header.tsx: edited, commit abc1234 feat: sticky header",
        "app/app.css: edited, commit abc1234 feat: sticky header",
    ]


def test_error_gone_without_an_edit_and_incomplete_runs():
    t = FactTracker()
    crash = "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'a'\n"
    other = 'Traceback (most recent call last):\n  File "x.py", line 9\nValueError: b\n'
    t.on_output("python x.py", crash, 1, "o1", exit_code=1)
    t.on_output("python x.py", other, 2, "o2", exit_code=1)
    # a different crash hides what would have followed: KeyError is not known to be fixed
    assert [f.status for f in t.book.find("error")] == ["open", "open"]
    t.on_output("python x.py", "done\n", 3, "o3", exit_code=0)
    assert [f.status for f in t.book.find("error")] == ["resolved", "resolved"]
    assert all(f.detail["resolved_turn"] == 3 for f in t.book.find("error"))
    assert all(f.detail["resolved_by"] is None for f in t.book.find("error"))


def test_other_commands_do_not_resolve_an_error():
    t = FactTracker()
    t.on_output("pytest -q", PYTEST_FAIL.format(t="1"), 1, "o1", exit_code=1)
    t.on_edit_applied(["src/app.py"], 2)
    t.on_output("ruff check .", "All checks passed!\n", 2, "o2", exit_code=0)
    assert {f.status for f in t.book.find("error")} == {"open"}
    assert texts(t, "command")[-1] == "`ruff check .` -> ok"


def test_failed_command_without_recognisable_errors():
    t = FactTracker()
    t.on_output("npm run build", "building...\nsomething odd happened\n", 1, "o1", exit_code=2)
    (err,) = t.book.find("error")
    assert err.text == "exit 2: something odd happened"
    assert err.detail["command"] == "npm run build"
    t.on_edit_applied(["package.json"], 2)
    t.on_output("npm run build", "built in 3s\n", 2, "o2", exit_code=0)
    assert t.book.current("error", err.key).status == "resolved"


def test_decision_supersede_rules():
    t = FactTracker()
    t.on_prompt("use httpx instead of requests", 1)
    t.on_prompt("use aiohttp instead of requests", 2)  # a different replacement for requests
    live = [d.text for d in t.book.find("decision")]
    assert live == ["use aiohttp instead of requests"]
    t.on_prompt("Let's use SQLite", 3)
    t.on_prompt("go with Postgres", 4)  # no stated relation: both stay
    assert len(t.book.find("decision")) == 3
    t.on_prompt("Use Postgres instead of SQLite", 5)
    assert [d.text for d in t.book.find("decision")] == [
        "use aiohttp instead of requests",
        "Use Postgres instead of SQLite",
    ]
    # the assistant agreeing does not replace the user's words
    t.on_reply("I'll use Postgres instead of SQLite for the store.", 5, "r5")
    assert (
        t.book.current("decision", "use:postgres|sqlite").text == "Use Postgres instead of SQLite"
    )
    # but an assistant's own decision is recorded
    t.on_reply("Instead of argparse, I'll use click for the CLI.", 6, "r6")
    assert t.book.current("decision", "use:click|argparse").detail["by"] == "assistant"


def test_constraints_are_kept_and_restating_is_a_no_op():
    t = FactTracker()
    t.on_prompt("Add caching. Don't change the public API.", 1, "p1")
    t.on_prompt("Don't change the public API.", 2, "p2")
    (rule,) = t.book.find("constraint", live=False)
    assert rule.text == "Don't change the public API." and rule.entry_id == "p1"
    assert texts(t, "goal") == ["Add caching. Don't change the public API."]


def test_files_added_dropped_and_read_only():
    t = FactTracker()
    t.on_files_added(["src/a.py", "docs/spec.md"], 1)
    t.on_files_added("README.md", 1, read_only=True)
    t.on_files_dropped(["docs/spec.md"], 2)
    assert texts(t, "file") == [
        "src/a.py: added",
        "README.md: read-only",
        "docs/spec.md: dropped",
    ]
    assert t.book.current("file", "docs/spec.md").detail == {"op": "dropped"}
    t.on_files_dropped(None, 3)  # a bare /drop
    assert sorted(texts(t, "file")) == [
        "README.md: dropped",
        "docs/spec.md: dropped",
        "src/a.py: dropped",
    ]
    superseded = [f for f in t.book.find("file", live=False) if not f.live]
    assert superseded and all(f.superseded_by for f in superseded)


def test_paths_keep_their_spelling():
    t = FactTracker()
    t.on_files_added([".\\App\\Header.tsx"], 1)
    t.on_edit_applied(["app/header.tsx"], 2)  # the same file, spelt differently
    assert [f.key for f in t.book.find("file")] == ["App/Header.tsx"]
    assert texts(t, "file") == ["App/Header.tsx: edited"]


def test_reflection_edits_in_one_turn_are_separate_attempts():
    t = FactTracker()
    t.on_prompt("fix the tests", 1)
    t.on_edit_applied(["src/app.py"], 1)
    t.on_output("pytest", PYTEST_FAIL.format(t="1"), 1, "o1", exit_code=1)
    t.on_edit_applied(["src/app.py"], 1)  # Aider's auto-test reflection, same turn
    t.on_output("pytest", PYTEST_FAIL.format(t="2"), 1, "o2", exit_code=1)
    (failed,) = t.book.find("failed")
    assert failed.detail["attempt"] == 2


def test_resume_from_an_earlier_book():
    first = FactTracker()
    first.on_output("pytest -q", PYTEST_FAIL.format(t="1"), 1, "o1", exit_code=1)
    first.on_edit_applied(["src/app.py"], 2)
    first.on_output("pytest -q", PYTEST_FAIL.format(t="2"), 2, "o2", exit_code=1)
    book = FactBook.from_list(first.book.to_list())
    resumed = FactTracker(book)
    resumed.on_edit_applied(["src/app.py"], 1)
    resumed.on_output("pytest -q", PYTEST_PASS, 1, "n1", exit_code=0)
    assert {f.status for f in resumed.book.find("error")} == {"resolved"}
    resumed.on_prompt("now add logging", 2)
    resumed.on_edit_applied(["src/b.py"], 2)
    resumed.on_prompt("that did not help", 3)
    failed = resumed.book.find("failed")
    assert len(failed) == 2 and failed[0].key != failed[1].key  # attempt:1 was not reused
    assert failed[1].detail["paths"] == ["src/b.py"]


def test_errors_read_back_from_a_checkpoint_are_matched_by_their_line():
    """A checkpoint stores errors by their text; resuming must neither duplicate them nor
    resolve one that is still there."""
    book = FactBook()
    for line in (
        "FAILED tests/test_app.py::test_parse - AssertionError: assert None == 1",
        "FAILED tests/test_app.py::test_load - KeyError: 'name'",
    ):
        book.add("error", line, line, 0, entry_id="old", detail={"command": "pytest -q"})
    t = FactTracker(book)
    t.on_edit_applied(["src/app.py"], 1)
    t.on_output("pytest -q", PYTEST_ONE.format(t="1"), 1, "n1", exit_code=1)
    errors = t.book.find("error")
    assert len(errors) == 2  # no duplicate
    assert {f.key: f.status for f in errors} == {
        PARSE: "open",
        "FAILED tests/test_app.py::test_load - KeyError: 'name'": "resolved",
    }
    assert t.book.find("failed") == []  # the edit fixed test_load: not a failed approach
    t.on_edit_applied(["src/app.py"], 2)
    t.on_output("pytest -q", PYTEST_ONE.format(t="1"), 2, "n2", exit_code=1)
    (failed,) = t.book.find("failed")
    assert failed.text.startswith("edit of src/app.py (uncommitted, turn 2): did not fix: FAILED")
    assert "tests/test_app.py::test_parse" in failed.text


def test_failed_approach_is_the_edit_followed_by_the_same_failure():
    """Two tests fail, run one command each; an edit for test_load is followed first by the
    test_parse run (still failing), then by the test_load run (fixed): the "did not fix
    test_parse" it got is withdrawn; the next edit that fixes nothing is the failed one."""
    t = FactTracker()
    parse_out = PYTEST_ONE.format(t="1")
    load_out = PYTEST_FAIL.format(t="1").replace(
        "FAILED tests/test_app.py::test_parse - AssertionError: assert None == 1\n", ""
    )
    t.on_output("pytest -q -k parse", parse_out, 1, "o1", exit_code=1)
    t.on_output("pytest -q -k load", load_out, 1, "o2", exit_code=1)
    t.on_edit_applied(["src/config.py"], 2)
    t.on_commit("aaa1111", "fix: load name", ["src/config.py"], 2)
    t.on_output("pytest -q -k parse", parse_out, 2, "o3", exit_code=1)
    assert [f.key for f in t.book.find("failed")] == ["attempt:1"]  # blamed for now
    t.on_output("pytest -q -k load", PYTEST_PASS, 2, "o4", exit_code=0)
    assert t.book.current("error", LOAD).status == "resolved"
    assert t.book.find("failed") == []  # it fixed test_load: the blame is withdrawn
    assert t.failed_entry_ids() == set()
    t.on_edit_applied(["src/app.py"], 3)
    t.on_commit("bbb2222", "fix: parse", ["src/app.py"], 3)
    t.on_output("pytest -q -k parse", parse_out, 3, "o5", exit_code=1)
    (failed,) = t.book.find("failed")
    assert failed.text.startswith("edit of src/app.py (commit bbb2222 fix: parse, turn 3)")
    assert "did not fix: FAILED tests/test_app.py::test_parse" in failed.text
    # the same failure again after an edit that fixed nothing while another one (turn 4)
    # fixed something else in the same run: only the one that fixed nothing is blamed
    t.on_output("pytest -q", PYTEST_FAIL.format(t="2"), 4, "o6", exit_code=1)
    t.on_edit_applied(["src/app.py"], 5)
    t.on_output("pytest -q", PYTEST_ONE.format(t="2"), 5, "o7", exit_code=1)
    assert [f.key for f in t.book.find("failed")] == ["attempt:2"]


def test_undo_leaves_the_earlier_commit_of_a_file():
    """After /undo the file shows the commit that is still there, never the undone one."""
    from aider_gardener.continuity.state import render_state

    t = FactTracker()
    t.on_edit_applied(["src/app.py"], 1)
    t.on_commit("aaa1111", "feat: first", ["src/app.py"], 1)
    t.on_output("pytest -q", PYTEST_PASS, 1, "o1", exit_code=0)
    t.on_edit_applied(["src/app.py"], 2)
    t.on_commit("bbb2222", "feat: second", ["src/app.py"], 2)
    t.on_undo("bbb2222", "feat: second", 3)
    state = render_state(t.book, max_tokens=400, model="gpt-4o")
    assert 'src/app.py: undone (bbb2222 "feat: second")' in state
    assert "src/app.py: edited" not in state
    t.on_edit_applied(["src/app.py"], 4)  # edited again, not committed yet
    state = render_state(t.book, max_tokens=400, model="gpt-4o")
    assert 'src/app.py: edited (aaa1111 "feat: first")' in state  # not bbb2222


def test_aiders_own_user_messages_are_not_the_users_words():
    t = FactTracker()
    t.on_prompt("Add caching to the client", 1, "p1")
    t.on_edit_applied(["src/client.py"], 1)
    t.on_prompt("# Fix any errors below, if possible.\n\nsrc/client.py:3:1: F401 unused", 1)
    t.on_prompt("I ran this command:\n\nmake\n\nAnd got this output:\n\nThat must fail.", 1)
    t.on_edit_applied(["src/client.py"], 1)
    assert texts(t, "goal") == ["Add caching to the client"]
    assert t.book.find("constraint") == []
    t.on_prompt("that didn't work", 2, "p2")  # both edits since the user's last prompt
    assert len(t.book.find("failed")) == 2


def test_command_key():
    assert command_key("/run   pytest  -q ") == "pytest -q"
    assert command_key("/test pytest") == "pytest"
    assert command_key("!make") == "make"
    assert command_key(None) == "(output)"
    assert len(command_key("x" * 1000)) == 120


_values = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=300),
    st.binary(max_size=50),
    st.lists(st.text(max_size=40), max_size=4),
    st.sampled_from(
        [
            PYTEST_FAIL.format(t="1"),
            REPLY_EDIT,
            "use httpx instead of requests. Don't touch tests.",
            "that didn't work",
            "\udcff\x00\x1b[31m",
            "a" * 3000,
        ]
    ),
)
_calls = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "on_prompt",
                "on_reply",
                "on_output",
                "on_files_added",
                "on_files_dropped",
                "on_edit_applied",
                "on_commit",
                "on_undo",
            ]
        ),
        st.lists(_values, min_size=3, max_size=5),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_calls)
def test_any_event_sequence_is_total(calls):
    t = FactTracker()
    for name, args in calls:
        method = getattr(t, name)
        arity = method.__wrapped__.__code__.co_argcount - 1
        method(*args[:arity])
        assert isinstance(t.failed_entry_ids(), set)
        assert isinstance(t.open_error_entry_ids(), set)
    check_lines(t)
    ids = [f.id for f in t.book]
    assert len(ids) == len(set(ids))
    for fact in t.book:
        if fact.superseded_by is not None:
            assert t.book.get(fact.superseded_by) is not None


def test_on_output_bench(benchmark, tool_outputs_dir: Path):
    """Per-turn cost of ``on_output`` on a real pytest log padded to 100 kB (the gardener's
    per-turn budget is 50 ms p95 on 100 kB messages)."""
    log = (tool_outputs_dir / "pytest_failures_typeerror__X_Ray_LLM.log").read_text()
    text = ("collecting ... noise line\n" * (100_000 // 26)) + log
    t = FactTracker()
    turn = iter(range(1, 10**9))

    def step() -> None:
        n = next(turn)
        t.on_edit_applied(["src/app.py"], n)
        t.on_output("pytest", text, n, f"o{n}", exit_code=1)

    benchmark.pedantic(step, rounds=60, iterations=1)
    times = sorted(benchmark.stats.stats.data)
    benchmark.extra_info["p95_ms"] = round(times[int(len(times) * 0.95) - 1] * 1000, 2)
    benchmark.extra_info["median_ms"] = round(statistics.median(times) * 1000, 2)


@pytest.mark.parametrize("size", [100_000])
def test_prompt_and_reply_bench(benchmark, size: int):
    """A 100 kB prompt (mostly a pasted log) and a 100 kB reply (mostly edit blocks)."""
    prompt = ("Please refactor the parser. Don't change the public API.\n" * 40) + (
        "```\n" + "log line\n" * (size // 9) + "```\n"
    )
    code = "".join(f"    value_{i} = compute({i})  # keep\n" for i in range(size // 200))
    block = f"src/mod.py\n```python\n<<<<<<< SEARCH\n{code}=======\n{code}>>>>>>> REPLACE\n```\n"
    reply = "I'll use httpx instead of requests here. " * 20 + "\n\n" + block * 4
    t = FactTracker()

    def step() -> None:
        t.on_prompt(prompt, 1, "p")
        t.on_reply(reply, 1, "r")

    benchmark.pedantic(step, rounds=40, iterations=1)


def test_a_declined_command_leaves_no_open_error():
    from aider_gardener.continuity.tracker import FactTracker

    tracker = FactTracker()
    tracker.on_output("find / -name x.xml", "User rejected tool use", 3, "id1", exit_code=1)
    assert not [f for f in tracker.book.find("error") if f.status == "open"]


# --- resolved is resolved (issue 22, point 6) ---

ODOO_FAIL = (
    "2026-05-05 23:10:11,249 1225 ERROR db odoo.modules.registry: Failed to load registry\n"
    "ValueError: External ID not found in the system: leads.view_lead_form\n"
)
ODOO_DONE = (
    "2026-05-05 23:15:06,936 1306 INFO db odoo.modules.loading: 227 modules loaded in 17.08s\n"
    "2026-05-05 23:15:08,924 1306 INFO db odoo.modules.loading: Modules loaded.\n"
)


def open_errors(t: FactTracker) -> list[str]:
    return [f.text for f in t.book.find("error") if f.status == "open"]


def test_the_same_command_written_differently_resolves_its_error():
    """As Claude Code ran one module install in a real session: first behind a ``sleep`` and a
    ``grep`` for errors, then plain with ``| tail``: the error is gone, the install passed."""
    t = FactTracker()
    install = "docker exec web-1 odoo -d db -i leads --stop-after-init 2>&1"
    t.on_output(f"sleep 15 && {install} | grep -iE 'leads|error'", ODOO_FAIL, 1, "o1", 0)
    assert len(open_errors(t)) == 2
    t.on_edit_applied(["leads/views/lead_view.xml"], 1)
    t.on_output(f"{install} | tail -10", ODOO_DONE, 1, "o2", exit_code=0)
    assert open_errors(t) == []
    fixed = t.book.find("error")[0]
    assert fixed.detail["resolved_by"].startswith("edit of leads/views/lead_view.xml")


def test_a_partial_view_of_the_output_resolves_nothing():
    t = FactTracker()
    t.on_output("pytest -q 2>&1 | head -40", PYTEST_FAIL.format(t="1"), 1, "o1", exit_code=0)
    head = "\n".join(PYTEST_FAIL.format(t="1").splitlines()[:4]) + "\n"  # the failures cut off
    t.on_output("pytest -q 2>&1 | head -40", head, 2, "o2", exit_code=0)
    assert len(open_errors(t)) == 2


def test_a_whole_suite_run_shows_a_failing_test_passing():
    t = FactTracker()
    t.on_output("pytest tests/test_app.py::test_load", PYTEST_FAIL.format(t="1"), 1, "o1", 1)
    t.on_edit_applied(["src/app.py"], 2)
    t.on_output("python -m pytest -q -k parse", PYTEST_PASS, 2, "o2", exit_code=0)
    t.on_output("pytest tests/test_other.py", PYTEST_PASS, 2, "o3", exit_code=0)
    assert len(open_errors(t)) == 2  # a subset that may not hold them: not shown passing
    t.on_output("cd /srv/app && python -m pytest -q 2>&1 | tail -5", PYTEST_PASS, 2, "o4", 0)
    assert open_errors(t) == []


def test_the_user_saying_it_works_closes_the_latest_failure():
    t = FactTracker()
    t.on_output("npm run build", "building...\nsomething odd happened\n", 1, "o1", exit_code=2)
    t.on_prompt("fix the build", 2)
    t.on_edit_applied(["package.json"], 2)
    t.on_prompt("does it work now?", 3)  # a question says nothing
    assert open_errors(t) == ["exit 2: something odd happened"]
    t.on_prompt("that works now, thanks", 3)
    (err,) = t.book.find("error")
    assert err.status == "resolved" and err.detail["resolved_said"].startswith("user said")


def test_a_fix_the_assistant_reports_closes_what_it_names():
    t = FactTracker()
    out = (
        "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'name'\n"
        "bash: line 2: jq: command not found\n"
    )
    t.on_output("python x.py", out, 4, "o1", exit_code=1)
    t.on_reply("Fixed the KeyError in the config loader.", 4)
    assert open_errors(t) == ["bash: line 2: jq: command not found"]
    t.on_reply("All tests pass now.", 4)  # no failing test open: nothing else closes
    assert open_errors(t) == ["bash: line 2: jq: command not found"]
    t.on_reply("Fixed.", 4)
    assert open_errors(t) == []


def test_a_bare_claim_does_not_reach_an_old_failure():
    t = FactTracker()
    t.on_output("ls /nope", "ls: cannot access '/nope': No such file or directory\n", 1, "o", 2)
    t.on_prompt("now make the header sticky", 2)
    t.on_reply("Fixed. The header now stays on top.", 2)  # about the request, not ls
    t.on_prompt("that works now", 5)
    assert len(open_errors(t)) == 1


def test_tests_said_to_pass_close_failing_tests_only():
    t = FactTracker()
    t.on_output("pytest -q", PYTEST_FAIL.format(t="1"), 1, "o1", exit_code=1)
    t.on_output("make lint", "building...\nsomething odd happened\n", 1, "o2", exit_code=2)
    t.on_prompt("tests pass now", 2)
    assert open_errors(t) == ["exit 2: something odd happened"]


def test_an_error_seen_again_after_the_claim_is_open_again():
    t = FactTracker()
    t.on_output("pytest -q", PYTEST_FAIL.format(t="1"), 1, "o1", exit_code=1)
    t.on_reply("All tests pass.", 1)
    assert open_errors(t) == []
    t.on_output("pytest -q", PYTEST_FAIL.format(t="2"), 2, "o2", exit_code=1)
    assert len(open_errors(t)) == 2


def test_grep_finding_nothing_and_an_unjudged_command_are_no_errors():
    t = FactTracker()
    t.on_output('grep -rn "menuitem" src/', "Error: Exit code 1\n", 1, "o1", exit_code=1)
    t.on_output(
        "rm -rf build",
        "Error: claude-opus-4-8 is temporarily unavailable, so auto mode cannot determine the"
        " safety of Bash right now.",
        1,
        "o2",
        exit_code=1,
    )
    assert open_errors(t) == []


def test_closed_errors_are_fixed_in_the_state_block_and_not_carried():
    from aider_gardener.continuity.checkpoint import (
        carried_facts,
        parse_checkpoint,
        render_checkpoint,
    )
    from aider_gardener.continuity.state import ERRORS, FIXED, render_state

    t = FactTracker()
    t.on_output("pytest -q", PYTEST_FAIL.format(t="1"), 1, "o1", exit_code=1)
    t.on_prompt("tests pass now", 2)
    block = render_state(t.book, max_tokens=800, model="gpt-4o")
    assert FIXED in block and ERRORS not in block and "test_parse" in block
    text = render_checkpoint(t.book, trigger="exit", session="s1", project="/p")
    back = parse_checkpoint(text)
    assert [f for f in carried_facts(back.facts).find("error")] == []


def test_real_odoo_install_errors_close_when_the_install_passes():
    """A real Claude Code session (``../shared/data``): a module install failed five ways, each
    run written differently, until one passed ("Modules loaded."). Every error of it closes;
    none of the session's other errors closes on the way."""
    from aider_gardener.clients.claude_hooks import facts_from_transcript
    from tests.conftest import SHARED

    path = SHARED / "claude_code_transcripts" / "cc_session__Eduardodmb-ClaudeWork__a572bd87.jsonl"
    if not path.is_file():
        pytest.skip(f"shared transcript not found: {path}")
    book = facts_from_transcript(str(path), Path("/nonexistent")).book
    install = [f for f in book.find("error") if "-i search_leads" in f.detail["command"]]
    assert len(install) >= 10
    assert {f.status for f in install} == {"resolved"}
    others = [f for f in book.find("error") if f not in install]
    assert [f.detail.get("resolved_said") for f in others] == [None] * len(others)


DOCSTRING = '''"""Parsing helpers.

parse() raises ValueError: invalid literal for int() when the text is not a number.
Errors are logged as "ERROR: bad row" and the caller gets None.
error: this line only mentions an error

    >>> parse("x")
    Traceback (most recent call last):
      ...
    ValueError: invalid literal for int() with base 10: 'x'
"""
'''


def test_a_printed_file_or_a_commit_message_is_no_error():
    """Issue 23: a docstring printed with ``cat`` became an open error. Errors come from output
    that failed or shows one happening, not from text that mentions one."""
    t = FactTracker()
    t.on_output("cat app/parse.py; sleep 1", DOCSTRING, 1, "o1", exit_code=0)
    t.on_output("sed -n 1,20p app/parse.py", DOCSTRING, 1, "o2", exit_code=0)
    t.on_output("python -c 'help(parse)'", DOCSTRING, 1, "o3", exit_code=0)
    t.on_output("git log -1", "commit abc\n\n    fix ValueError: bad amount in rows\n", 1, "o4", 0)
    assert open_errors(t) == []
    t.on_output("cat missing.py", "cat: missing.py: No such file or directory\n", 2, "o5", 1)
    assert len(open_errors(t)) == 1  # a viewer that failed did fail


def test_an_output_that_exited_zero_still_shows_real_errors():
    t = FactTracker()
    crash = 'Traceback (most recent call last):\n  File "a.py", line 3, in <module>\nKeyError: 7\n'
    t.on_output("python serve.py", crash, 1, "o1", exit_code=0)
    t.on_output("tail -n 20 logs/app.log", "2026-05-05 23:10:11 ERROR db: pool exhausted\n", 1)
    assert open_errors(t) == ["KeyError: 7", "ERROR db: pool exhausted"]


def test_a_question_keeps_the_goal_a_new_request_replaces_it():
    """Issue 23: the goal was "where were we?", the last question asked."""
    t = FactTracker()
    t.on_prompt("where do we start?", 1)  # the first request, even as a question
    assert texts(t, "goal") == ["where do we start?"]
    t.on_prompt("make parse accept floats like 3.5 and round them", 2)
    for question in ("where were we?", "what about negative numbers?", "/ask why does it fail?"):
        t.on_prompt(question, 3)
    assert texts(t, "goal") == ["make parse accept floats like 3.5 and round them"]
    t.on_prompt("can you add a --strict flag to the CLI?", 4)  # asks for work
    assert texts(t, "goal") == ["can you add a --strict flag to the CLI?"]


def test_forget_drops_what_only_forgotten_entries_showed():
    t = FactTracker()
    fail = "FAILED tests/test_a.py::test_one - AssertionError"
    t.on_prompt("Use sqlite instead of postgres for the cache", 1, entry_id="p1")
    t.on_output("pytest -q", fail, 2, entry_id="o1", exit_code=1)
    t.on_output("pytest -q", fail, 3, entry_id="o2", exit_code=1)
    t.on_files_added(["app.py"], 3)
    errors = t.book.find("error")
    assert len(errors) == 1 and t.open_error_entry_ids() == {"o1", "o2"}
    t.forget({"o1"})
    assert len(t.book.find("error")) == 1  # o2 still shows the error: it stays, without o1
    assert t.open_error_entry_ids() == {"o2"}
    version = t.book.version
    assert t.forget({"o2", "p1"}) >= 2
    assert t.book.version > version
    assert not t.book.find("error") and not t.open_error_entry_ids()
    assert not t.book.find("decision") and not t.book.find("goal")
    assert [f.key for f in t.book.find("file")] == ["app.py"]  # it happened: it stays
    t.on_output("pytest -q", fail, 4, entry_id="o3", exit_code=1)  # seen again: a new fact
    assert t.open_error_entry_ids() == {"o3"}
