"""Issue 13 points 5 and 7 as a user meets them: what ``aider-gardener`` says on the screen.

Each test drives the real CLI in a pseudo-terminal against the stub model (terminal.py) and
reads the lines the user reads: the start-up line, the status line, the "Add N tokens of
command output" question, the notes about background work, and the size of what a long
``/run`` output really puts in the chat.
"""

from __future__ import annotations

import io
import re
import time

import pytest

pexpect = pytest.importorskip("pexpect")

from .terminal import spawn as _spawn  # noqa: E402

pytestmark = pytest.mark.slow

# 1,500 log lines with 188 distinct errors: the log compressor keeps every error line, so its
# summary (~4k tokens) is far above the default --gardener-max-output of 1,024.
MIXED = (
    'i=0; while [ $i -lt 1500 ]; do echo "INFO imported row $i of batch 7";'
    ' if [ $((i % 8)) -eq 0 ]; then echo "ERROR row $i rejected: ValueError: bad amount'
    ' $((i*7919 % 1009)) in app/rows.py:$((i % 97 + 10))"; fi; i=$((i+1)); done\n'
)
# 300 distinct failing tests: nothing to compress (the summary is the output itself).
DISTINCT = (
    'i=0; while [ $i -lt 300 ]; do echo "tests/test_m$i.py::test_c$i FAILED - ValueError:'
    ' bad value $((i*7919 % 1009)) in app/m$i.py:$((i+10))"; i=$((i+1)); done\n'
)
COMPRESSED = (
    r"gardener: output compressed from ([\d,]+) to ([\d,]+) tokens \(full text: /show (\w+)\)"
)
STATUS = (
    r"gardener: history ([\d.]+k?) tokens sent \(([\d.]+k?) uncompressed\)"
    r"(?: \+ [\d.]+k? state/recalled)?; this request: ([^;\r\n]+)"
)


def _spawn_asking(workspace, *extra: str):
    """``terminal.spawn`` without ``--yes-always``: with it Aider answers its questions itself
    and never shows them, and the question is what is under test. The start-up questions are
    turned off instead."""
    import os

    from .terminal import _cli

    repo, home, settings = workspace
    env = dict(os.environ, HOME=str(home), OPENAI_API_KEY="sk-test", TERM="dumb", COLUMNS="200")
    env.pop("AIDER_SANITY_CHECK_TURNS", None)
    args = ["--model", "gpt-4o", "--model-settings-file", str(settings), "--no-gardener-vectors"]
    args += ["--no-gitignore", "--no-show-release-notes", "--no-pretty", "--no-fancy-input"]
    args += ["--no-show-model-warnings", "--no-auto-commits", "--no-check-update", *extra]
    cmd = _cli() + args
    return pexpect.spawn(
        cmd[0], cmd[1:], cwd=str(repo), env=env, encoding="utf-8", timeout=120, dimensions=(50, 200)
    )


def _n(text: str) -> int:
    text = text.replace(",", "")
    return int(float(text[:-1]) * 1000) if text.endswith("k") else int(text)


def _ask(child, text: str) -> None:
    child.sendline(text)
    child.expect("Stub model reply")
    child.expect("> ")


