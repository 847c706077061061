"""Issue 13 as a user meets it, in a pseudo-terminal against the stub model (terminal.py):
``/recall`` previews and ``--add`` within the window, ``/show`` through the pager, ``/forget``
that sticks and ``/restore``, and "No stored entry" for bad ids."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

pexpect = pytest.importorskip("pexpect")

from aider_gardener.integration.ingest import RECALL_HEADER  # noqa: E402

from .terminal import SCRIPT  # noqa: E402
from .terminal import stub_reply  # noqa: E402
from .terminal import spawn as _spawn  # noqa: E402

pytestmark = pytest.mark.slow

COMPRESSED = r"output compressed from ([\d,]+) to ([\d,]+) tokens \(full text: /show (\w+)\)"


def _entries(repo, where: str = "1") -> list:
    with sqlite3.connect(repo / ".aider.gardener" / "store.sqlite") as conn:
        return conn.execute(
            f"SELECT id, active, deleted_reason FROM entries WHERE {where}"
        ).fetchall()


def _prompt(child) -> None:
    child.expect("\n> ")


def _script(repo) -> str:
    """terminal.py's import script, pausing before it exits: Aider reads /run output through
    pexpect's ``interact``, which can lose the tail of a fast command's output."""
    (repo / "slow_import.sh").write_text(SCRIPT + "sleep 1\n")
    return "/run sh slow_import.sh"


def _start(workspace, *extra: str):
    """The CLI with the import log run once: (child, the log's entry id, the /run line)."""
    run = _script(workspace[0])
    child = _spawn(workspace, "--gardener-max-output", "300", *extra)
    child.expect("> ")
    child.sendline(run)
    child.expect(COMPRESSED)
    log_id = child.match.group(3)
    _prompt(child)
    return child, log_id, run


def _recall_listed(child, query: str) -> str:
    """``/recall QUERY``, and what it listed after the query's echo."""
    child.sendline(f"/recall {query}")
    child.expect(r"/recall ID --add puts an original in the chat")
    return child.before.split(query, 1)[-1]


def _exit(child) -> None:
    child.sendline("/exit")
    child.expect(pexpect.EOF)


def test_recall_previews_the_lines_that_matched(workspace):
    """Point 6: a hit shows its id, class, token cost, origin and the numbered lines that
    matched, even far from the head of the summary."""
    child, log_id, _run = _start(workspace)
    try:
        child.sendline("/recall 1234")
        child.expect(rf"{log_id}  log\s+([\d,]+) tokens  `sh slow_import.sh`")
        assert int(child.match.group(1).replace(",", "")) > 10_000
        child.expect("1237: INFO imported row 1234 of batch 7")
        child.expect(r"/recall ID --add puts an original in the chat; /show ID prints it whole\.")
        _prompt(child)
        child.sendline("/recall ZebraTimeout frobnicate")
        child.expect(r"2: ERROR ZebraTimeout in app/frobnicate.py:42 after 30s")
        assert "imported row" not in child.before.split("ZebraTimeout frobnicate", 1)[1]
        _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)


def test_recall_add_reports_cost_keeps_the_text_and_never_stores_it_again(workspace):
    """Point 1: --add says what it added and what it cost, the text stays in the chat, and it
    is not ingested as a new entry when the next request is sent."""
    repo = workspace[0]
    child, log_id, _run = _start(workspace)
    try:
        child.sendline(f"/recall {log_id} --add")
        child.expect(rf"Added id={log_id} \(([\d,]+) tokens\) to the chat\.")
        assert int(child.match.group(1).replace(",", "")) > 10_000
        child.expect(r"Kept verbatim for the next 3 turns; ([\d,]+) tokens left")
        _prompt(child)
        child.sendline("why did the import stop?")
        child.expect("Stub model reply")
        _prompt(child)
        child.sendline("/recall ZebraTimeout --add")  # the top hit: already there, verbatim
        child.expect(f"id={log_id} is already in the chat in full.")
        _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)
    assert _entries(repo, f"original LIKE '{RECALL_HEADER}%'") == []
    assert _entries(repo, "cls = 'prompt'") and len(_entries(repo)) == 2  # log + question


