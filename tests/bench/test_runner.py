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
