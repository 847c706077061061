"""Overflow recovery: a context-window error evicts harder and retries once, instead of Aider's
"you sent too many tokens" stop; the pre-flight check evicts before the window is exceeded."""

from __future__ import annotations

from aider.sendchat import sanity_check_messages

from aider_gardener.integration.mixin import OVERFLOW_NOTICE
from aider_gardener.tokens import count_tokens

CWE = "litellm.ContextWindowExceededError"


def _fill(coder, pairs: int = 6):
    for i in range(pairs):
        coder.cur_messages += [
            dict(role="user", content=f"question {i} about the deploy"),
            dict(
                role="assistant",
                content=f"Answer {i}: "
                + " ".join(f"step {j} of deploy {i} is fine." for j in range(150)),
            ),
        ]


def _history_tokens(request):
    return sum(count_tokens(m["content"]) for m in request if m["role"] != "system")


def test_context_window_error_evicts_and_retries_once(make_coder, llm, capsys):
    coder = make_coder("ask", recent_turns=2)
    _fill(coder)
    llm.replies = [CWE, "Recovered: the deploy is fine."]
    coder.run(with_message="so is the deploy fine?")
    assert len(llm.requests) == 2
    assert _history_tokens(llm.requests[1]) < _history_tokens(llm.requests[0])
    assert sanity_check_messages(llm.requests[1])
    assert coder.cur_messages[-1]["content"] == "Recovered: the deploy is fine."
    assert coder.cur_messages[-2]["content"] == "so is the deploy fine?"
    assert all(m["content"] != OVERFLOW_NOTICE for m in coder.cur_messages)
    out = capsys.readouterr()
    text = out.out + out.err
    assert text.count("evicting harder and retrying once") == 1
    assert "has hit a token limit" not in text


def test_second_overflow_falls_back_to_aider(make_coder, llm, capsys):
    coder = make_coder("ask")
    _fill(coder, 2)
    llm.replies = [CWE]
    coder.run(with_message="still too big?")
    assert len(llm.requests) == 2  # one retry, no loop
    assert coder.cur_messages[-1]["content"] == OVERFLOW_NOTICE  # Aider's own behaviour
    out = capsys.readouterr()
    assert "has hit a token limit" in out.out + out.err


def test_preflight_evicts_before_exceeding_the_window(make_coder, llm):
    coder = make_coder("ask", budget=1_000_000)  # budget alone would never evict
    coder.main_model.info = dict(coder.main_model.info, max_input_tokens=6000)
    _fill(coder, 8)
    llm.replies = ["Fine."]
    coder.run(with_message="and now?")
    assert len(llm.requests) == 1
    total = sum(count_tokens(m["content"]) for m in llm.last)
    assert total <= 0.95 * 6000
    assert sanity_check_messages(llm.last)
