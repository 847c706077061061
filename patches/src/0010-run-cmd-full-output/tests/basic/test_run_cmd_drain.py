import os
import sys
import time

import pexpect
import pytest

from aider import run_cmd


def _exited_before_read(self, output_filter=None, **kwargs):
    """interact() as it ends when the command exits before its output was read: it returns
    without reading what is still in the terminal."""
    deadline = time.monotonic() + 30
    while self.isalive() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.skipif(sys.platform == "win32", reason="pexpect needs a pty")
def test_run_cmd_pexpect_reads_output_left_after_exit(monkeypatch, capfd):
    monkeypatch.setattr(pexpect.spawn, "interact", _exited_before_read)
    monkeypatch.setenv("SHELL", "/bin/sh")
    command = "i=0; while [ $i -lt 300 ]; do echo line $i; i=$((i+1)); done; echo Traceback end"
    status, output = run_cmd.run_cmd_pexpect(command)
    assert status == 0
    lines = output.splitlines()
    assert "line 0" in lines[0]
    assert lines[-1].strip() == "Traceback end"
    assert "Traceback end" in capfd.readouterr().out


@pytest.mark.skipif(sys.platform == "win32", reason="pexpect needs a pty")
def test_drain_terminal_says_when_output_keeps_flowing():
    child = pexpect.spawn("/bin/sh", ["-c", "while :; do echo tick; sleep 0.01; done"])
    child.expect("tick")
    read, write = os.pipe()
    os.set_blocking(read, False)

    def keep(data):
        try:
            os.read(read, 1 << 20)
        except BlockingIOError:
            pass
        return data

    try:
        assert run_cmd.drain_terminal(child.child_fd, write, keep, limit=0.5) is False
    finally:
        child.close(force=True)