def test_start_up_line_question_and_status_line(workspace):
    """The start-up line names the mode, the store and its size; the /run question says the
    output enters compressed; the status line says sent vs uncompressed and what this request
    changed, with no arrow that reads as "shrank" (it read "888 → 2.4k history tokens")."""
    repo = workspace[0]
    child = _spawn_asking(
        workspace, "--gardener-max-output", "300", "--gardener-budget", "2048",
        "--gardener-recent-turns", "1",
    )  # fmt: skip
    try:
        child.expect(
            r"gardener: rag mode, history budget 2\.0k tokens, store new, full-text recall\r?\n"
        )
        assert "Warning" not in child.before  # e.g. requests' RequestsDependencyWarning
        child.expect("> ")
        _ask(child, "what does parse do?")

        child.sendline("/run sh import.sh")
        child.expect(
            r"Add [\d.]+k tokens of command output to the chat \(enters compressed to ≤300"
            r" tokens; full text stored\)\? \(Y\)es/\(N\)o \[Yes\]: "
        )
        child.sendline("y")
        child.expect(COMPRESSED)
        before, after = _n(child.match.group(1)), _n(child.match.group(2))
        assert after <= 300 < before
        child.expect("> ")

        statuses = []
        for question in ("why did the import fail?", "and the timeout?", "fix it then"):
            child.sendline(question)
            i = child.expect([STATUS, "Stub model reply"])
            if i == 0:
                statuses.append(child.match.groups())
                child.expect("Stub model reply")
            child.expect("> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        screen = child.before
    finally:
        child.close(force=True)
    assert statuses, "no status line in three requests after a compressed output"
    sent, uncompressed, changes = statuses[0]
    assert _n(sent) < 1000 and 5 * _n(sent) < _n(uncompressed), statuses  # the output, compressed
    assert "1 output compressed" in changes
    assert "→" not in screen and "history tokens" not in screen

    child = _spawn(workspace)  # a second session counts what the first one stored
    try:
        child.expect(r"store (\d+) entries, full-text recall")
        assert int(child.match.group(1)) >= 4  # 4 prompts, the output, replies
        child.expect("> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert (repo / ".aider.gardener" / "store.sqlite").exists()


@pytest.mark.parametrize("script", [MIXED, DISTINCT], ids=["summary-too-long", "incompressible"])
def test_run_output_enters_within_max_output(workspace, script):
    """With the default --gardener-max-output (1,024) a long /run output enters at most 1,024
    tokens, message text and handle line included: before, a summary the compressors made
    longer (1,645 tokens) entered whole, and output they could not shrink entered uncut."""
    repo = workspace[0]
    (repo / "long.sh").write_text(script)
    child = _spawn_asking(workspace)
    try:
        child.expect("> ")
        child.sendline("/run sh long.sh")
        child.expect(r"enters compressed to ≤1,024 tokens; full text stored\)\?")
        child.sendline("y")
        child.expect(COMPRESSED)
        before, after, entry_id = child.match.groups()
        child.expect("> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert _n(after) <= 1024 < _n(before)
    from aider_gardener.store.db import Store

    store = Store(repo / ".aider.gardener", vectors=False)
    try:  # what was cut from the chat is all in the store
        original = store.get(entry_id).original
    finally:
        store.close()
    assert "ERROR row 8 rejected" in original or "tests/test_m10.py::test_c10 FAILED" in original


def test_background_model_load_and_indexing_are_announced(workspace, monkeypatch):
    """With vectors on, the user is told when the embedding model loads and is ready, and that a
    big output is being indexed and when that is done; always between Aider's lines (each note
    is a line of its own, never inside the input prompt). The model starts loading at start
    (the start-up line says so); every chunk of the log is embedded here (by default only its
    head and tail are, too few to announce: store/worker.py's EMBED_POLICY)."""
    monkeypatch.setenv("GARDENER_EMBED_POLICY", "all")
    child = _spawn(workspace, "--gardener-vectors")
    screen = io.StringIO()
    child.logfile_read = screen
    ready = r"gardener: embedding model ready \([\w-]+, <?[\d.]+ s\)"
    done = r"gardener: background indexing done \(\d+ chunks in \d+ s\)"
    try:
        child.expect(r"semantic recall \(model loading\)")
        child.expect("> ")
        _ask(child, "what does parse do?")
        child.sendline("/run sh import.sh")
        child.expect(COMPRESSED)
        child.expect(r"gardener: indexing [\d.]+k tokens in the background \((\d+) chunks")
        assert int(child.match.group(1)) >= 40
        child.expect("> ")
        # each request is a foreground point where notes are printed; the model load and the
        # indexing take what the machine gives them: a bound on the wait, not a speed test
        deadline = time.monotonic() + 600
        while not (re.search(ready, screen.getvalue()) and re.search(done, screen.getvalue())):
            if time.monotonic() > deadline:
                break  # the assertions below say what is missing
            child.expect(pexpect.TIMEOUT, timeout=5)  # the worker embeds meanwhile
            _ask(child, "what now?")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    text = screen.getvalue()
    loading = text.find("semantic recall (model loading)")
    assert loading >= 0, text[-3000:]
    assert re.search(ready, text[loading:]) and re.search(done, text), text[-3000:]
    for line in re.findall(
        r"[^\n]*gardener: (?:loading|embedding model|background|indexing)[^\n]*", text
    ):
        # what is left on screen after carriage returns and backspaces (Aider's spinner probes
        # the terminal with a few characters and backspaces them away)
        shown = re.split(r"[\r\b]", line.rstrip("\r"))[-1]
        assert shown.strip().startswith("gardener:"), line  # a line of its own


def test_status_line_counts_state_and_recall_not_the_prompt_aider_extended(workspace):
    """ "+ N state/recalled" was the session state and Aider's system reminder, which Aider
    appends to the prompt itself with this model's settings (305 tokens where ``/state`` said
    98): one number per thing. Now it is the state block and its reply, what /state shows."""
    child = _spawn(workspace, "--gardener-max-output", "300")
    try:
        child.expect("> ")
        child.sendline("/run sh import.sh")
        child.expect(COMPRESSED)
        child.expect("> ")
        child.sendline("why did the import stop?")
        child.expect(r"state/recalled|this request")
        line = child.before + child.after
        child.expect("Stub model reply")
        child.expect("> ")
        extra = re.search(r"\+ ([\d.]+k?) state/recalled", line)
        child.sendline("/state")
        child.expect(r"\(([\d,]+) tokens, at most")
        state = int(child.match.group(1).replace(",", ""))
        child.expect("> ")
        assert extra is not None, line
        # /state is read after the reply, whose facts it may hold too: close, not equal
        assert abs(_n(extra.group(1)) - state) <= 40, (line, state)
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
