"""``/tokens``, ``/context-pressure`` and ``/evict`` in a live gardened coder (issue 13, point 3).

The reports must only measure, must count what the request carries (the session-state block and
the recalled context included) and must agree with it; the budget is shown as configured; every
recommendation names a command that exists. Requests are captured at ``litellm.completion``.
"""

from __future__ import annotations

import re

import pytest

from aider_gardener.integration.keeper import STATE_HEADER, keeper_of, tracker_of
from aider_gardener.integration.rag import HEADER as RECALL_HEADER
from aider_gardener.store import Store
from tests.integration.helpers import text_of

SCRIPT = (
    "echo 'starting nightly import'\n"
    "echo 'ERROR ZebraTimeout in app/frobnicate.py:42 after 30s'\n"
    'i=0; while [ $i -lt 1500 ]; do echo "INFO imported row $i of batch 7"; i=$((i+1)); done\n'
)


def _number(pattern: str, text: str) -> int:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in:\n{text}"
    return int(m.group(1).replace(",", ""))


def tokens_total(out: str) -> int:
    return _number(r"\$\s*[\d.]+\s+([\d,]+) tokens total", out)


def pressure_total(out: str) -> int:
    return _number(r"([\d,]+)\s+[\d.]+%\s+total prompt", out)


def row(out: str, label: str) -> int:
    return _number(r"\$\s*[\d.]+\s+([\d,]+) " + re.escape(label), out)


def _tokens_total(coder, capsys) -> int:
    capsys.readouterr()
    coder.commands.cmd_tokens("")
    return tokens_total(capsys.readouterr().out)


def flat(out: str) -> str:
    """The report with the terminal's line wrapping undone."""
    return " ".join(out.split())


def recommendation(out: str) -> str:
    """The recommendation is the report's last line (the terminal may wrap it)."""
    return " ".join(out.split("Recommendation: ", 1)[1].split())


def _pair_tokens(coder, request: list[dict], header: str) -> int:
    i = next(i for i, m in enumerate(request) if str(m.get("content", "")).startswith(header))
    count = coder.main_model.token_count
    return count(request[i : i + 2]) - count([])


@pytest.fixture
def script(repo):
    (repo / "import.sh").write_text(SCRIPT)
    return "sh import.sh"


@pytest.mark.parametrize("mode", ["rag", "incremental"])
def test_tokens_and_pressure_equal_the_request(make_coder, llm, script, capsys, mode):
    """At the same moment (inside the request), /tokens, /context-pressure and the messages
    passed to litellm.completion count the same, state block and recalled context included."""
    coder = make_coder(fnames=["app.py"], max_output=300, mode=mode, recent_turns=1)
    llm.replies = ["Noted."]
    coder.run(with_message="use orjson instead of json for the cache files")
    coder.run(with_message="keep parse returning int")
    coder.commands.cmd_run(script)
    coder.commands.cmd_clear("")  # the log leaves the chat; the store keeps it for recall
    seen = {}

    def reply(messages):
        capsys.readouterr()
        coder.commands.cmd_tokens("")
        seen["tokens"] = capsys.readouterr().out
        coder.commands.cmd_context_pressure("")
        seen["pressure"] = capsys.readouterr().out
        return "It timed out in frobnicate."

    llm.replies = [reply]
    coder.run(with_message="ZebraTimeout in the nightly import: what happened?")
    sent = llm.last
    assert sent[-1]["role"] == "system" or "ZebraTimeout" in sent[-1]["content"]
    text = text_of(sent)
    assert STATE_HEADER in text and "orjson" in text
    assert RECALL_HEADER in text and "ZebraTimeout" in text
    request = coder.main_model.token_count(sent)
    assert tokens_total(seen["tokens"]) == request
    assert pressure_total(seen["pressure"]) == request
    assert row(seen["tokens"], "session state") == _pair_tokens(coder, sent, STATE_HEADER)
    assert row(seen["tokens"], "recalled context") == _pair_tokens(coder, sent, RECALL_HEADER)
    # the rows add up to the total
    rows = re.findall(r"^\$\s*[\d.]+\s+([\d,]+) (?!tokens total)", seen["tokens"], re.M)
    assert sum(int(r.replace(",", "")) for r in rows) == request


def _snapshot(coder, tmp_path):
    session = coder.gardener
    store = session.store
    rows = store.read(
        lambda c: c.execute(
            "SELECT id, active, last_access, priority, seen, pinned FROM entries ORDER BY id"
        ).fetchall()
    )
    return dict(
        messages=[dict(m) for m in coder.done_messages + coder.cur_messages],
        states=sorted((m.entry_id or "", m.state) for m in session.table.values()),
        events=repr(session.events),
        stats=dict(session.stats),
        rag_ids=list(session.rag_ids),
        entries=rows,
        counters=store.counters(),
        checkpoints=sorted(p.name for p in tmp_path.rglob("checkpoints/*.md")),
        facts=tracker_of(session).book.version,
    )


