"""Real Aider chat histories replayed through the gardener: history stays within budget, turns
alternate, and the gardener keeps every user prompt while compressing the rest."""

from __future__ import annotations

import pytest
from aider.sendchat import sanity_check_messages

from aider_gardener.integration.session import framing
from tests.integration.replay import begin_turn, end_turn, gardener_work, turns_from_history

HISTORIES = ["Aider-AI__aider.md", "BBXtreme__Waterfront.md", "7onc3k__brejlator.md"]


@pytest.mark.slow
@pytest.mark.parametrize("name", HISTORIES)
def test_real_history_stays_within_budget(make_coder, histories_dir, name):
    path = histories_dir / name
    if not path.is_file():
        pytest.skip(f"{name} not in the shared data")
    turns = turns_from_history(path, limit=60)
    budget = 6000
    coder = make_coder("ask", budget=budget, recent_turns=2, mode="evict")
    session = coder.gardener
    raw = 0
    worst = 0
    previous = None
    for turn in turns:
        begin_turn(coder, turn, previous)
        after = gardener_work(coder)
        raw += sum(
            len(x) for x in [turn.prompt, turn.reply, *(previous.outputs if previous else [])]
        )
        # counted as eviction counts history: each message's text plus its framing
        protected = sum(
            session.meta(m).tokens_now + framing(coder)
            for m in coder.done_messages + coder.cur_messages
            if session.meta(m) and session.turn - session.meta(m).turn < 2
        )
        worst = max(worst, after - max(budget, protected))
        assert sanity_check_messages(coder.done_messages + coder.cur_messages)
        end_turn(coder, turn)
        previous = turn
    assert worst <= 0, f"history exceeded budget beyond the protected last turns by {worst}"
    prompts = [m for m in session.table.values() if m.kind == "prompt"]
    assert prompts and all(m.state != "summary" for m in prompts)
    assert raw > 12 * budget  # chars: ~3x the budget in tokens, big enough to need eviction
