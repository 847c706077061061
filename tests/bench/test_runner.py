"""The runner on a tiny replay in every mode: real Aider coders, the stub LLM, the SwitchCoder
loop, /test output, an overflow for plain Aider, and probes; plus the stand-in summary."""

from __future__ import annotations

import pytest

from bench.replay.format import from_events
from bench.replay.metrics import mode_figures
from bench.replay.runner import (
    MODES,
    STAND_IN_LABEL,
    StubLLM,
    messages_tokens,
    run_all,
    stand_in_summary,
)

DECISION = (
    "Decision: parse keeps int() but strips whitespace first; the ticket is PARSE-7731 and the"
    " fallback value for empty input is zero."
)
FAILURE = "FAILED tests/test_app.py::test_parse_blank - ValueError: invalid literal for int()"


def tiny_events(window: int = 4000) -> list[dict]:
    log = "\n".join(f"INFO worker {i % 7} parsed row {i} of batch 12" for i in range(400))
    return [
        {
            "type": "meta",
            "name": "tiny",
            "source": "tests",
            "model": "gpt-4o",
            "max_input_tokens": window,
            "edit_format": "diff",
        },
        {"type": "add", "path": "app.py", "content": "def parse(x):\n    return int(x)\n"},
        {"type": "user", "content": "What should parse do with blank input?"},
        {"type": "assistant", "content": DECISION},
        {
            "type": "run",
            "command": "pytest -q",
            "output": f"{FAILURE}\n{log}\n",
            "exit_code": 1,
            "via": "test",
        },
        {
            "type": "assistant",
            "content": "app.py\n```python\n<<<<<<< SEARCH\n    return int(x)\n=======\n"
            "    return int(x.strip() or 0)\n>>>>>>> REPLACE\n```\n",
        },
        {"type": "user", "content": "/ask is the fix complete for the blank input case?"},
        {"type": "assistant", "content": "Yes: blank input now parses to zero. " * 4},
        {"type": "user", "content": "/web https://example.com"},  # skipped: needs the network
        {
            "type": "probe",
            "question": "Which ticket is the parse decision?",
            "answers": ["PARSE-7731"],
            "source_turn": 1,
        },
    ]


@pytest.fixture(scope="module")
def runs():
    return {r.mode: r for r in run_all([from_events(tiny_events())], list(MODES), vectors=False)}


def test_every_mode_replays_every_turn(runs):
    assert set(runs) == set(MODES)
    for run in runs.values():
        assert run.turns == 4 and run.skipped_commands == 1 and not run.errors
        assert len(run.gardener_ms) == 3
        assert [r.turn for r in run.requests if r.kind == "main"][0] == 1


def test_plain_aider_overflows_where_the_gardener_does_not(runs):
    for mode in ("aider", "aider-fixed"):
        assert any(r.overflow for r in runs[mode].requests), mode
    for mode in ("gardener", "gardener-evict", "gardener-incremental"):
        fig = mode_figures(runs[mode])
        assert fig["overflows"] == 0 and fig["requests"] == 3, mode
        assert fig["prompt_tokens_peak"] <= 4000
        assert sum(runs[mode].gardener_ms) > 0
    assert all(ms == 0 for ms in runs["aider"].gardener_ms)


def test_recorded_replies_are_what_the_model_said(runs):
    # the edit reply was applied by Aider's real edit path in the temp repo: no reply left over
    assert runs["gardener"].unused_replies == 0
    # plain aider lost the /test request to the overflow, so its edit reply was never asked for
    assert runs["aider"].unused_replies >= 1


def test_probes(runs):
    for mode, run in runs.items():
        (probe,) = run.probes
        assert probe.distance == 3
        if mode.startswith("gardener"):
            assert probe.in_recall5, mode  # the decision reply is stored and found by its ticket
        else:
            assert probe.in_recall5 is None