def test_reports_change_nothing(make_coder, llm, script, capsys, tmp_path):
    """Over budget and past every warning level, the reports still only measure: no eviction,
    checkpoint, warning, store write or recall bookkeeping, and a second run reads the same."""
    coder = make_coder(fnames=["app.py"], max_output=100_000, budget=1500, warn_at=(1,))
    llm.replies = ["Noted."]
    coder.run(with_message="use orjson instead of json for the cache files")
    coder.commands.cmd_run(script)  # 12k tokens, uncompressed: far over the budget
    capsys.readouterr()
    before = _snapshot(coder, tmp_path)
    outs = []
    for _ in range(2):
        coder.commands.cmd_context_pressure("")
        coder.commands.cmd_tokens("")
        outs.append(capsys.readouterr())
    assert _snapshot(coder, tmp_path) == before
    assert outs[0].out == outs[1].out
    assert "checkpoint" not in outs[0].out + outs[0].err
    assert "gardener:" not in outs[0].out + outs[0].err  # no status line, no warning
    rec = recommendation(outs[0].out)
    assert "/evict" in rec and "over the gardener budget (1,500" in rec


def test_budget_is_shown_as_configured(make_coder, llm, capsys):
    coder = make_coder(fnames=["app.py"], budget=1500)
    llm.replies = ["Noted."]
    coder.run(with_message="use orjson instead of json for the cache files")
    state = keeper_of(coder.gardener).state_tokens(coder)
    assert state > 0
    capsys.readouterr()
    coder.commands.cmd_context_pressure("")
    out = flat(capsys.readouterr().out)
    assert "Gardener budget 1,500 tokens (--gardener-budget)" in out
    assert f"session state ({state:,})" in out
    assert f"history is evicted above {1500 - state:,}." in out
    assert coder.gardener.budget(coder) == 1500 - state


def test_history_is_one_number_on_the_screen(make_coder, llm, script, capsys):
    """Issue 23 point 6: the history row, the budget line and /evict's history were three
    counts (1,265 vs 1,153): eviction counted message text without the request's framing."""
    coder = make_coder(fnames=["app.py"], budget=1500, max_output=100_000)
    llm.replies = ["Noted."]
    coder.run(with_message="look at the import")
    coder.commands.cmd_run(script)
    capsys.readouterr()
    coder.commands.cmd_context_pressure("")
    out = flat(capsys.readouterr().out)
    history = _number(r"([\d,]+) +[\d.]+% +chat history", out)
    state = _number(r"([\d,]+) +[\d.]+% +session state", out)
    assert f"and the chat history ({history:,})" in out, out
    assert f"for the session state ({state:,})" in out, out
    assert f"history is evicted above {1500 - state:,}." in out
    coder.commands.cmd_evict("100")
    assert f"history {history:,} -> " in flat(capsys.readouterr().out)


def test_default_budget_is_aiders_history_size(make_coder, llm, capsys):
    coder = make_coder()
    capsys.readouterr()
    coder.commands.cmd_context_pressure("")
    out = capsys.readouterr().out
    expected = max(2048, int(coder.main_model.max_chat_history_tokens))
    assert f"Gardener budget {expected:,} tokens (Aider's chat history size)" in flat(out)


def test_evict_frees_what_was_asked_and_lists_it(make_coder, llm, script, capsys, tmp_path):
    coder = make_coder(fnames=["app.py"], max_output=100_000)
    llm.replies = ["Noted."]
    coder.run(with_message="look at the import")
    coder.commands.cmd_run(script)
    session = coder.gardener
    log = session.meta(coder.cur_messages[-2])
    assert log.state == "full" and log.tokens_full > 10_000
    capsys.readouterr()

    saved = list(tmp_path.rglob("checkpoints/*.md"))
    coder.commands.cmd_evict("")  # 12k is over the default 8k, but all of it is recent
    out = capsys.readouterr().out
    assert "Nothing could be evicted" in out and "/evict N" in out
    assert log.state == "full"
    assert list(tmp_path.rglob("checkpoints/*.md")) == saved and "checkpoint" not in out

    coder.commands.cmd_context_pressure("")
    forecast = flat(capsys.readouterr().out)
    first = re.search(
        r"First to go with /evict N, in this order: (\w+) (\w+) full -> summary", forecast
    )
    assert first and first.group(1) == log.entry_id, forecast
    tokens_before = _tokens_total(coder, capsys)
    coder.commands.cmd_evict("5,000")
    out = flat(capsys.readouterr().out)
    request = re.search(r"the next request ([\d,]+) -> ([\d,]+) tokens \(freed ([\d,]+)\)", out)
    was, now, freed = (int(g.replace(",", "")) for g in request.groups())
    assert was == tokens_before and now == _tokens_total(coder, capsys) and freed == was - now
    assert freed >= 5000
    before = _number(r"history ([\d,]+) ->", out)
    after = _number(r"history [\d,]+ -> ([\d,]+) tokens", out)
    assert before - after >= 5000
    assert re.search(rf"{log.entry_id}\s+log\s+full -> summary", out)
    assert log.state == "summary" and coder.cur_messages[-2] is log.msg
    assert "[full output stored: id=" in coder.cur_messages[-2]["content"]
    assert session.store.get(log.entry_id).original.count("INFO imported row") == 1500

    coder.commands.cmd_evict("")
    assert "within the gardener budget" in capsys.readouterr().out
    coder.commands.cmd_evict("lots")
    assert "Usage: /evict [TOKENS]" in capsys.readouterr().out + capsys.readouterr().err

    llm.replies = ["It timed out."]
    coder.run(with_message="what failed?")  # alternation still holds (sanity check on)
    assert text_of(llm.last).count("INFO imported row") < 20


