"""The gist embedded beside an entry's chunks (store/gist.py): what an entry is about, and a
store that embeds it as one more chunk without changing what full-text search reads."""

from __future__ import annotations

from aider_gardener.store import Store
from aider_gardener.store.gist import MAX_CHARS, gist
from aider_gardener.types import Source

PASSING = "".join(f"tests/test_views.py::test_page_{i} PASSED\n" for i in range(200))
FAILING = "FAILED tests/test_auth.py::test_login - AssertionError: expected 200, got 401\n"


def test_a_test_run_is_its_command_its_failure_and_its_files():
    text = gist(PASSING + FAILING * 3 + "== 1 failed, 200 passed ==\n", "log", "tool", "pytest -x")
    lines = text.splitlines()
    assert lines[0] == "$ pytest -x"
    assert lines[1] == FAILING.strip()  # the repeated failure once, the passing lines not at all
    assert sum(FAILING.strip() in ln for ln in lines) == 1
    assert "tests/test_auth.py" in lines[-1] and lines[-1].startswith("files:")


def test_the_same_failure_on_other_line_numbers_counts_once():
    out = "\n".join(f"src/app.py:{n}: error: 'tokn' undeclared" for n in (10, 20, 30))
    text = gist(out, "log", "tool", "make")
    assert text.count("undeclared") == 1


def test_a_long_reply_is_its_opening_sentences_and_the_files_it_touches():
    reply = (
        "The login fails because the session cookie is never set. I moved the check into the"
        " middleware. That also fixes logout. Then many more words follow here. " * 6
        + "\n\nsrc/auth/middleware.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n"
        ">>>>>>> REPLACE\n```\n"
    )
    text = gist(reply, "prose", "assistant", None)
    assert text.startswith("The login fails because the session cookie is never set.")
    assert "SEARCH" not in text and "x = 2" not in text
    assert "src/auth/middleware.py" in text
    assert len(text) <= MAX_CHARS


def test_short_turns_and_prompts_have_no_gist():
    assert gist("Ok, done.", "prose", "assistant", None) is None
    assert gist("please fix the login " * 50, "prompt", "user", None) is None
    assert gist("", "log", "tool", "ls") is None


def test_a_huge_output_gives_a_bounded_gist():
    text = gist("error: x.c:1: boom " * 200_000, "log", "tool", "make all")
    assert len(text) <= MAX_CHARS


def test_the_store_embeds_the_gist_as_one_more_chunk(tmp_path):
    store = Store(tmp_path / "s", vectors=False)
    try:
        entry = store.ingest(PASSING + FAILING, Source(role="tool", command="pytest"))
        rows = store.read(
            lambda c: c.execute(
                "SELECT n, text FROM chunks WHERE entry_id = ? ORDER BY n", (entry.id,)
            ).fetchall()
        )
        assert "".join(t for _, t in rows[1:]) == entry.original  # the chunks are untouched
        assert rows[0] == (-1, rows[0][1]) and rows[0][1].startswith("$ pytest\n")
        assert store.get(entry.id).original == PASSING + FAILING
        prompt = store.ingest("why does the login test fail?", Source(role="user"))
        n = store.read(
            lambda c: c.execute(
                "SELECT count(*) FROM chunks WHERE entry_id = ?", (prompt.id,)
            ).fetchone()[0]
        )
        assert n == 1
    finally:
        store.close()


def test_a_short_output_that_did_not_fail_is_its_own_gist():
    assert gist("On branch main\nnothing to commit\n", "log", "tool", "git status") is None
    assert gist("x" * 2000, "log", "tool", "cat big.txt").startswith("$ cat big.txt")


def test_the_line_naming_the_failure_comes_before_lines_with_a_failure_word():
    """ "timeout-2.4.0" in pytest's plugin list and ``errors = scan()`` in quoted code matched the
    failure words and filled the gist before the exception that a question asks about."""
    run = "\n".join(
        [
            "plugins: anyio-4.12.1, timeout-2.4.0, respx-0.22.0",
            "    functions, classes, errors = scan_codebase(tmp_path)",
            "E       TypeError: build_json_report() takes 2 positional arguments but 7 were given",
            "FAILED tests/test_report.py::test_basic - TypeError",
        ]
        + [f"PASSED tests/test_other.py::test_{i}" for i in range(40)]
    )
    lines = gist(run, "error", "tool", "pytest -x").splitlines()
    assert lines[0] == "$ pytest -x"
    assert lines[1].startswith("E TypeError: build_json_report() takes 2 positional")
    assert lines[2].startswith("FAILED tests/test_report.py::test_basic")
    assert lines[3].startswith("plugins:")  # still there, after them