def test_stub_counts_summaries_and_raises_over_the_window():
    import litellm
    from aider import prompts

    calls = []

    def real(**kwargs):
        calls.append(kwargs["mock_response"])
        return kwargs["mock_response"]

    stub = StubLLM(real, "gpt-4o", 50)
    stub.queue = ["first reply"]
    summary_request = [
        {"role": "system", "content": prompts.summarize},
        {"role": "user", "content": "# USER\nplease add retries\n# ASSISTANT\nok " * 20},
    ]
    out = stub(model="gpt-4o", messages=summary_request)
    assert out.startswith("[stand-in for Aider's LLM summary")
    assert stub.queue == ["first reply"]  # a summary does not consume a recorded reply
    assert stub(model="gpt-4o", messages=[{"role": "user", "content": "hi"}]) == "first reply"
    with pytest.raises(litellm.ContextWindowExceededError):
        stub(model="gpt-4o", messages=[{"role": "user", "content": "word " * 200}])
    assert [r.kind for r in stub.requests] == ["summary", "main", "main"]
    assert [r.overflow for r in stub.requests] == [False, False, True]


def test_stand_in_summary_is_labelled_and_smaller():
    content = "".join(
        f"# USER\nrequest number {i} about caching\n# ASSISTANT\n{'ok ' * 50}\n" for i in range(40)
    )
    summary = stand_in_summary(content, "gpt-4o", 1024)
    assert summary.splitlines()[0] == STAND_IN_LABEL.format(
        tokens=messages_tokens([{"content": content}], "gpt-4o")
    )
    assert "request number 0 about caching" in summary and "ok ok" not in summary
    assert (
        messages_tokens([{"content": summary}], "gpt-4o")
        < messages_tokens([{"content": content}], "gpt-4o") // 4
    )


def test_an_answer_in_a_prompt_over_the_window_does_not_count():
    from bench.replay.runner import ModeRun, _in_prompt

    run = ModeRun("r", "aider", "gpt-4o", 50)
    small = [{"role": "user", "content": "the ticket is PARSE-7731"}]
    big = small + [{"role": "user", "content": "filler " * 100}]
    assert _in_prompt(["PARSE-7731"], small, run)
    assert not _in_prompt(["PARSE-7731"], big, run)
    assert not _in_prompt(["PARSE-9999"], small, run)


def test_added_files_are_in_the_prompt_even_with_spaces_in_their_path():
    events = [
        tiny_events()[0],
        {"type": "add", "path": "docs/my notes.md", "content": "Codename: OSPREY-5521\n"},
        {"type": "user", "content": "What is the codename in my notes?"},
        {"type": "assistant", "content": "It is in the notes."},
        {"type": "probe", "question": "codename?", "answers": ["OSPREY-5521"], "source_turn": 1},
    ]
    (run,) = run_all([from_events(events)], ["aider"], vectors=False)
    assert run.probes[0].in_prompt and not run.errors


def continuity_events() -> list[dict]:
    """A decision, /checkpoint, a long reply, /soft-restart, probes; a new process, probes."""
    return [
        tiny_events()[0] | {"max_input_tokens": 16000},
        {"type": "add", "path": "app.py", "content": "def parse(x):\n    return int(x)\n"},
        {"type": "user", "content": "Use orjson instead of json for parsing. " + DECISION},
        {"type": "assistant", "content": "Agreed."},
        {"type": "user", "content": "/checkpoint decision made"},
        {"type": "user", "content": "Explain the parser."},
        {"type": "assistant", "content": "It parses rows of the batch. " * 40},
        {"type": "user", "content": "/soft-restart"},
        {"type": "probe", "question": "ticket?", "answers": ["PARSE-7731"], "source_turn": 1},
        {"type": "user", "content": "What next?"},
        {"type": "assistant", "content": "Tests."},
        {"type": "session"},
        {"type": "user", "content": "Where were we?"},
        {"type": "assistant", "content": "At the tests."},
        {
            "type": "probe",
            "question": "ticket?",
            "answers": ["PARSE-7731"],
            "source_turn": 1,
            "kind": "artifact",
        },
    ]


@pytest.fixture(scope="module")
def continuity_runs():
    import bench.replay.runner as runner

    log: list[tuple] = []

    class Recording(runner._Session):
        def __init__(self, replay, mode, root, store, vectors, resume=False):
            log.append(("open", mode, root, store, resume))
            super().__init__(replay, mode, root, store, vectors, resume)

        def close(self):
            if not self.closed:
                log.append(("close", self.mode))
            super().close()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "_Session", Recording)
        runs = run_all(
            [from_events(continuity_events())], ["aider", "gardener-evict"], vectors=False
        )
    return {r.mode: r for r in runs}, log