def _commands_named(rec: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])/[a-z][\w-]*", rec))


def test_recommendations_name_real_commands(make_coder, llm, repo, monkeypatch, capsys):
    (repo / "big.py").write_text("".join(f"value_{i} = {i} * 2  # row {i}\n" for i in range(400)))
    coder = make_coder(fnames=["app.py", "big.py"], budget=1000, max_output=100_000)
    known = set(coder.commands.get_commands())
    assert "/evict" in known

    def rec() -> str:
        capsys.readouterr()
        coder.commands.cmd_context_pressure("")
        line = recommendation(capsys.readouterr().out)
        assert _commands_named(line) <= known, line
        assert "--gardener-budget" not in line and "lower" not in line
        return line

    assert rec().startswith("Healthy")
    monkeypatch.setitem(coder.main_model.info, "max_input_tokens", 6000)
    line = rec()
    assert line.startswith("High pressure") and "chat files" in line and "/drop big.py" in line

    coder.commands.cmd_drop("big.py")
    monkeypatch.setitem(coder.main_model.info, "max_input_tokens", 128_000)
    (repo / "log.sh").write_text(SCRIPT)
    coder.commands.cmd_run("sh log.sh")
    line = rec()
    assert "over the gardener budget" in line and "/evict" in line

    monkeypatch.setitem(coder.main_model.info, "max_input_tokens", 14_000)
    line = rec()
    assert line.startswith("High pressure") and "chat history" in line
    assert "/evict N" in line and "/soft-restart" in line


def test_store_section_counts_this_session(make_coder, llm, script, capsys, tmp_path):
    with Store(tmp_path / "store", vectors=False) as earlier:
        earlier.ingest("INFO from an earlier session\n" * 300, cls="log")
    coder = make_coder(max_output=300)
    coder.commands.cmd_run(script)
    capsys.readouterr()
    coder.commands.cmd_context_pressure("")
    out = flat(capsys.readouterr().out)
    assert "Store (this session): 1 entries" in out
    assert "the project's store holds 2 entries" in out
    assert "Semantic recall: off (full-text search only)." in out


def test_store_section_names_the_model_and_the_indexing_left(
    make_coder, llm, script, capsys, tmp_path
):
    coder = make_coder(max_output=300, vectors=True)
    coder.commands.cmd_run(script)
    store = coder.gardener.store
    before = store.pending_count()
    capsys.readouterr()
    coder.commands.cmd_context_pressure("")
    out = flat(capsys.readouterr().out)
    after = store.pending_count()  # the worker thread embeds meanwhile: a count in between
    assert "Semantic recall: all-MiniLM-L6-v2," in out
    waiting = re.search(r"([\d,]+) chunks waiting to be indexed", out)
    if waiting:
        assert after <= int(waiting.group(1).replace(",", "")) <= before, (before, after, out)
    else:
        assert "everything indexed" in out and after == 0, (before, after, out)
    store.drain(300)
    coder.commands.cmd_context_pressure("")
    assert "Semantic recall: all-MiniLM-L6-v2, everything indexed." in flat(capsys.readouterr().out)


def test_tokens_is_aiders_own_when_the_gardener_is_off(make_coder, capsys):
    coder = make_coder(mode="off")
    capsys.readouterr()
    coder.commands.cmd_tokens("")
    assert "Approximate context window usage" in capsys.readouterr().out
    coder.commands.cmd_evict("")
    assert "The gardener is off in this session" in capsys.readouterr().out


def test_the_status_line_counts_history_as_the_reports_do(make_coder, llm, script, capsys):
    """Issue 23 point 6, one number per thing: the line before a request counted message text
    only while /tokens, /context-pressure and eviction count each message with its framing."""
    from aider_gardener.integration.eviction import history_tokens
    from aider_gardener.integration.status import fmt_k

    coder = make_coder(fnames=["app.py"], max_output=300)
    llm.replies = ["Noted."]
    coder.run(with_message="look at the import")
    coder.commands.cmd_run(script)
    seen = {}

    def reply(messages):
        seen["history"] = history_tokens(coder.gardener, coder)
        return "Ok."

    llm.replies = [reply]
    capsys.readouterr()
    coder.run(with_message="what failed in the import?")
    status = _number_text(
        r"gardener: history ([\d.]+k?) tokens sent", flat(capsys.readouterr().out)
    )
    assert status == fmt_k(seen["history"])


def _number_text(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in:\n{text}"
    return m.group(1)
