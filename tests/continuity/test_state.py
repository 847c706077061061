"""The session-state block: content, determinism, the token bound and the order of dropping."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aider_gardener  # noqa: F401  (offline before tiktoken)
from aider_gardener.continuity.facts import KINDS, FactBook
from aider_gardener.continuity.state import (
    DECISIONS,
    ERRORS,
    FAILED,
    FILES,
    FIXED,
    HEADER,
    ORDER,
    RECALL,
    render_state,
)
from aider_gardener.tokens import count_tokens

MODEL = "gpt-4o"
BIG = 1_000_000


def _book() -> FactBook:
    book = FactBook()
    book.add("goal", "goal", "Add a /version command", 1)
    book.add("goal", "goal", "Add retry with backoff to src/client.py", 3)
    book.add("constraint", "api", "never change the public API of client.py", 1)
    book.add("decision", "lib", "use tenacity instead of a hand-written loop", 2)
    book.add("decision", "lib-old", "write the retry loop by hand", 1)
    book.update(book.current("decision", "lib-old"), status="superseded")
    book.add("file", "src/client.py", "edited src/client.py", 2, detail={"op": "edited"})
    book.add(
        "file",
        "src/client.py",
        "committed src/client.py",
        2,
        detail={"op": "edited", "commit": "a1b2c3d", "message": "add retry"},
    )
    book.add("file", "src/client.py", "re-added src/client.py", 4, detail={"op": "added"})
    book.add("file", "README.md", "read-only README.md", 1, detail={"op": "read-only"})
    book.add("command", "pytest -q", "`pytest -q` → 2 failed", 4, entry_id="e1a2")
    book.add("command", "ls", "`ls` → ok", 4)
    book.add(
        "error",
        "test_retry",
        "tests/test_client.py::test_retry FAILED - AssertionError: 3 != 2",
        4,
        entry_id="e1a2",
        detail={"command": "pytest -q"},
    )
    fixed = book.add("error", "E0432", "error[E0432]: unresolved import `foo`", 2)
    book.update(fixed, status="resolved")
    book.add("failed", "send", "patching requests.Session.send: same failure", 3, entry_id="f00d")
    return book


def test_nothing_to_say_is_empty():
    assert render_state(FactBook(), max_tokens=BIG, model=MODEL) == ""
    book = FactBook()
    resolved = book.add("error", "e", "boom", 1)
    book.update(resolved, status="resolved")
    book.add("command", "ls", "`ls` → ok", 1)  # no entry id: nothing to recall
    assert render_state(book, max_tokens=BIG, model=MODEL).splitlines()[1:] == [
        "Fixed errors:",
        "- boom",
    ]


def test_content_and_fixed_section_order():
    text = render_state(_book(), max_tokens=BIG, model=MODEL)
    lines = text.splitlines()
    assert lines[0] == HEADER
    assert lines[1] == "Goal: Add retry with backoff to src/client.py"
    titles = [line[:-1] for line in lines[1:] if line.endswith(":") and not line.startswith("- ")]
    assert titles == list(ORDER[1:])
    # superseded facts are gone, resolved errors are listed as fixed, not open
    assert "Add a /version command" not in text
    assert "write the retry loop by hand" not in text
    assert lines.index("- error[E0432]: unresolved import `foo`") > lines.index("Fixed errors:")
    # files: path, state, and the last commit even when the live fact has none
    assert '- src/client.py: added (a1b2c3d "add retry")' in lines
    assert "- README.md: read-only" in lines
    # open errors carry the command and the recall id; failed approaches their id
    assert (
        "- tests/test_client.py::test_retry FAILED - AssertionError: 3 != 2"
        " (from `pytest -q`; /recall e1a2)" in lines
    )
    assert "- patching requests.Session.send: same failure (/recall f00d)" in lines
    assert "- `pytest -q` → 2 failed: /recall e1a2" in lines
    assert "`ls`" not in text
    # constraints come before decisions in their shared section
    assert lines.index("- never change the public API of client.py") < lines.index(
        "- use tenacity instead of a hand-written loop"
    )


def test_deterministic_and_independent_of_detail_order():
    a, b = FactBook(), FactBook()
    a.add("file", "x.py", "x", 1, detail={"op": "edited", "commit": "abc1234", "message": "m"})
    b.add("file", "x.py", "x", 1, detail={"message": "m", "commit": "abc1234", "op": "edited"})
    for book in (a, b):
        book.add("goal", "goal", "do it", 1)
    first = render_state(a, max_tokens=200, model=MODEL)
    assert first == render_state(a, max_tokens=200, model=MODEL)
    assert first == render_state(b, max_tokens=200, model=MODEL)
    assert first == render_state(FactBook.from_list(a.to_list()), max_tokens=200, model=MODEL)


def test_changes_only_when_facts_change():
    book = _book()
    before = render_state(book, max_tokens=BIG, model=MODEL)
    version = book.version
    book.add("goal", "goal", "Add retry with backoff to src/client.py", 3)  # identical: no-op
    assert book.version == version
    assert render_state(book, max_tokens=BIG, model=MODEL) == before
    book.add("decision", "fmt", "format with black", 5)
    assert render_state(book, max_tokens=BIG, model=MODEL) != before


def test_multiline_and_control_characters_stay_on_one_line():
    book = FactBook()
    book.add("goal", "goal", "line one\nline two\x00\x1b[31m", 1)
    text = render_state(book, max_tokens=BIG, model=MODEL)
    assert text.splitlines()[1] == "Goal: line one line two[31m"


def _many(n: int = 30) -> FactBook:
    book = FactBook()
    book.add("goal", "goal", "Make the parser accept trailing commas in src/parse.py", 1)
    for i in range(n):
        book.add("command", f"c{i}", f"`pytest tests/t{i}.py` → 1 failed", i, entry_id=f"c{i:03d}")
        book.add(
            "file",
            f"src/m{i:02d}.py",
            f"m{i}",
            i,
            detail={"op": "edited", "commit": f"{i:07x}", "message": f"fix module {i}"},
        )
        book.add("decision", f"d{i}", f"decision {i}: use approach number {i}", i)
        book.add("constraint", f"k{i}", f"constraint {i}: never touch legacy_{i}.py", i)
        book.add("failed", f"f{i}", f"tried monkeypatching helper_{i}: same failure", i)
        book.add(
            "error",
            f"e{i}",
            f"tests/test_parse.py::test_case_{i} FAILED - ValueError: bad comma {i}",
            i,
            entry_id=f"e{i:03d}",
            detail={"command": "pytest -q"},
        )
    return book


_KIND_OF_LINE = [
    ("command", re.compile(r"^- `pytest tests/t(\d+)\.py`")),
    ("file", re.compile(r"^- src/m(\d+)\.py: ")),
    ("decision", re.compile(r"^- decision (\d+):")),
    ("constraint", re.compile(r"^- constraint (\d+):")),
    ("failed", re.compile(r"^- tried monkeypatching helper_(\d+):")),
    ("error", re.compile(r"^- tests/test_parse\.py::test_case_(\d+) ")),
]
_MORE = re.compile(r"^- … (\d+) more (.+): /recall <query>$")
_NOUNS = {
    "command": "command",
    "commands": "command",
    "file": "file",
    "files": "file",
    "decision": "decision",
    "decisions": "decision",
    "constraint": "constraint",
    "constraints": "constraint",
    "failed approach": "failed",
    "failed approaches": "failed",
    "open error": "error",
    "open errors": "error",
    "facts": "fact",
}


_COMPACT_FILES = re.compile(r"^- edited, latest first: (.+)$")


def _shown(text: str) -> tuple[dict[str, list[int]], dict[str, int]]:
    shown: dict[str, list[int]] = {kind: [] for kind, _ in _KIND_OF_LINE}
    more: dict[str, int] = {}
    for line in text.splitlines():
        compact = _COMPACT_FILES.match(line)
        if compact:  # over budget: the files on one line, latest first
            paths = compact[1].split(", ")
            shown["file"] += sorted(int(re.fullmatch(r"src/m(\d+)\.py", p)[1]) for p in paths)
            assert paths == sorted(paths, reverse=True)
            continue
        for kind, pattern in _KIND_OF_LINE:
            match = pattern.match(line)
            if match:
                shown[kind].append(int(match[1]))
                break
        match = _MORE.match(line)
        if match:
            more[_NOUNS[match[2]]] = int(match[1])
    return shown, more


def test_unbounded_shows_everything():
    shown, more = _shown(render_state(_many(), max_tokens=BIG, model=MODEL))
    assert all(len(v) == 30 for v in shown.values())
    assert more == {}


def test_bound_and_order_of_dropping():
    book = _many()
    full = count_tokens(render_state(book, max_tokens=BIG, model=MODEL), MODEL)
    precedence = ["command", "file", "decision", "constraint", "failed", "error"]
    seen_partial = set()
    for budget in range(60, full + 1, 37):
        text = render_state(book, max_tokens=budget, model=MODEL)
        assert count_tokens(text, MODEL) <= budget
        assert "Goal: Make the parser accept trailing commas" in text
        shown, more = _shown(text)
        if "fact" in more:  # not even one note per kind fits: a single note for all
            assert more == {"fact": 180} and not any(shown.values())
            continue
        for kind in precedence:
            # the "… N more" line counts exactly what was left out
            assert more.get(kind, 0) == 30 - len(shown[kind])
            if shown[kind] and len(shown[kind]) < 30:
                seen_partial.add(kind)
                # within a kind the oldest go first
                assert shown[kind] == list(range(30 - len(shown[kind]), 30))
        # nothing of a kind is dropped while a less valuable kind still shows
        for low, high in zip(precedence, precedence[1:]):
            if more.get(high):
                assert not shown[low], (budget, low, high)
    assert {"command", "file", "error"} <= seen_partial
    text = render_state(book, max_tokens=45, model=MODEL)
    assert text.endswith("\n- … 180 more facts: /recall <query>")


def test_open_errors_survive_a_tight_budget():
    book = _many()
    text = render_state(book, max_tokens=400, model=MODEL)
    shown, more = _shown(text)
    assert shown["error"] and not shown["command"] and not shown["file"]
    assert more["command"] == 30 and more["file"] == 30


def test_dropped_files_go_before_other_files():
    book = FactBook()
    book.add("goal", "goal", "g", 1)
    long = {"commit": "abcdef1", "message": "a commit message long enough to cost tokens"}
    book.add("file", "src/pkg/old_module.py", "old", 1, detail={"op": "edited", **long})
    book.add("file", "src/pkg/gone_module.py", "gone", 5, detail={"op": "dropped", **long})
    book.add("file", "src/pkg/older_module.py", "older", 0, detail={"op": "edited", **long})
    full = count_tokens(render_state(book, max_tokens=BIG, model=MODEL), MODEL)
    cuts = [render_state(book, max_tokens=budget, model=MODEL) for budget in range(full, 20, -1)]
    first_cut = next(text for text in cuts if "- … " in text)
    # over budget the files go compact first (one line, latest first), then the least useful
    assert "- edited, latest first: src/pkg/old_module.py, src/pkg/older_module.py" in first_cut
    assert "gone_module" not in first_cut
    assert "- … 1 more file: /recall <query>" in first_cut
    second_cut = next(text for text in cuts if "- … 2 more files" in text)
    assert "old_module" in second_cut and "older_module" not in second_cut


def test_over_budget_every_edited_file_stays_on_one_line():
    """Forty edited files and a few open errors in 500 tokens: the errors and every edited path
    (latest first, under their shared folder) fit, the files merely read go first."""
    book = FactBook()
    book.add("goal", "goal", "port the addon", 1)
    for i in range(40):
        path = f"X:/work/addons/shop/models/model_{i:02d}.py"
        book.add("file", path, path, i, detail={"op": "edited" if i % 2 else "created"})
        book.add("file", f"X:/work/addons/shop/views/v{i}.xml", "v", i, detail={"op": "added"})
    for i in range(3):
        book.add(
            "error",
            f"e{i}",
            f"ValueError: bad field {i}",
            50 + i,
            entry_id=f"id{i}",
            detail={"command": "docker exec web odoo -d db -u shop --stop-after-init " * 3},
        )
    text = render_state(book, max_tokens=500, model=MODEL)
    assert count_tokens(text, MODEL) <= 500
    for i in range(3):
        assert f"- ValueError: bad field {i} (from `docker exec web odoo -d db" in text
    line = next(x for x in text.splitlines() if x.startswith("- edited, latest first"))
    assert line.startswith("- edited, latest first: in X:/work/addons/shop/models/: model_39.py, ")
    assert "model_00.py (new)" in line and line.count("model_") == 40
    assert re.search(r"^- … \d+ more files: /recall <query>$", text, re.M)  # read ones went first


def test_long_goal_is_clipped_not_dropped():
    book = FactBook()
    book.add("goal", "goal", "please " * 2000 + "fix src/app.py", 1)
    text = render_state(book, max_tokens=80, model=MODEL)
    assert count_tokens(text, MODEL) <= 80
    assert text.splitlines()[1].startswith("Goal: please please")
    assert text.endswith("…")


@pytest.mark.parametrize("budget", [0, 1, 5, 10])
def test_budget_below_the_header_gives_nothing(budget):
    assert render_state(_book(), max_tokens=budget, model=MODEL) == ""


_TEXT = st.text(st.characters(codec="utf-8"), max_size=60)


@st.composite
def books(draw) -> FactBook:
    book = FactBook()
    for turn in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(sorted(KINDS)))
        detail = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "op": st.sampled_from(["edited", "created", "added", "dropped", "x y"]),
                    "commit": _TEXT,
                    "message": _TEXT,
                    "command": _TEXT,
                },
            )
        )
        fact = book.add(
            kind,
            draw(st.sampled_from(["a", "b", "src/c.py", ""])),
            draw(_TEXT),
            turn,
            entry_id=draw(st.one_of(st.none(), _TEXT)),
            detail=detail,
            supersede=draw(st.booleans()),
        )
        if draw(st.booleans()):
            book.update(fact, status=draw(st.sampled_from(["open", "resolved"])))
    return book


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(books(), st.integers(0, 600))
def test_any_book_renders_within_budget_deterministically(book, budget):
    text = render_state(book, max_tokens=budget, model=MODEL)
    assert count_tokens(text, MODEL) <= budget
    assert text == render_state(FactBook.from_list(book.to_list()), max_tokens=budget, model=MODEL)
    if text:
        assert text.startswith(HEADER + "\n") or text == HEADER
    for line in text.splitlines()[1:]:
        assert "\n" not in line and "\x00" not in line


def test_sections_named_as_in_the_issue():
    assert ORDER[1:] == (DECISIONS, FILES, ERRORS, FIXED, FAILED, RECALL)
    assert FAILED == "Failed approaches — do not repeat"


def test_bench_render_200_facts(benchmark):
    book = _many(33)  # 199 facts + goal
    assert len(book) >= 199
    text = benchmark(render_state, book, max_tokens=1500, model=MODEL)
    assert 0 < count_tokens(text, MODEL) <= 1500


def test_bench_render_200_facts_after_a_change(benchmark):
    """The turn path: one fact changed since the last render (its line is not cached)."""
    book = _many(33)
    counter = iter(range(10**9))

    def changed() -> str:
        book.add(
            "goal", "goal", f"Make the parser accept trailing commas, take {next(counter)}", 99
        )
        return render_state(book, max_tokens=1500, model=MODEL)

    text = benchmark(changed)
    assert count_tokens(text, MODEL) <= 1500


def test_a_bare_exit_code_goes_before_edited_files_and_long_errors_are_clipped():
    book = FactBook()
    book.add("goal", "goal", "g", 1)
    for i in range(6):
        book.add("file", f"src/pkg/module_{i}.py", "m", i, detail={"op": "edited"})
    book.add(
        "error", "x", "Error: Exit code 2", 7, entry_id="aaa", detail={"command": "grep -rn x"}
    )
    long = "KeyError: ('ir.model.data', " + "'search_leads.view_daily_search_lead_form', " * 6
    book.add("error", "k", long, 8, entry_id="bbb", detail={"command": "odoo -u x"})
    full = render_state(book, max_tokens=BIG, model=MODEL)
    assert "Error: Exit code 2" in full and long.strip() not in full  # clipped in the block
    assert "- KeyError: ('ir.model.data', 'search_leads.view_daily_search_lead_form'" in full
    cut = next(
        text
        for budget in range(count_tokens(full, MODEL), 20, -1)
        if "- … " in (text := render_state(book, max_tokens=budget, model=MODEL))
    )
    assert "Exit code 2" not in cut and "- … 1 more open error" in cut
    assert "src/pkg/module_0.py" in cut and "KeyError" in cut


def test_over_budget_errors_of_one_output_share_its_command():
    book = FactBook()
    book.add("goal", "goal", "g", 1)
    cmd = {"command": "docker exec web odoo -d db -i search_leads --stop-after-init"}
    for i, text in enumerate(["KeyError: 'x'", "ValueError: External ID not found: y"]):
        book.add("error", f"e{i}", text, 5, entry_id="out1", detail=cmd)
    for i in range(30):
        book.add("file", f"src/m{i}.py", "m", i, detail={"op": "edited"})
    full = render_state(book, max_tokens=BIG, model=MODEL)
    assert full.count("(from `docker exec web odoo") == 2  # within budget: as before
    text = render_state(book, max_tokens=count_tokens(full, MODEL) - 40, model=MODEL)
    assert "- KeyError: 'x' (from `docker exec web odoo -d db -i search_leads" in text
    assert "- ValueError: External ID not found: y (same output)" in text
    assert "src/m0.py" in text and "- … " not in text
