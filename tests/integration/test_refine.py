"""``--gardener-llm-refine``: weak-model refinement of old summaries, off the turn path."""

from __future__ import annotations

import threading

from aider_gardener.integration.refine import Refiner, acceptable, refiner_of
from tests.integration.helpers import text_of

LOG = "".join(
    (
        f"INFO worker-{i % 5} job {i} done in {i % 17} ms\n"
        if i % 50
        else f"ERROR worker-{i % 5} src/jobs/runner.py:{100 + i % 9} job {i} failed: TimeoutError\n"
    )
    for i in range(2000)
)


def test_acceptable_needs_shorter_and_every_key():
    summary = "src/app.py:12 ValueError in parse_value; see tests/test_app.py::test_parse E0432"
    assert acceptable(
        summary,
        "src/app.py:12 ValueError parse_value tests/test_app.py::test_parse E0432",
        "gpt-4o",
    )
    assert not acceptable(summary, "ValueError in parse_value", "gpt-4o")  # lost the path
    assert not acceptable(summary, summary + " and more words", "gpt-4o")  # not shorter
    assert not acceptable(summary, "   ", "gpt-4o")


def _aged_coder(make_coder, llm, repo):
    (repo / "jobs.log").write_text(LOG)
    # max_output well above the summary: a summary cut to fit 200 tokens leaves too little for a
    # refinement to save MIN_SAVING
    coder = make_coder(llm_refine=True, max_output=1024, recent_turns=1)
    coder.commands.cmd_run("cat jobs.log")
    return coder


def test_refinement_runs_in_background_and_is_applied_in_a_batch(make_coder, llm, repo):
    coder = _aged_coder(make_coder, llm, repo)
    session = coder.gardener
    meta = session.meta(coder.cur_messages[-2])
    assert meta.state == "summary"
    release = threading.Event()
    called = threading.Event()
    refined_calls = []

    def reply(messages):
        if messages and messages[0]["content"].startswith("Rewrite this summary"):
            refined_calls.append(messages)
            called.set()
            release.wait(10)
            body = messages[-1]["content"]
            from aider_gardener.store.priority import extract_keys

            return " ".join(extract_keys(body, 256))
        return "Looked at it."

    llm.replies = [reply]
    coder.run(with_message="what failed in the jobs log?")
    # the turn has finished; the weak-model call starts (and blocks) only afterwards
    assert called.wait(120) and refined_calls and not release.is_set()
    release.set()
    refiner_of(session).wait(120)  # returns once the refinement is done; 120 s is a safety net
    old_summary = meta.summary
    coder.run(with_message="anything else?")
    # applied in one batch: shorter, handle kept, original still stored
    assert session.stats["refined"] == 1
    assert len(meta.summary) < len(old_summary)
    assert f"id={meta.entry_id}" in meta.summary
    assert session.store.get(meta.entry_id).original.strip() == LOG.strip()
    assert meta.summary in text_of(llm.last)


def test_a_failing_weak_model_loses_nothing(make_coder, llm, repo):
    coder = _aged_coder(make_coder, llm, repo)
    session = coder.gardener
    meta = session.meta(coder.cur_messages[-2])
    before = meta.summary

    def reply(messages):
        if messages and messages[0]["content"].startswith("Rewrite this summary"):
            raise RuntimeError("weak model down")
        return "Ok."

    llm.replies = [reply]
    coder.run(with_message="first")
    refiner_of(session).wait(120)
    coder.run(with_message="second")
    assert meta.summary == before
    assert len(llm.requests) >= 2


def test_off_by_default_makes_no_extra_calls(make_coder, llm, repo):
    (repo / "jobs.log").write_text(LOG)
    coder = make_coder(max_output=200)
    coder.commands.cmd_run("cat jobs.log")
    coder.run(with_message="what failed?")
    coder.run(with_message="and then?")
    assert all(
        not (m and m[0].get("content", "").startswith("Rewrite this summary")) for m in llm.requests
    )
    assert coder.gardener.refiner is None


def test_refiner_ignores_messages_that_left_the_chat(make_coder, llm, repo):
    coder = _aged_coder(make_coder, llm, repo)
    refiner = Refiner(coder.gardener)
    meta = coder.gardener.meta(coder.cur_messages[-2])
    refiner._done[id(meta)] = (meta, meta.summary, "short")
    coder.commands.cmd_clear("")
    assert refiner.apply(coder) == 0
