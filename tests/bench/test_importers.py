"""The importers on small synthetic inputs (the traps of each format), and on the real shared
data when it is present."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.__main__ import main
from bench.replay.format import ReplayFormatError, load, save, validate
from bench.replay.importers.aider_history import (
    import_path,
    import_text,
    parse_input_history,
    parse_sessions,
    split_inputs,
)
from bench.replay.importers.locomo import conversation_replay, import_data
from bench.replay.importers.locomo import import_path as import_locomo
from bench.replay.importers.longmemeval import entry_replay
from bench.replay.importers.longmemeval import import_data as import_longmemeval_data
from bench.replay.importers.longmemeval import import_path as import_longmemeval
from bench.replay.matching import loose

HISTORY = """
# aider chat started at 2025-01-02 10:00:00

> Aider v0.86.2$
> Main model: gpt-4o with diff edit format$

#### add a health check$

Here is the plan.

```markdown
#### Not a user line
> not a tool line
```

#### Notes heading in the reply

app.py
```python
<<<<<<< SEARCH
x = 1
=======
x = 2
>>>>>>> REPLACE
```

> Applied edit to app.py$
> Commit 1a2b3c4 feat: add health check$

#### /test pytest -q$
> ============ test session starts ============
collected 3 items

E       KeyError: 'tenant-zz9-unique'
FAILED tests/test_app.py::test_health - KeyError: 'tenant-zz9-unique'
======= 1 failed, 2 passed in 0.1s =======$

The tenant lookup fails; I will add a default.

#### /run make build$
> Add 1.2k tokens of command output to the chat? (Y)es/(N)o [Yes]: y$
> Added 40 lines of output to the chat.$

#### why did it fail?$

It failed because the cache was cold.

# aider chat started at 2025-01-03 09:00:00

#### hello$

Hi there, what shall we build today?
""".replace("$\n", "  \n")  # Aider ends a tool/user line with two spaces

TYPED = """
# 2025-01-02 10:00:01.0
+add a health check

