"""Issue 23 point 2 as a user meets it: ``/run`` of a command that prints fast and exits at once
stores (and ``/show`` shows) its whole output, the traceback at the end included.

Aider's ``run_cmd_pexpect`` copies the command's terminal in ``pexpect``'s ``interact`` loop,
which stops as soon as the process is gone: whatever was still in the terminal's buffer (the
last lines, where the error is) was never read. It lost the end of an 8,000-line output in about
half of the runs in tmux, whose terminal reads slower than the command writes: the test reads
Aider's terminal the same way (a kilobyte at a time, with a pause), and one session runs the
command several times; any cut fails the test.
"""

from __future__ import annotations

import io
import re
import time

import pytest

pexpect = pytest.importorskip("pexpect")

from .terminal import spawn  # noqa: E402

pytestmark = pytest.mark.slow

FAST = (
    "import sys\n"
    "for i in range(8000):\n"
    "    print(f'INFO processed record {i} of 8000 in batch seven')\n"
    "sys.stdout.flush()\n"
    "raise RuntimeError('checksum mismatch in ledger 42')\n"
)
COMPRESSED = r"output compressed from ([\d,]+) to ([\d,]+) tokens \(full text: /show (\w+)\)"
ROUNDS = 4


def _read_slowly(child, pattern: str, pause: float = 0.004) -> re.Match:
    """Read the terminal as a slow one does until ``pattern`` and then the prompt have shown;
    the match of ``pattern``."""
    buf = ""
    while True:
        buf += child.read_nonblocking(1024, timeout=180)
        found = re.search(pattern, buf[-20000:])
        if found and "\n> " in buf[-20000:][found.end() :]:
            return found
        time.sleep(pause)


def test_fast_command_output_is_stored_to_its_last_line(workspace, monkeypatch):
    repo = workspace[0]
    (repo / "fast.py").write_text(FAST)
    monkeypatch.setenv("PAGER", "tail -n 4")  # /show pages a long original: its end, here
    child = spawn(workspace)
    screen = io.StringIO()
    child.logfile_read = screen
    cut = []
    try:
        child.expect("\n> ")
        for _ in range(ROUNDS):
            child.sendline("/run python3 fast.py")
            entry = _read_slowly(child, COMPRESSED).group(3)
            child.sendline(f"/show {entry}")
            child.expect(r"id=\w+  \w+  [\d,]+ tokens, ([\d,]+) lines")
            lines = int(child.match.group(1).replace(",", ""))
            child.expect(r"\(paged with tail")
            shown = child.before
            child.expect("\n> ")
            if "RuntimeError: checksum mismatch in ledger 42" not in shown or lines < 8004:
                cut.append((lines, shown[-300:]))
        child.sendline("/exit")
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close(force=True)
    assert not cut, f"{len(cut)} of {ROUNDS} runs stored a cut output: {cut}"
    assert not re.search(r"output capture .*cut", screen.getvalue())