def test_a_session_event_closes_the_process_and_starts_one_on_the_same_repo_and_store(
    continuity_runs,
):
    runs, log = continuity_runs
    for mode in ("aider", "gardener-evict"):
        mine = [e for e in log if e[1] == mode]
        assert [e[0] for e in mine] == ["open", "close", "open", "close"], mode
        assert mine[0][2:4] == mine[2][2:4]  # same repo, same store
        assert (mine[0][4], mine[2][4]) == (False, mode.startswith("gardener"))
        assert runs[mode].sessions == 2 and runs[mode].turns == 6 and not runs[mode].errors


def test_gardener_commands_in_plain_aider(continuity_runs):
    runs, _ = continuity_runs
    # /checkpoint is skipped in plain aider; /soft-restart is replayed there as /clear
    assert runs["aider"].skipped_commands == 1
    assert runs["gardener-evict"].skipped_commands == 0
    first = runs["aider"].probes[0]
    assert not first.in_prompt  # the history that said it was cleared


def test_probes_know_which_reset_came_before_them(continuity_runs):
    runs, _ = continuity_runs
    for run in runs.values():
        assert [(p.phase, p.kind) for p in run.probes] == [
            ("after-soft-restart", ""),
            ("after-resume", "artifact"),
        ]
        assert [p.turn for p in run.probes] == [4, 6]
    assert not runs["aider"].probes[1].in_prompt  # a new plain-aider process knows nothing


def test_store_opening_is_timed_once_per_process_and_not_in_the_turns(continuity_runs):
    runs, _ = continuity_runs
    assert runs["aider"].gardener_open_ms == []
    opens = runs["gardener-evict"].gardener_open_ms
    assert len(opens) == 2 and all(ms > 0 for ms in opens)
    assert len(runs["gardener-evict"].gardener_ms) == 6


def test_the_clock_leaves_store_opening_out_of_the_turn(monkeypatch, tmp_path):
    from types import SimpleNamespace

    import aider_gardener.store as store_pkg
    from aider_gardener.integration.options import GardenerConfig
    from aider_gardener.integration.session import GardenerSession
    from bench.replay import runner
    from bench.replay.runner import GardenerClock, _timed_gardener

    # the clock the runner reads moves only when this test says so: the figures are exact,
    # whatever else the machine is doing (wall time would add any scheduling delay)
    now = [1000.0]
    time = SimpleNamespace(sleep=lambda s: now.__setitem__(0, now[0] + s))
    monkeypatch.setattr(runner, "time", SimpleNamespace(perf_counter=lambda: now[0]))

    def slow_open(*args, **kwargs):
        time.sleep(0.2)
        return SimpleNamespace(close=lambda: None)

    monkeypatch.setattr(store_pkg, "open_store", slow_open)
    session = GardenerSession(GardenerConfig(store=str(tmp_path / "s")))
    coder = SimpleNamespace(root=str(tmp_path), main_model=SimpleNamespace(name="gpt-4o"))
    clock = GardenerClock()
    originals = (GardenerSession.attempt, GardenerSession.open_store)
    with _timed_gardener(clock):
        session.attempt("step", lambda: session.open_store(coder) and time.sleep(0.05))
        session.attempt("step", session.open_store, coder)  # already open: not an opening
    assert len(clock.opens) == 1 and clock.opens[0] == pytest.approx(200)
    assert clock.turn_ms == pytest.approx(50)  # the step's own work, without the opening
    assert (GardenerSession.attempt, GardenerSession.open_store) == originals  # restored


def test_closing_a_session_waits_for_every_coders_summarizer(monkeypatch):
    """A mode switch leaves the old coder's summarizer running; its request must land in this
    run, not in the next mode's stub (that once counted a plain-Aider summary as the gardener's)."""
    import threading
    import time
    import types

    from bench.replay import runner

    done: list[str] = []

    def summarize_worker():  # Aider's thread target; Python names the thread after it
        time.sleep(0.3)
        done.append("summarized")

    thread = threading.Thread(target=summarize_worker)
    thread.start()
    current_coder = types.SimpleNamespace(summarizer_thread=None)
    runner._Session.close(types.SimpleNamespace(closed=False, coder=current_coder))
    assert done == ["summarized"] and not thread.is_alive()