def test_forget_sticks_hides_copies_and_restore_brings_them_back(workspace):
    """Point 2: /forget hides the entry and a stored copy of it (a bigger output that holds
    the whole log), a re-run does not bring it back, /recall ID and /show ID say it is
    forgotten, /forget --undo restores both; bad ids are "No stored entry X."."""
    repo = workspace[0]
    (repo / "wrapped.sh").write_text("sh slow_import.sh\necho 'import wrapper done'\nsleep 1\n")
    child, log_id, run = _start(workspace)
    try:
        child.sendline("/run sh wrapped.sh")
        child.expect(COMPRESSED)
        copy_id = child.match.group(3)
        assert copy_id != log_id
        _prompt(child)

        child.sendline(f"/forget {log_id}")
        child.expect(f"Forgot id={log_id} and 1 copy of it")
        _prompt(child)
        child.sendline("/recall ZebraTimeout")
        child.expect(r"No close match for 'ZebraTimeout' in this session's store\.")
        _prompt(child)
        child.sendline(run)  # the same output again
        child.expect(COMPRESSED)
        _prompt(child)
        for cmd in ("/recall", "/show"):
            child.sendline(f"{cmd} {log_id}")
            child.expect(f"id={log_id} is forgotten; /restore {log_id} brings it back.")
            _prompt(child)
        child.sendline(f"/recall {copy_id}")
        child.expect(f"id={copy_id} is forgotten \\(a copy of {log_id}\\)")
        _prompt(child)

        child.sendline(f"/forget --undo {log_id}")
        child.expect(f"Restored id={log_id} and 1 copy of it; recall shows them again.")
        _prompt(child)
        child.sendline("/recall ZebraTimeout")
        _prompt(child)
        assert log_id in child.before and copy_id in child.before

        for line in ("/pin nonexistent", "/forget zzzzzzzzzz", "/restore nonexistent"):
            child.sendline(line)
            child.expect(r"No stored entry (\w+)\.")
            assert child.match.group(1) == line.split()[1]
            assert "Usage" not in child.before
            _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)
    assert {(log_id, 1, None), (copy_id, 1, None)} <= set(_entries(repo))


def test_show_pages_a_long_original(workspace, monkeypatch):
    """Point 6: /show ID prints the stored original through $PAGER on a terminal."""
    monkeypatch.setenv("PAGER", "cat")  # a pager that needs no keys: the whole original
    child, log_id, _run = _start(workspace)
    try:
        child.sendline(f"/show {log_id}")
        child.expect(rf"id={log_id}  log  [\d,]+ tokens, [\d,]+ lines")
        child.expect("INFO imported row 1499 of batch 7")
        child.expect(rf"\(paged with cat; /show {log_id} --all prints it here\)")
        _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)


def test_recall_add_is_refused_when_the_window_has_no_room(workspace, tmp_path):
    """The 15k-token log does not fit a 12k window: nothing is added and the command says
    why; a small entry still goes in."""
    meta = tmp_path / "metadata.json"
    meta.write_text(
        json.dumps(
            {
                "gpt-4o": {
                    "max_input_tokens": 12000,
                    "max_output_tokens": 4096,
                    "max_tokens": 4096,
                    "input_cost_per_token": 2.5e-06,
                    "output_cost_per_token": 1e-05,
                    "litellm_provider": "openai",
                    "mode": "chat",
                }
            }
        )
    )
    run = _script(workspace[0])
    child = _spawn(workspace, "--gardener-max-output", "300", "--model-metadata-file", str(meta))
    try:
        child.expect("> ")
        child.sendline(run)
        child.expect(COMPRESSED)
        log_id = child.match.group(3)
        _prompt(child)
        child.sendline("/run echo 'deploy note: the WombatCache flag is on for staging'; sleep 1")
        child.expect("Added 1 line of output to the chat")
        _prompt(child)

        child.sendline(f"/recall {log_id} --add")
        child.expect(rf"Not added: id={log_id} \([\d,]+ tokens\) would not fit\.")
        child.expect(r"of the\s+12,000-token window")
        _prompt(child)
        child.sendline("/context-pressure")
        child.expect(r"([\d,]+)\s+remaining in the context window")
        assert int(child.match.group(1).replace(",", "")) > 8000  # the window was left alone
        _prompt(child)

        child.sendline("/clear")
        _prompt(child)
        child.sendline("/recall WombatCache --add")
        child.expect(r"Added id=(\w+) \((\d+) tokens\) to the chat\.")
        assert child.match.group(1) != log_id and int(child.match.group(2)) < 100
        _prompt(child)
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_show_without_a_pager_prints_the_head_and_where_the_rest_is(workspace, monkeypatch):
    repo = workspace[0]
    run = _script(repo)
    monkeypatch.setenv("PAGER", "no-such-pager-for-gardener")
    child = _spawn(workspace, "--gardener-max-output", "300")
    try:
        child.expect("> ")
        child.sendline(run)
        child.expect(COMPRESSED)
        log_id = child.match.group(3)
        _prompt(child)
        child.sendline(f"/recall {log_id} --full")
        child.expect(rf"id={log_id}  log  [\d,]+ tokens, ([\d,]+) lines")
        lines = int(child.match.group(1).replace(",", ""))
        child.expect(r"INFO imported row 37 of batch 7")
        child.expect(rf"… ([\d,]+) more lines not shown: /show {log_id} --all prints them")
        assert int(child.match.group(1).replace(",", "")) == lines - 40
        child.expect(r"the whole original is in\s+(\S+)\.\r?\n")
        shown = re.sub(r"\s", "", child.match.group(1))
        _prompt(child)
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    text = (repo / shown).read_text()
    assert len(text.rstrip("\n").splitlines()) == lines and "ZebraTimeout" in text


