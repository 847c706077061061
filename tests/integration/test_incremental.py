"""IncrementalContext mode: the request stays about the same size however long the session."""

from __future__ import annotations

from aider.sendchat import sanity_check_messages

from aider_gardener.integration.incremental import HEADER
from aider_gardener.tokens import count_tokens


def _reply(i: int) -> str:
    return f"Turn {i} answer: " + " ".join(
        f"module_{i} uses helper_{j} to load config {j}." for j in range(40)
    )


def test_prompt_size_stays_about_constant(make_coder, llm):
    coder = make_coder("ask", mode="incremental", recent_turns=2, budget=4000)
    llm.replies = [lambda msgs: _reply(len(llm.requests))]
    turns = 24
    for i in range(turns):
        coder.run(with_message=f"turn {i}: where is module_{i} configured?")
    sizes = [sum(count_tokens(m["content"]) for m in r) for r in llm.requests]
    late = sizes[8:]
    half = len(late) // 2
    first, second = sum(late[:half]) / half, sum(late[half:]) / (len(late) - half)
    assert abs(second - first) <= 0.15 * first  # no upward trend
    assert max(late) - min(late) <= 0.25 * 4000  # a sawtooth within the compiled cap
    growth_without = 23 * count_tokens(_reply(1))
    assert sizes[-1] - sizes[3] < growth_without / 4
    for request in llm.requests:
        assert sanity_check_messages(request)
    summaries = [
        next((m["content"] for m in r if m["content"].startswith(HEADER)), "") for r in llm.requests
    ]
    cuts = sum(1 for a, b in zip(summaries, summaries[1:]) if a and not b.startswith(a))
    assert 1 <= cuts <= turns // 4  # the capped summary is cut in batches, not every turn
    # the shared history keeps everything: the view only shapes requests
    assert len(coder.cur_messages) == 2 * turns
    summary = next(m["content"] for m in llm.last if m["content"].startswith(HEADER))
    assert "You said: turn 21: where is module_21 configured?" in summary
    assert "older lines omitted" in summary  # the oldest fell off the capped summary
    assert "turn 22: where is module_22" not in summary  # recent turns are verbatim instead
    assert any("turn 22: where is module_22" in m["content"] for m in llm.last)


def test_compiled_lines_are_stable_prefix(make_coder, llm):
    coder = make_coder("ask", mode="incremental", recent_turns=1)
    llm.replies = [lambda msgs: _reply(len(llm.requests))]
    summaries = []
    for i in range(6):
        coder.run(with_message=f"turn {i}: tell me about module_{i}")
        found = [m["content"] for m in llm.last if m["content"].startswith(HEADER)]
        summaries.append(found[0] if found else "")
    for a, b in zip(summaries[1:], summaries[2:]):
        assert b.startswith(a)  # the compiled summary only grows at its end


def test_compiled_lines_carry_no_secret():
    """The compiled summary quotes each old message's first line and command: a key typed on
    a /run line must not ride along in every later request."""
    from aider_gardener.integration.incremental import _line
    from aider_gardener.integration.session import MessageMeta

    key = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz" * 3
    meta = MessageMeta(
        msg={},
        original=f"Incorrect API key provided: {key}\n",
        role="user",
        kind="tool",
        cls="error",
        turn=3,
        command=f"OPENAI_API_KEY={key} ./deploy",
        entry_id="abcdefghij",
    )
    line = _line(meta)
    assert key not in line and "./deploy" in line and "[id=abcdefghij]" in line