# 2025-01-02 10:01:00.0
+/test pytest -q
"""


def test_tool_continuation_lines_are_tool_text_not_reply():
    session, _ = parse_sessions(HISTORY)
    tools = [m.text for m in session.messages if m.role == "tool"]
    assert any("collected 3 items" in t and "1 failed, 2 passed" in t for t in tools)
    replies = [m.text for m in session.messages if m.role == "assistant"]
    assert not any("collected 3 items" in r for r in replies)


def test_headings_and_quotes_in_replies_stay_in_the_reply():
    session, _ = parse_sessions(HISTORY, parse_input_history(TYPED))
    users = [m.text for m in session.messages if m.role == "user"]
    assert "Not a user line" not in " ".join(users)
    assert "Notes heading in the reply" not in " ".join(users)
    reply = next(m.text for m in session.messages if m.role == "assistant")
    assert "#### Not a user line" in reply and "> not a tool line" in reply
    assert "#### Notes heading in the reply" in reply and "<<<<<<< SEARCH" in reply
    # without the input history, a heading outside a fence cannot be told from input
    plain, _ = parse_sessions(HISTORY)
    assert "#### Not a user line" in next(m.text for m in plain.messages if m.role == "assistant")


def test_run_output_is_kept_where_recorded_and_marked_where_not():
    replays = import_text(HISTORY, "h", parse_input_history(TYPED), min_turns=1)
    assert [r.name for r in replays] == ["h--0000", "h--0001"]
    first = replays[0]
    assert first.meta["edit_format"] == "diff" and "gpt-4o" in first.meta["notes"]
    runs = [e for e in first.events if e["type"] == "run"]
    test, build = runs
    assert test["via"] == "test" and test["exit_code"] == 1 and not test.get("gap")
    assert "FAILED tests/test_app.py::test_health" in test["output"]
    assert build["gap"] is True and "Added 40 lines of output" in build["output"]
    assert build["command"] == "make build"
    assert validate(first.all_events()) == []


def test_probes_come_from_facts_said_once_and_early():
    first, _ = import_text(HISTORY, "h", parse_input_history(TYPED), min_turns=1)
    probes = first.probes()
    answers = {a for p in probes for a in p["answers"]}
    assert any("tenant-zz9-unique" in a for a in answers)  # the error line of the test run
    assert "app.py" in answers  # the file the first reply edited
    for p in probes:
        assert p["source_turn"] < first.turns()


def test_cli_import_writes_valid_files(tmp_path, capsys):
    src = tmp_path / ".aider.chat.history.md"
    src.write_text(HISTORY)
    (tmp_path / ".aider.input.history").write_text(TYPED)
    assert main(["import", "aider-history", str(src), "-o", str(tmp_path / "out")]) == 0
    files = sorted((tmp_path / "out").glob("*.jsonl"))
    assert files and all(load(f).turns() >= 2 for f in files)
    assert main(["import", "locomo", str(tmp_path / "missing.json"), "-o", str(tmp_path)]) == 2


LOCOMO = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:00 pm on 3 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Quince."},
                {"speaker": "Ann", "dia_id": "D1:2", "text": "She is grey."},
                {"speaker": "Bob", "dia_id": "D1:3", "text": "Lovely!", "blip_caption": "a cat"},
            ],
            "session_2_date_time": "2:00 pm on 9 June, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "I ran a marathon in Oslo."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Wow, well done."},
            ],
        },
        "qa": [
            {
                "question": "What is Ann's cat called?",
                "answer": "Quince",
                "evidence": ["D1:1"],
                "category": 1,
            },
            {
                "question": "Where did Bob run?",
                "answer": "Oslo",
                "evidence": ["D2:1"],
                "category": 4,
            },
            {
                "question": "What is Bob's dog called?",
                "adversarial_answer": "Rex",
                "evidence": ["D1:3"],
                "category": 5,
            },
            {"question": "No evidence?", "answer": "x", "evidence": [], "category": 2},
        ],
    }
]


def test_locomo_turns_dates_and_probes():
    (replay,) = import_data(LOCOMO, "t")
    assert replay.name == "locomo-conv-x" and replay.meta["edit_format"] == "ask"
    users = [e["content"] for e in replay.events if e["type"] == "user"]
    assert users[0].startswith("[Session 1, 1:00 pm on 3 May, 2023]")
    assert "Ann: She is grey." in users[0]  # consecutive lines of one speaker joined
    assert users[1].startswith("[Session 2, 2:00 pm on 9 June, 2023]")  # Bob opened it
    replies = [e["content"] for e in replay.events if e["type"] == "assistant"]
    assert "a cat" in replies[0] and "Oslo" in replies[1]
    probes = replay.probes()
    assert [(p["answers"], p["source_turn"]) for p in probes] == [
        (["Quince", "Ann: I adopted a cat named Quince."], 1),
        (["Oslo", "Bob: I ran a marathon in Oslo."], 2),
    ]
    assert validate(replay.all_events()) == []
    (strict,) = [conversation_replay(LOCOMO[0], "s", evidence=False)]
    assert [p["answers"] for p in strict.probes()] == [["Quince"], ["Oslo"]]


def test_real_histories_import_cleanly(histories_dir):
    files = sorted(histories_dir.glob("*.md"))
    if not files:
        pytest.skip("no chat histories in the shared data")
    total_runs = kept = 0
    for path in files:
        for replay in import_path(path):
            assert validate(replay.all_events()) == [], replay.name
            for e in replay.events:
                if e["type"] == "run":
                    total_runs += 1
                    kept += not e.get("gap")
    assert total_runs and kept  # Aider's own history keeps /test output inline


def test_real_aider_history_keeps_test_output(histories_dir):
    path = histories_dir / "Aider-AI__aider.md"
    if not path.is_file():
        pytest.skip("Aider-AI__aider.md not in the shared data")
    outputs = [e["output"] for r in import_path(path) for e in r.events if e.get("via") == "test"]
    assert any("FAILED" in o and "test session starts" in o for o in outputs)


def test_real_locomo(memory_bench_dir):
    path = memory_bench_dir / "locomo_dev3.json"
    if not path.is_file():
        pytest.skip("LoCoMo not in the shared data")
    data = json.loads(path.read_text())
    replays = import_locomo(path)
    assert len(replays) == len(data)
    for sample, replay in zip(data, replays):
        assert validate(replay.all_events()) == []
        expected = [q for q in sample["qa"] if q.get("category") != 5 and q.get("evidence")]
        assert 0 < len(replay.probes()) <= len(expected)
        assert not any(p["kind"] == "locomo-category-5" for p in replay.probes())


CUT_OFF = """
# aider chat started at 2025-01-04 09:00:00

