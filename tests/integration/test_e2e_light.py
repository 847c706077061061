"""Issue 15 as a user meets it: the embedding model loads in the background from the start, the
screen says so, and until it is ready ``/recall`` answers from full-text search at once; ``/exit``
does not wait for the model or the embedder.

The model's load is made to take ten minutes (``GARDENER_EMBED_LOAD_DELAY``, honoured only by
the load itself), so "before the model is ready" holds however fast or busy the machine is, and
an exit that waited for it would overrun the exit's generous bound by far.
"""

from __future__ import annotations

import io

import pytest

pexpect = pytest.importorskip("pexpect")

from .terminal import spawn  # noqa: E402

pytestmark = pytest.mark.slow

# Rich wraps the start-up line at the terminal's width: any whitespace may be a line break.
LOADING = r"semantic\s+recall\s+\(model\s+loading\)"
COMPRESSED = r"output compressed from ([\d,]+) to ([\d,]+) tokens \(full text: /show (\w+)\)"


def test_model_loads_from_the_start_and_recall_answers_from_full_text_meanwhile(
    workspace, monkeypatch
):
    monkeypatch.setenv("GARDENER_EMBED_LOAD_DELAY", "600")
    (workspace[0] / "slow_import.sh").write_text((workspace[0] / "import.sh").read_text())
    child = spawn(workspace, "--gardener-vectors", "--gardener-max-output", "300")
    screen = io.StringIO()
    child.logfile_read = screen
    try:
        child.expect(LOADING)  # in the start-up line, before the first prompt
        child.expect("\n> ")
        child.sendline("/run sh slow_import.sh")
        child.expect(COMPRESSED)
        log_id = child.match.group(3)
        child.expect("\n> ")
        child.sendline("/recall ZebraTimeout frobnicate")
        child.expect(rf"{log_id}  log")
        child.expect(r"ERROR ZebraTimeout in app/frobnicate.py:42 after 30s")
        child.expect("\n> ")
        assert "embedding model ready" not in screen.getvalue()  # it was answered without it
        assert "could not be loaded" not in screen.getvalue()
        child.sendline("/exit")
        child.expect(pexpect.EOF, timeout=120)  # the model still "loading" does not hold it up
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, screen.getvalue()[-2000:]


def test_without_vectors_nothing_is_loaded_or_announced(workspace):
    child = spawn(workspace)  # terminal.spawn passes --no-gardener-vectors
    screen = io.StringIO()
    child.logfile_read = screen
    try:
        child.expect(r"store new, full-text recall")
        child.expect("\n> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF, timeout=120)
    finally:
        child.close(force=True)
    assert "embedding model" not in screen.getvalue()
    assert child.exitstatus == 0
