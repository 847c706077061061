"""GardenCommands: clone keeps the session across coder switches; the gardener's chat commands."""

from __future__ import annotations

import pytest
from aider.commands import SwitchCoder

from aider_gardener.integration.commands import GardenCommands
from aider_gardener.integration.keeper import STATE_HEADER
from aider_gardener.store.recall import recall
from tests.integration.helpers import text_of

BIG_LOG = "".join(f"INFO worker {i % 7} processed batch {i} in {i % 13} ms\n" for i in range(3000))
OLD_BODY = "".join(f"    value_{i} = int(x) + {i}\n" for i in range(20)) + "    return int(x)\n"
NEW_BODY = (
    "".join(f"    value_{i} = int(x.strip()) + {i}\n" for i in range(20)) + "    return int(x)\n"
)
EDIT = (
    "I will strip whitespace.\n\napp.py\n```python\n<<<<<<< SEARCH\n"
    + OLD_BODY
    + "=======\n"
    + NEW_BODY
    + ">>>>>>> REPLACE\n```\n"
)


def _switch(coder, exc):
    from aider.coders import Coder

    kwargs = dict(io=coder.io, from_coder=coder)
    kwargs.update(exc.kwargs)
    kwargs.pop("show_announcements", None)
    return Coder.create(**kwargs)


@pytest.fixture
def created(monkeypatch):
    """Every coder Coder.create makes during the test, in order."""
    from aider.coders.base_coder import Coder

    made = []
    real = Coder.create.__func__

    def spy(cls, *args, **kwargs):
        coder = real(cls, *args, **kwargs)
        made.append(coder)
        return coder

    monkeypatch.setattr(Coder, "create", classmethod(spy))
    return made


def test_clone_keeps_class_and_session(make_coder):
    coder = make_coder()
    clone = coder.commands.clone()
    assert type(clone) is GardenCommands
    assert clone.gardener is coder.commands.gardener
    assert clone is not coder.commands and clone.coder is None
    for attr in ("voice_language", "verify_ssl", "args", "parser", "verbose", "editor"):
        assert getattr(clone, attr) == getattr(coder.commands, attr)


def test_chat_mode_switch_keeps_gardener_state(make_coder, llm):
    coder = make_coder("diff")
    llm.replies = ["The parse function converts its argument with int()."]
    coder.run(with_message="what does parse in app.py do?")
    session = coder.gardener
    assert session.turn == 1 and session.table
    with pytest.raises(SwitchCoder) as exc:
        coder.commands.cmd_chat_mode("ask")
    new = _switch(coder, exc.value)
    assert type(new).__name__ == "GardenedAskCoder"
    assert new.gardener is session
    assert isinstance(new.commands, GardenCommands) and new.commands.coder is new
    # same message dicts, still known to the side table
    assert new.cur_messages is coder.cur_messages
    assert all(session.meta(m) is not None for m in new.cur_messages)
    new.run(with_message="and what if x is not a number?")
    assert session.turn == 2
    # and back to code mode: still the same session
    with pytest.raises(SwitchCoder) as exc:
        new.commands.cmd_chat_mode("code")
    back = _switch(new, exc.value)
    assert back.gardener is session and back.edit_format == "diff"


def test_format_switch_uses_no_llm_and_keeps_alternation(make_coder, llm, repo):
    (repo / "app.py").write_text("def parse(x):\n" + OLD_BODY)
    coder = make_coder("diff", fnames=["app.py"])
    llm.replies = [EDIT, "Strip whitespace in parse"]  # the reply, then the commit message
    coder.run(with_message="strip whitespace in parse")
    assert "x.strip()" in (repo / "app.py").read_text()
    assert coder.done_messages, "the edit moved the exchange to done_messages"
    calls = len(llm.requests)
    with pytest.raises(SwitchCoder) as exc:
        coder.commands.cmd_chat_mode("whole")  # a real format change: Aider would summarize
    new = _switch(coder, exc.value)
    assert len(llm.requests) == calls  # no summarization request
    roles = [m["role"] for m in new.done_messages]
    assert roles == [m["role"] for m in coder.done_messages]
    assert "<<<<<<< SEARCH" not in text_of(new.done_messages)  # old-format edit summarized
    assert "app.py" in text_of(new.done_messages)
    llm.replies = ["Nothing else to change."]
    new.run(with_message="anything else?")  # AIDER_SANITY_CHECK_TURNS=1 checks alternation


def test_ask_command_keeps_state(make_coder, llm):
    coder = make_coder()
    llm.replies = ["It parses integers."]
    with pytest.raises(SwitchCoder) as exc:
        coder.commands.cmd_ask("what does app.py do?")
    assert coder.gardener.turn == 1
    new = _switch(exc.value.kwargs["from_coder"], exc.value)
    assert new.gardener is coder.gardener and new.edit_format == coder.edit_format


def test_architect_editor_is_passive(make_coder, llm, created, repo):
    (repo / "app.py").write_text("def parse(x):\n" + OLD_BODY)
    coder = make_coder("architect", fnames=["app.py"])
    plan = "Change parse in app.py to strip whitespace before int()."
    llm.replies = [plan, EDIT]
    coder.run(with_message="make parse tolerate spaces")
    editors = [c for c in created if c is not coder]
    assert editors, "the architect created its editor"
    assert all(e.gardener is None for e in editors)
    assert coder.gardener is not None
    assert "x.strip()" in (repo / "app.py").read_text()