#### refactor the cache$

app.py
```python
<<<<<<< SEARCH
cache = {}
=======

> Tokens: 6,354 sent, 960 received. Cost: $0.03 message, $0.06 session.$

#### /undo$
> Removed: 34b0134 feat: add caching$

#### what went wrong?$

The reply was cut off by the output limit.
""".replace("$\n", "  \n")


def test_a_reply_cut_off_inside_a_fence_does_not_swallow_the_session():
    (replay,) = import_text(CUT_OFF, "c", min_turns=1)
    users = [e["content"] for e in replay.events if e["type"] == "user"]
    assert users == ["refactor the cache", "/undo", "what went wrong?"]
    first_reply = next(e["content"] for e in replay.events if e["type"] == "assistant")
    assert "Tokens:" not in first_reply and "34b0134" not in first_reply


def test_probe_questions_never_contain_their_answer():
    first, _ = import_text(HISTORY, "h", parse_input_history(TYPED), min_turns=1)
    assert first.probes()
    for p in first.probes():
        assert not any(a in p["question"] for a in p["answers"])


# -- ground truth for the fact-tracker evaluation (bench/facts.py) -------------------------------

TRUTH = """
# aider chat started at 2025-01-05 09:00:00

> Aider v0.50.1$
> Model: claude-3-5-sonnet with diff edit format$

#### /add app.py$
> Added app.py to the chat$

#### first$

> Initial repo scan can be slow in larger repos, but only happens once.

First reply, after an old Aider one-liner without the closing spaces.

app.py
```python
<<<<<<< SEARCH
a = 1
=======
a = 2
>>>>>>> REPLACE
```

> Tokens: 1k sent, 10 received.$
> Committing app.py before applying edits.$
> Commit 1111111 chore: the user's own change$
> Applied edit to app.py$
> Applied edit to docs/read me.md$
> Commit 2222222 feat: change a$
> Commit 3333333 style: fix lint in app.py$

#### /commit$
> Commit 4444444 chore: typed commit$

#### /architect plan it$

Plan: change b.

> Tokens: 1k sent, 10 received.$

#### Plan: change b.$

app.py
```python
<<<<<<< SEARCH
b = 1
=======
b = 2
>>>>>>> REPLACE
```

> Applied edit to app.py$
> Unable to commit: Cmd('git') failed due to: exit code(128)$
> cmdline: git commit -m fix: change b --no-verify -- /repo/app.py$
> stderr: 'error: gpg failed to sign the data$
""".replace("$\n", "  \n")


def test_replies_keep_the_applied_and_commit_lines_that_follow_them():
    counts = Counter()
    (replay,) = import_text(TRUTH, "t", min_turns=1, split_replies=True, unattributed=counts)
    assert validate(replay.all_events()) == []
    replies = [e for e in replay.events if e["type"] == "assistant"]
    first, plan, editor = replies
    assert "First reply, after an old Aider one-liner" in first["content"]
    assert first["applied"] == ["app.py", "docs/read me.md"]
    assert first["commits"] == [
        {"hash": "1111111", "message": "chore: the user's own change", "kind": "dirty"},
        {"hash": "2222222", "message": "feat: change a"},
        {"hash": "3333333", "message": "style: fix lint in app.py", "kind": "lint"},
    ]
    assert "applied" not in plan and "commits" not in plan
    assert editor["applied"] == ["app.py"]
    assert editor["commits"] == [{"hash": "", "message": "fix: change b", "kind": "failed"}]
    assert counts["no reply"] == 1  # the /commit's line follows no reply
    # the architect's hand-off to its editor is not a turn the user typed
    users = [e["content"] for e in replay.events if e["type"] == "user"]
    assert users == ["/add app.py", "first", "/commit", "/architect plan it"]


def test_merged_replies_keep_their_truth_together():
    (replay,) = import_text(TRUTH, "t", min_turns=1)
    replies = [e for e in replay.events if e["type"] == "assistant"]
    assert len(replies) == 2  # the architect's plan and its editor's edit are one turn
    assert replies[1]["applied"] == ["app.py"] and "Plan: change b." in replies[1]["content"]
    assert replies[1]["content"].count("Plan: change b.") == 1


def test_an_unclosed_indented_quote_stays_in_the_test_output():
    text = """
# aider chat started at 2025-01-06 09:00:00

#### /test pytest$
> ============ test session starts ============
collected 1 item

    def test_x():
>       assert f() == 2

E       assert 1 == 2
FAILED tests/test_x.py::test_x - assert 1 == 2
======= 1 failed in 0.1s =======$

The test fails because f returns 1.
""".replace("$\n", "  \n")
    (replay,) = import_text(text, "u", min_turns=1)
    run = next(e for e in replay.events if e["type"] == "run")
    assert "FAILED tests/test_x.py::test_x" in run["output"]
    reply = next(e for e in replay.events if e["type"] == "assistant")
    assert reply["content"] == "The test fails because f returns 1."


def test_real_histories_ground_truth_matches_the_applied_lines(histories_dir):
    files = sorted(histories_dir.glob("*.md"))
    if not files:
        pytest.skip("no chat histories in the shared data")
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = sum(1 for ln in text.splitlines() if ln.startswith("> Applied edit to "))
        counts = Counter()
        replays = import_path(path, min_turns=1, split_replies=True, unattributed=counts)
        kept = sum(
            len(e.get("applied", [])) for r in replays for e in r.events if e["type"] == "assistant"
        )
        # every Applied line is kept on a reply or counted as following none
        assert kept + counts["no reply"] + counts["skipped"] >= lines * 0.9, path.name
        assert kept <= lines, path.name


def test_a_line_command_before_a_prompt_is_an_input_of_its_own():
    text = """
# aider chat started at 2025-01-07 09:00:00

#### /clear$
#### make it blue$

Done, it is blue now.
""".replace("$\n", "  \n")
    (replay,) = import_text(text, "c", min_turns=1)
    assert [e["content"] for e in replay.events if e["type"] == "user"] == [
        "/clear",
        "make it blue",
    ]
    assert split_inputs("/ask why\nbecause") == ["/ask why\nbecause"]  # the question goes on


# -- LongMemEval ---------------------------------------------------------------------------------


def _lme_entry() -> dict:
    """Three sessions listed out of date order; the second opens with the assistant."""
    return {
        "question_id": "q-test",
        "question_type": "knowledge-update",
        "question_date": "2023/05/09 (Tue) 12:00",
        "questions": ["Where do I live now?", "Which book was suggested?", "Lost session?"],
        "answers": ["Lisbon", "Dune", "nothing"],
        "answer_session_ids": [["s-b"], ["s-c", "s-a"], ["s-gone"]],
        "haystack_dates": [
            "2023/05/02 (Tue) 09:00",
            "2023/05/01 (Mon) 10:00",
            "2023/05/03 (Wed) 08:00",
        ],
        "haystack_session_ids": ["s-b", "s-a", "s-c"],
        "haystack_sessions": [
            [
                {"role": "assistant", "content": "Welcome back."},
                {"role": "user", "content": "I moved to Lisbon.", "has_answer": True},
                {"role": "user", "content": "It is sunny here."},
                {"role": "assistant", "content": "Nice."},
            ],
            [
                {"role": "user", "content": "Hello  "},
                {"role": "assistant", "content": "Hi."},
                {"role": "assistant", "content": "How can I help?"},
                {"role": "user", "content": "   "},
                {"role": "user", "content": "/etc/hosts looks wrong"},
                {"role": "assistant", "content": "Let us look."},
            ],
            [
                {"role": "user", "content": "A good book?"},
                {"role": "assistant", "content": "Try Dune."},
            ],
        ],
    }


def test_longmemeval_sessions_in_date_order_with_headers_and_joins():
    (replay,) = import_longmemeval_data([_lme_entry()])
    assert replay.name == "longmemeval-q-test" and replay.meta["edit_format"] == "ask"
    assert replay.meta["model"] == "gpt-4o" and replay.meta["max_input_tokens"] == 128000
    assert "q-test" in replay.meta["source"] and "knowledge-update" in replay.meta["notes"]
    turns = [e for e in replay.events if e["type"] != "probe"]
    assert [(e["type"], e["content"]) for e in turns] == [
        ("user", "[Session 1, 2023/05/01 (Mon) 10:00]\nHello  "),  # content kept exactly
        ("assistant", "Hi.\n\nHow can I help?"),  # consecutive replies joined
        # would be a command at Aider's prompt without its header; the empty turn is skipped
        ("user", "[Session 1, 2023/05/01 (Mon) 10:00]\n/etc/hosts looks wrong"),
        ("assistant", "Let us look."),
        ("user", "[Session 2, 2023/05/02 (Tue) 09:00]"),  # the assistant opened session 2
        ("assistant", "Welcome back."),
        ("user", "I moved to Lisbon.\n\nIt is sunny here."),
        ("assistant", "Nice."),
        ("user", "[Session 3, 2023/05/03 (Wed) 08:00]\nA good book?"),
        ("assistant", "Try Dune."),
    ]
    assert validate(replay.all_events()) == []


def test_longmemeval_probes_point_at_the_evidence_turns():
    (replay,) = import_longmemeval_data([_lme_entry()])
    probes = replay.probes()
    assert [(p["question"], p["answers"], p["source_turn"], p["kind"]) for p in probes] == [
        ("Where do I live now?", ["Lisbon", "I moved to Lisbon."], 4, "longmemeval-original"),
        # no has_answer turn: the first turn of the earliest answer session (s-a, session 1)
        ("Which book was suggested?", ["Dune"], 1, "longmemeval-added"),
    ]  # the third question's session is not in the haystack
    assert all(e["type"] == "probe" for e in replay.events[-2:])
    users = [e["content"] for e in replay.events if e["type"] == "user"]
    assert probes[0]["answers"][1] in users[probes[0]["source_turn"] - 1]
    (strict,) = [entry_replay(_lme_entry(), "s", evidence=False)]
    assert [p["answers"] for p in strict.probes()] == [["Lisbon"], ["Dune"]]


def test_longmemeval_original_is_the_question_with_flagged_evidence():
    entry = _lme_entry()
    for key in ("questions", "answers", "answer_session_ids"):
        entry[key] = entry[key][::-1]  # the original question is no longer first
    (replay,) = import_longmemeval_data([entry])
    kinds = {p["question"]: p["kind"] for p in replay.probes()}
    assert kinds == {
        "Which book was suggested?": "longmemeval-added",
        "Where do I live now?": "longmemeval-original",
    }
    unflagged = _lme_entry()
    for session in unflagged["haystack_sessions"]:
        for turn in session:
            turn.pop("has_answer", None)
    (plain,) = import_longmemeval_data([unflagged])
    assert [p["kind"] for p in plain.probes()] == ["longmemeval-original", "longmemeval-added"]
    assert plain.probes()[0]["source_turn"] == 3  # session 2's first turn, the header-only one


def test_longmemeval_official_layout_and_abstention():
    entry = _lme_entry()
    for key in ("questions", "answers", "answer_session_ids"):
        del entry[key]
    entry.update(question="Where do I live now?", answer="Lisbon", answer_session_ids=["s-b"])
    (replay,) = import_longmemeval_data(entry)  # one entry, not in a list
    assert replay.meta["source"] == "LongMemEval, question q-test"
    assert [(p["answers"][0], p["kind"]) for p in replay.probes()] == [
        ("Lisbon", "longmemeval-original")
    ]
    entry["question_id"] = "q-test_abs"
    (abstention,) = import_longmemeval_data([entry])
    assert abstention.probes() == [] and abstention.turns() == 5
    del entry["question_id"]
    names = [r.name for r in import_longmemeval_data([dict(entry, question_id="../a/b"), entry])]
    assert names == ["longmemeval-.._a_b", "longmemeval-1"]  # file names, inside the folder


def test_longmemeval_replay_round_trips_through_the_format(tmp_path):
    src = tmp_path / "lme.json"
    src.write_text(json.dumps([_lme_entry()]))
    (replay,) = import_longmemeval(src)
    loaded = load(save(replay, tmp_path / "out.jsonl"))
    assert loaded.meta == replay.meta and loaded.events == replay.events
    assert main(["import", "longmemeval", str(src), "-o", str(tmp_path / "cli")]) == 0
    assert load(tmp_path / "cli" / "longmemeval-q-test.jsonl").probes() == replay.probes()


def _short_dates() -> list:
    entry = _lme_entry()
    entry["haystack_dates"].pop()
    return [entry]


@pytest.mark.parametrize(
    "content, expected",
    [
        ('"just a string"', "expected a list"),
        ("[1, 2", "not a JSON file"),
        (json.dumps([{"question_id": "x"}]), "missing 'haystack_sessions'"),
        (json.dumps(_short_dates()), "3 haystack_sessions but 2 haystack_dates"),
        (
            json.dumps([dict(_lme_entry(), haystack_sessions=[[{"role": "x"}], [], []])]),
            "session 1 is not a list",
        ),
        (json.dumps([dict(_lme_entry(), answers=["a"])]), "must be parallel lists"),
    ],
)
def test_longmemeval_bad_input_is_one_line(tmp_path, capsys, content, expected):
    src = tmp_path / "bad.json"
    src.write_text(content)
    assert main(["import", "longmemeval", str(src), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bench import: ") and expected in err
    assert not (tmp_path / "out").exists()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(
        st.sampled_from(["role", "content", "haystack_sessions", "questions", "question_id"]),
        inner,
        max_size=4,
    ),
    max_leaves=20,
)


def _mutated(change: tuple) -> list:
    """An entry with one field replaced by arbitrary JSON: the near misses real files have."""
    key, value = change
    entry = _lme_entry()
    entry[key] = value
    return [entry]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        JSON,
        st.tuples(st.sampled_from(sorted(_lme_entry())), JSON).map(_mutated),
    )
)
def test_longmemeval_any_json_imports_or_fails_cleanly(data):
    try:
        replays = import_longmemeval_data(data)
    except ReplayFormatError as err:
        assert "\n" not in str(err)
        return
    for replay in replays:
        assert validate(replay.all_events()) == [], replay.name


def test_real_longmemeval(memory_bench_dir):
    path = memory_bench_dir / "longmemeval_s_derived_3haystacks.json"
    if not path.is_file():
        pytest.skip("LongMemEval not in the shared data")
    data = json.loads(path.read_text(encoding="utf-8"))
    replays = import_longmemeval(path)
    assert len(replays) == len(data) == 3
    for entry, replay in zip(data, replays):
        assert validate(replay.all_events()) == [], replay.name
        probes = replay.probes()
        assert 8 <= len(probes) <= 9, replay.name
        assert all(1 <= p["source_turn"] <= replay.turns() for p in probes)
        headers = [e["content"] for e in replay.events if e["type"] == "user"]
        headers = list(dict.fromkeys(h.split("\n", 1)[0] for h in headers if h[:9] == "[Session "))
        dates = [h.split(", ", 1)[1].rstrip("]") for h in headers]
        assert len(headers) == len(entry["haystack_sessions"])
        assert dates == sorted(entry["haystack_dates"])  # this format sorts as text
        text_of = {
            sid: "\n".join(t["content"] for t in session)
            for sid, session in zip(entry["haystack_session_ids"], entry["haystack_sessions"])
        }
        sessions_of = dict(zip(entry["questions"], entry["answer_session_ids"]))
        found = [
            p
            for p in probes
            if loose([p["answers"][0]], [text_of[s] for s in sessions_of[p["question"]]])
        ]
        assert found, replay.name  # an answer said in its evidence session