# --- issue 23, points 3 and 4 -----------------------------------------------------------------


def test_forget_takes_the_log_out_of_the_chat_and_says_so(workspace):
    """Point 3: the log's summary stayed in the chat after /forget and nothing said so."""
    child, log_id, _run = _start(workspace)
    try:
        child.sendline("why did the import stop?")
        child.expect("Stub model reply")
        _prompt(child)
        child.sendline("/tokens")
        child.expect(r"([\d,]+) chat history")
        before = int(child.match.group(1).replace(",", ""))
        _prompt(child)
        child.sendline(f"/forget {log_id}")
        child.expect(
            rf"Forgot id={log_id}: removed from the store and from the chat \(([\d,]+) tokens\)\."
        )
        removed = int(child.match.group(1).replace(",", ""))
        _prompt(child)
        child.sendline("/tokens")
        child.expect(r"([\d,]+) chat history")
        after = int(child.match.group(1).replace(",", ""))
        assert removed > 50 and before - after >= removed - 10, (before, after, removed)
        _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)


def test_recall_lists_close_matches_only_with_one_line_headers(workspace):
    """Point 4: a query sharing one word of three with the log listed it (with vectors, the
    nearest prompts); a miss says so in one line; a hit's header is one terminal line however
    long its command."""
    repo = workspace[0]
    flags = " ".join(f"--shard-{i}=eu-west-{i}" for i in range(40))
    (repo / "deploy.sh").write_text("echo 'WombatCache warmed on every shard'\nsleep 1\n")
    child, log_id, _run = _start(workspace)
    try:
        child.sendline("/recall checksum of nightly uploads")
        child.expect(r"No close match for 'checksum of nightly uploads' in this session's store\.")
        _prompt(child)
        assert log_id not in child.before
        child.sendline(f"/run sh deploy.sh {flags}")
        child.expect("WombatCache warmed")
        _prompt(child)
        child.sendline("/recall WombatCache")
        child.expect(r"\n(\w{10})  \w+ +[\d,]+ tokens  `sh deploy.sh --shard-0[^\r\n]*")
        header = child.match.group(0).strip()
        assert header.endswith("…") and len(header) < 200, header
        child.expect(r"\s+1: WombatCache warmed on every shard")
        _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)


def test_per_turn_recall_is_named_in_the_status_line(workspace):
    """Point 4: the status line said "1 recalled from the store" without naming it."""
    first = _spawn(workspace, "--gardener-max-output", "300")
    try:
        first.expect("> ")
        first.sendline(_script(workspace[0]))
        first.expect(COMPRESSED)
        log_id = first.match.group(3)
        _prompt(first)
        _exit(first)
    finally:
        first.close(force=True)
    child = _spawn(workspace)
    try:
        child.expect("> ")
        child.sendline("why did ZebraTimeout stop the import in frobnicate?")
        child.expect(rf"1 recalled from the store \({log_id} `sh slow_import.sh`\)")
        child.expect("Stub model reply")
        _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)


def test_forget_takes_its_open_error_out_of_the_session_state(workspace):
    """A forgotten failing output's open error stayed in /state, the next checkpoint and the
    facts table, so the next session could start with "1 open error" the user had removed."""
    repo = workspace[0]
    (repo / "fail.sh").write_text(
        'i=0; while [ $i -lt 400 ]; do echo "collecting zoo module $i"; i=$((i+1)); done\n'
        "echo 'FAILED tests/test_zoo.py::test_zebra_stripes - AssertionError: 7 != 8'\n"
        "sleep 1\nexit 1\n"
    )
    child = _spawn(workspace, "--gardener-max-output", "300")
    try:
        child.expect("> ")
        child.sendline("/run sh fail.sh")
        child.expect(COMPRESSED)
        fail_id = child.match.group(3)
        _prompt(child)
        child.sendline("/state")
        child.expect(r"test_zebra_stripes")
        _prompt(child)
        child.sendline(f"/forget {fail_id}")
        child.expect(r"The session state no longer lists the (\d+ facts|fact) only it showed\.")
        _prompt(child)
        child.sendline("/state")
        _prompt(child)
        assert "test_zebra_stripes" not in child.before, child.before
        child.sendline("/checkpoint")
        child.expect("Checkpoint")
        _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)
    with sqlite3.connect(repo / ".aider.gardener" / "store.sqlite") as conn:
        texts = [r[0] for r in conn.execute("SELECT text FROM facts")]
    assert not any("test_zebra_stripes" in t for t in texts), texts
    checkpoints = list((repo / ".aider.gardener" / "checkpoints").glob("*"))
    assert checkpoints and not any("test_zebra_stripes" in p.read_text() for p in checkpoints)