def test_lint_clone_is_passive(make_coder, llm, created, repo):
    (repo / "bad.py").write_text("def f(:\n    pass\n")
    coder = make_coder(fnames=["bad.py"])
    llm.replies = ["I cannot fix that."]
    coder.commands.cmd_lint("")
    lint_coders = [c for c in created if c is not coder]
    assert lint_coders and all(c.gardener is None for c in lint_coders)


def test_run_large_output_enters_compressed(make_coder, llm, repo, capsys):
    (repo / "big.log").write_text(BIG_LOG)
    coder = make_coder(max_output=500)
    coder.commands.cmd_run("cat big.log")
    user = coder.cur_messages[-2]
    assert user["role"] == "user" and coder.cur_messages[-1]["content"] == "Ok."
    assert "cat big.log" in user["content"]
    assert len(user["content"]) < len(BIG_LOG) / 10
    assert "[full output stored: id=" in user["content"]
    meta = coder.gardener.meta(user)
    assert meta.state == "summary" and BIG_LOG in meta.original
    assert "output compressed from" in capsys.readouterr().out
    llm.replies = ["Looks like a healthy worker log."]
    coder.run(with_message="anything wrong in that log?")
    sent = text_of(llm.last)
    assert "processed batch 1234 " not in sent and "cat big.log" in sent


def test_small_run_output_is_left_alone(make_coder, repo):
    coder = make_coder()
    coder.commands.cmd_run("echo hello-gardener")
    assert "hello-gardener" in coder.cur_messages[-2]["content"]
    assert coder.gardener.meta(coder.cur_messages[-2]).state == "full"


def test_test_output_is_sent_once(make_coder, llm, repo):
    script = repo / "fail.sh"
    script.write_text("echo 'FAILED tests/test_app.py::test_parse - ValueError: bad'\nexit 1\n")
    coder = make_coder()
    llm.replies = ["The test fails because parse gets a bad value."]
    coder.run(with_message="/test sh fail.sh")
    assert len(llm.requests) == 1
    # the output is sent once as a message (the session-state block names the open error too)
    sent = text_of([m for m in llm.last if not m["content"].startswith(STATE_HEADER)])
    assert sent.count("FAILED tests/test_app.py::test_parse - ValueError: bad") == 1
    roles = [m["role"] for m in coder.cur_messages]
    assert roles == ["user", "assistant"]


def test_recall_forget_pin_and_clear(make_coder, llm, repo, capsys):
    (repo / "big.log").write_text(BIG_LOG + "ERROR frobnicate failed: ZebraTimeout after 30s\n")
    coder = make_coder(max_output=500)
    coder.commands.cmd_run("cat big.log")
    meta = coder.gardener.meta(coder.cur_messages[-2])
    capsys.readouterr()

    coder.commands.cmd_recall("ZebraTimeout")
    out = capsys.readouterr().out
    assert meta.entry_id in out

    coder.commands.cmd_recall(f"{meta.entry_id} --add")
    assert f"Added id={meta.entry_id} (" in capsys.readouterr().out
    assert coder.cur_messages[-2]["content"].count("processed batch 2999") == 1

    coder.commands.cmd_pin(meta.entry_id)
    assert "Pinned" in capsys.readouterr().out
    assert meta.pinned and meta.state == "full"
    assert BIG_LOG in meta.msg["content"]

    store = coder.gardener.store
    coder.commands.cmd_forget(meta.entry_id)
    assert "Forgot" in capsys.readouterr().out
    assert meta.entry_id not in [h.entry_id for h in recall(store, "ZebraTimeout")]
    assert store.restore(meta.entry_id)

    coder.commands.cmd_clear("")
    assert coder.cur_messages == [] and coder.gardener.table == {}
    assert meta.entry_id in [h.entry_id for h in recall(store, "ZebraTimeout")]


def test_bad_ids_are_one_clear_error(make_coder, capsys):
    coder = make_coder()
    coder.commands.cmd_forget("not an id")
    coder.commands.cmd_pin("")
    coder.commands.cmd_recall("")
    err = capsys.readouterr()
    text = err.out + err.err
    assert "No stored entry not." in text and "Usage: /forget" not in text
    assert "Usage: /pin" in text and "Usage: /recall" in text


def test_context_pressure_report(make_coder, llm, repo, capsys):
    (repo / "big.log").write_text(BIG_LOG)
    coder = make_coder(max_output=500, fnames=["app.py"])
    coder.commands.cmd_run("cat big.log")
    capsys.readouterr()
    coder.commands.run("/context-pressure")
    out = capsys.readouterr().out
    for part in ("window 128,000", "system prompt", "chat files", "chat history", "total prompt"):
        assert part in out
    assert "(summary)" in out  # the throttled log is listed by class and state
    assert "Recommendation:" in out and "entries" in out


def test_web_page_enters_compressed(make_coder):
    class Scraper:
        def scrape(self, url):
            return "".join(f"GET /api/items/{i} 200 OK in {i % 9} ms\n" for i in range(2000))

    coder = make_coder(max_output=400)
    coder.commands.scraper = Scraper()
    coder.commands.cmd_web("https://example.com/log")
    user = coder.cur_messages[-2]
    assert user["content"].startswith("Here is the content of https://example.com/log")
    meta = coder.gardener.meta(user)
    assert meta.kind == "tool" and meta.state == "summary"
    assert "[full output stored: id=" in user["content"]
