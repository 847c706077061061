"""The three summarizer fixes of ``aider-fixed``, on a stand-in coder object."""

from __future__ import annotations

from types import SimpleNamespace

from bench.replay import aider_fixed


class Summarizer:
    def __init__(self, fail: bool = False):
        self.fail = fail

    def too_big(self, messages):
        return len(messages) > 2

    def summarize(self, messages):
        if self.fail:
            raise ValueError("summarizer unexpectedly failed for all models")
        return [{"role": "user", "content": "summary"}, {"role": "assistant", "content": "Ok."}]


def coder(fail: bool = False):
    warnings = []
    c = SimpleNamespace(
        summarizer=Summarizer(fail),
        done_messages=[{"role": "user", "content": str(i)} for i in range(4)],
        summarizer_thread=None,
        summarizing_messages=None,
        summarized_done_messages=[],
        io=SimpleNamespace(tool_warning=warnings.append),
        warnings=warnings,
    )
    for name in ("summarize_start", "summarize_worker", "summarize_end"):
        setattr(c, name, getattr(aider_fixed, name).__get__(c))
    return c


def test_summary_kept_when_messages_arrive_while_summarizing():
    c = coder()
    c.summarize_start()
    assert c.summarizer_thread.daemon
    c.done_messages += [
        {"role": "user", "content": "notice"},
        {"role": "assistant", "content": "Ok."},
    ]
    c.summarize_end()
    assert [m["content"] for m in c.done_messages] == ["summary", "Ok.", "notice", "Ok."]


def test_failed_summary_keeps_the_history():
    c = coder(fail=True)
    before = list(c.done_messages)
    c.summarize_start()
    c.summarize_end()
    assert c.done_messages == before and c.warnings


def test_context_manager_installs_and_restores():
    from aider.coders.base_coder import Coder

    original = Coder.__dict__["summarize_end"]
    with aider_fixed.fixed_summarizer():
        assert Coder.__dict__["summarize_end"] is aider_fixed.summarize_end
    assert Coder.__dict__["summarize_end"] is original