def test_a_chinese_question_recalls_the_message_it_shares_words_with(workspace):
    """FTS5 reads a CJK run as one token: "为什么部署老是失败" shares no whole run with the
    message, only the words 部署 and 失败 (store/query.py, ``cjk_pairs``)."""
    target = "部署脚本在服务器上一直失败，日志里说权限不够，帮我看看"
    child = _spawn(workspace)
    try:
        _prompt(child)
        for text in (target, "我们把登录页面的颜色改成蓝色吧"):
            child.sendline(text)
            child.expect("Stub model reply")
            _prompt(child)
        listed = _recall_listed(child, "为什么部署老是失败")
        first = re.search(r"^(\w+)  prompt", listed, re.M)
        (wanted,) = _entries(workspace[0], f"original = '{target}'")
        assert first and first.group(1) == wanted[0], listed
        _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)


def test_recall_shows_a_question_and_its_reply_as_one_hit(workspace):
    """store/exchanges.py as a user meets it: the question and the reply both match, and
    /recall lists them as one hit, the other part indented under it with its id."""
    repo, home, settings = workspace
    reply = "The package manager needs root.\\nRun the install again with sudo: sudo apt-get."
    stub_reply(settings, reply)
    child = _spawn(workspace)
    try:
        _prompt(child)
        for text in ("why did the lz4 package install fail?", "ok, thanks"):
            child.sendline(text)
            child.expect("Run the install again with sudo")
            _prompt(child)
        listed = _recall_listed(child, "lz4 package install needs root")
        top = re.search(
            r"^(\w{10})  prose .*\n(?:    .*\n)*  \+ asked: (\w{10})  prompt", listed, re.M
        )
        assert top, listed
        (asked,) = _entries(repo, "original = 'why did the lz4 package install fail?'")
        assert top.group(2) == asked[0] and top.group(1) != asked[0]
        assert listed.count(asked[0]) == 1  # not listed again as a hit of its own
        _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)


UPGRADE = (
    'i=0; while [ $i -lt 300 ]; do echo "INFO odoo.modules.loading: module $i loaded";'
    " i=$((i+1)); done\n"
    'echo "psycopg2.errors.CardinalityViolation: ON CONFLICT DO UPDATE command cannot affect'
    ' row a second time"\n'
    'i=0; while [ $i -lt 200 ]; do echo "INFO odoo.modules.registry: model $i ready";'
    " i=$((i+1)); done\n"
    "sleep 1\n"
)


def test_recall_puts_the_output_that_quotes_the_error_first(workspace):
    """store/phrases.py as a user meets it: the error is quoted from a 500-line upgrade log,
    and a short question and its reply share its words, apart. Full text alone ranks those
    short turns first; /recall shows the log first, at the quoted line."""
    repo, home, settings = workspace
    reply = "The conflict is a second update of the same row.\\nGive each row a unique id."
    stub_reply(settings, reply)
    (repo / "upgrade.sh").write_text(UPGRADE)
    child = _spawn(workspace, "--gardener-max-output", "300")
    try:
        _prompt(child)
        child.sendline("/run sh upgrade.sh")
        child.expect(COMPRESSED)
        log_id = child.match.group(3)
        _prompt(child)
        child.sendline("why does the update hit the same row a second time? what is the conflict?")
        child.expect("Give each row a unique id")
        _prompt(child)
        listed = _recall_listed(child, "ON CONFLICT DO UPDATE cannot affect row a second time")
        hits = re.findall(r"^(\w{10})  (\w+) ", listed, re.M)
        assert hits and hits[0] == (log_id, "log"), listed
        shown = rf"^{log_id}  log .*\r?\n\s+\d+: psycopg2.errors.CardinalityViolation: ON CONFLICT"
        assert re.search(shown, listed, re.M), listed
        _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)
