"""Priority eviction replaces Aider's summarizer: budgets hold, turns alternate, no LLM calls."""

from __future__ import annotations

import dataclasses

from aider.sendchat import sanity_check_messages
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aider_gardener.integration.eviction import evict, history_tokens, priority
from aider_gardener.integration.ingest import sync
from aider_gardener.integration.session import model_name, reference_text
from aider_gardener.tokens import count_tokens
from tests.integration.helpers import text_of


def _log(tag: str, n: int) -> str:
    return "".join(
        f"2024-05-0{i % 9 + 1} INFO {tag} worker-{i % 5} step {i} ok\n" for i in range(n)
    )


def _reply(tag: str) -> str:
    body = " ".join(
        f"The {tag} handler validates input {i} before calling parse." for i in range(60)
    )
    return f"About {tag}:\n\n{body}\n\n```python\ndef {tag}(x):\n    return parse(x)\n```\n"


def _record_history(coder, sizes: list):
    """Wrap format_chat_chunks to record the history tokens of every request built."""
    real = coder.format_chat_chunks

    def wrapped():
        chunks = real()
        if coder._garden_sending:
            sizes.append(
                sum(count_tokens(m["content"]) for m in chunks.done + chunks.cur if m["content"])
            )
        return chunks

    coder.format_chat_chunks = wrapped


def test_ask_session_stays_under_budget_without_llm_summaries(make_coder, llm):
    budget = 3000
    coder = make_coder("ask", budget=budget, recent_turns=2, mode="evict")
    llm.replies = [lambda msgs: _reply(f"topic{len(llm.requests)}")]
    sizes: list[int] = []
    _record_history(coder, sizes)
    turns = 16
    for i in range(turns):
        coder.run(with_message=f"question {i}: how does topic{i + 1} relate to parse?")
    assert len(llm.requests) == turns  # one request per turn: no summarizer calls
    assert len(sizes) == turns
    for request in llm.requests:
        assert sanity_check_messages(request)  # alternates, ends with the user
        assert all(set(m) == {"role", "content"} for m in request)  # no gardener metadata
    session = coder.gardener
    original = turns * count_tokens(_reply("topic10"))
    assert original > 3 * budget, "the session would have outgrown the budget"
    assert max(sizes[4:]) <= budget
    assert history_tokens(session, coder) <= budget + count_tokens(_reply("topic99")) + 64
    # cur_messages (ask mode) was gardened in place: old replies are summaries or gone
    states = [session.meta(m).state for m in coder.cur_messages if session.meta(m)]
    assert any(s != "full" for s in states) or len(coder.cur_messages) < 2 * turns


def test_prompts_outlive_outputs(make_coder, llm):
    coder = make_coder("ask", budget=2500, recent_turns=1)
    llm.replies = ["Noted."]
    prompts = []
    for i in range(6):
        coder.cur_messages += [
            dict(
                role="user",
                content=f"I ran this command:\n\nrun{i}\n\nAnd got this output:\n\n"
                + _log(f"job{i}", 120),
            ),
            dict(role="assistant", content="Ok."),
        ]
        prompts.append(f"what happened in job{i}?")
        coder.run(with_message=prompts[-1])
    last = "\n".join(m["content"] for m in llm.last)
    assert all(p in last for p in prompts), "user prompts are evicted last"
    assert "job0 worker-0 step 0 ok" not in last  # the oldest log went first


def test_eviction_tiers_keep_alternation_and_pins(make_coder):
    coder = make_coder("ask", budget=2000, recent_turns=1)
    session = coder.gardener
    done = []
    for i in range(10):
        done += [
            dict(
                role="user",
                content=f"I ran this command:\n\njob{i}\n\nAnd got this output:\n\n"
                + _log(f"t{i}", 80),
            ),
            dict(role="assistant", content=_reply(f"t{i}")),
        ]
    coder.done_messages = done
    coder.cur_messages = [dict(role="user", content="so what failed?")]
    sync(session, coder)
    pinned = session.meta(done[2])
    pinned.pinned = True
    pinned_msg = done[2]
    shared = list(done)  # the dicts, to check none was mutated
    snapshot = [dict(m) for m in shared]
    before = history_tokens(session, coder)
    report = evict(session, coder)
    after = history_tokens(session, coder)
    assert before > 2000 >= after == report.after
    assert report.summarized + report.referenced + report.dropped + report.aged > 0
    roles = [m["role"] for m in coder.done_messages + coder.cur_messages]
    assert all(a != b for a, b in zip(roles, roles[1:])) and roles[-1] == "user"
    assert pinned_msg in coder.done_messages  # pinned: same dict, untouched
    assert coder.cur_messages[-1]["content"] == "so what failed?"
    for msg, snap in zip(shared, snapshot):
        assert msg == snap  # slots were replaced, never the shared dicts mutated


def test_hard_eviction_reaches_target(make_coder):
    coder = make_coder("ask", budget=100_000, recent_turns=3)
    session = coder.gardener
    coder.cur_messages = []
    for i in range(6):
        coder.cur_messages += [
            dict(role="user", content=f"explain part {i}"),
            dict(role="assistant", content=_reply(f"part{i}")),
        ]
    coder.cur_messages.append(dict(role="user", content="and the last part?"))
    sync(session, coder)
    total = history_tokens(session, coder)
    assert evict(session, coder).after == total  # under budget and recent: nothing to do
    report = evict(session, coder, hard_target=total // 3)
    assert report.after <= total // 3
    assert coder.cur_messages[-1]["content"] == "and the last part?"
    assert sanity_check_messages(coder.cur_messages)


def test_aging_is_batched(make_coder, llm, repo):
    coder = make_coder("ask", recent_turns=1, budget=20_000)  # batch at 2,000 saved tokens
    llm.replies = ["Noted."]
    changes = 0
    previous: dict[int, str] = {}
    turns = 16
    for i in range(turns):
        coder.commands.cmd_run(f"seq {i * 1000} {i * 1000 + 200}")  # below --gardener-max-output
        coder.run(with_message=f"turn {i}: anything odd in that output?")
        assert f"\n{i * 1000 + 137}\n" in text_of(llm.last)  # the output asked about is whole
        now = {}
        for pos, msg in enumerate(coder.cur_messages):
            now[pos] = msg["content"]
        if any(previous.get(p) not in (None, c) for p, c in now.items()):
            changes += 1
        previous = now
    session = coder.gardener
    aged = [m for m in session.table.values() if m.kind == "tool" and m.state == "summary"]
    assert aged, "old outputs were swapped for summaries"
    assert changes <= turns // 3, f"history prefix changed on {changes} of {turns} turns"
    print(f"aged {len(aged)} outputs in {changes} batches over {turns} turns")


def test_priority_orders_classes_and_failures(make_coder):
    coder = make_coder("ask")
    session = coder.gardener
    session.turn = 10
    from aider_gardener.integration.session import MessageMeta

    def meta(kind, cls, turn=1, **kw):
        return MessageMeta(msg={}, original="", role="user", kind=kind, cls=cls, turn=turn, **kw)

    log, err, prompt = meta("tool", "log"), meta("tool", "error"), meta("prompt", "prompt")
    # issue 7: unresolved errors and failed approaches are evicted after everything else
    assert priority(log, session) < priority(prompt, session) < priority(err, session)
    failed = meta("reply", "prose", failed=True)
    assert priority(meta("reply", "prose"), session) < priority(prompt, session)
    assert priority(failed, session) > priority(prompt, session)
    resolved = meta("tool", "error", resolved=True)
    assert priority(resolved, session) < priority(prompt, session) < priority(err, session)
    assert priority(meta("tool", "log", turn=10), session) > priority(log, session)
    assert priority(meta("tool", "log", pinned=True), session) == float("inf")


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    pairs=st.lists(
        st.tuples(st.integers(1, 120), st.integers(1, 120), st.booleans()), min_size=1, max_size=10
    ),
    budget=st.integers(300, 4000),
    recent=st.integers(1, 3),
    hard=st.booleans(),
)
@example(pairs=[(15, 2, True)], budget=300, recent=1, hard=False)  # found by hypothesis
def test_eviction_properties(make_coder, pairs, budget, recent, hard):
    coder = make_coder("ask")
    session = coder.gardener
    session.config = dataclasses.replace(session.config, budget=budget, recent_turns=recent)
    session.reset_view()
    msgs = []
    for n, (user_lines, reply_lines, is_output) in enumerate(pairs):
        if is_output:
            user = f"I ran this command:\n\nstep{n}\n\nAnd got this output:\n\n" + _log(
                f"s{n}", user_lines
            )
        else:
            user = f"prompt {n}: " + "please check the frobnicator " * user_lines
        msgs += [
            dict(role="user", content=user),
            dict(role="assistant", content=_log(f"r{n}", reply_lines)),
        ]
    half = len(msgs) // 2 // 2 * 2
    coder.done_messages, coder.cur_messages = msgs[:half], msgs[half:] + [
        dict(role="user", content="final question?")
    ]
    snapshot = [dict(m) for m in msgs]
    sync(session, coder)
    before = history_tokens(session, coder)
    report = evict(session, coder, before // 2 if hard else None)
    after = history_tokens(session, coder)
    assert after <= before and report.after == after
    history = coder.done_messages + coder.cur_messages
    assert sanity_check_messages(history)  # alternates and ends with the user
    assert history[-1]["content"] == "final question?"
    assert all(m == s for m, s in zip(msgs, snapshot))  # no shared dict was mutated
    target = before // 2 if hard else budget
    if after > target:  # only what eviction may not touch, or cannot shrink, is left

        def is_protected(meta):
            return meta.turn == session.turn if hard else session.turn - meta.turn < recent

        for pos, m in enumerate(history):
            meta = session.meta(m)
            if meta is None or meta.state == "ref" or meta.kind == "filler":
                continue
            if is_protected(meta) or m is history[-1]:
                continue
            # A short reply whose one-line reference would be longer, answering an output that
            # belongs to a protected turn (outputs age with the request that follows them), can
            # neither shrink nor be dropped without its partner.
            partner = session.meta(history[pos - 1]) if pos else None
            unshrinkable = count_tokens(reference_text(meta), model_name(coder)) >= meta.tokens_now
            assert unshrinkable and partner is not None and is_protected(partner), (
                meta.kind,
                meta.state,
                meta.turn,
                session.turn,
            )


def test_default_budget_is_aiders_own_history_budget(make_coder, llm):
    """No --gardener-budget: history gets what Aider's summarizer would have allowed (1/16 of
    gpt-4o's 128k window), and --max-chat-history-tokens moves it."""
    from aider.models import Model

    coder = make_coder("ask", state_tokens=0)
    session = coder.gardener
    assert Model("gpt-4o").max_chat_history_tokens == 128_000 / 16
    assert session.budget(coder) == 8000
    coder.summarizer.max_tokens = 3000  # what aider --max-chat-history-tokens 3000 sets
    assert session.budget(coder) == 3000
    coder.summarizer.max_tokens = 100  # never below the gardener's floor
    assert session.budget(coder) == 2048
    explicit = make_coder("ask", state_tokens=0, budget=5000)
    explicit.summarizer.max_tokens = 3000
    assert explicit.gardener.budget(explicit) == 5000
