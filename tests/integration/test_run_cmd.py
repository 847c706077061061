"""run_cmd.py: the terminal of a ``/run`` command is read to its end, and a cut is said."""

from __future__ import annotations

import os
import sys
import time

import pytest

pexpect = pytest.importorskip("pexpect")

from aider_gardener.integration import run_cmd  # noqa: E402


def _sink():
    read, write = os.pipe()
    os.set_blocking(read, False)
    return read, write


def test_drain_reads_what_interact_left_in_the_terminal():
    """The command has exited with its last 4 kB still in its terminal: all of it is kept."""
    code = "import sys; sys.stdout.write(''.join(f'line {i}\\n' for i in range(400)))"
    child = pexpect.spawn(sys.executable, ["-c", code])
    kept = bytearray()
    out_r, out_w = _sink()
    shown = bytearray()

    def keep(data):
        kept.extend(data)
        while True:  # empty the sink so writes never block
            try:
                shown.extend(os.read(out_r, 1 << 20))
            except BlockingIOError:
                break
        return data

    deadline = time.monotonic() + 120
    while child.isalive() and time.monotonic() < deadline:  # where Aider's interact loop stops
        time.sleep(0.05)
    assert run_cmd.drain(child.child_fd, out_w, keep) is True
    text = kept.decode()
    assert text.rstrip().endswith("line 399")
    assert text.count("\n") == 400
    child.close()


def test_drain_stops_and_says_so_when_a_left_process_keeps_writing():
    # no pause between lines: a writer that forks ``sleep`` can be silent for longer than
    # the drain's quiet time on a busy machine, which is the other way for drain to end
    child = pexpect.spawn("/bin/sh", ["-c", "while :; do echo tick; done"])
    child.expect("tick")
    out_r, out_w = _sink()

    def keep(data):
        try:
            os.read(out_r, 1 << 20)
        except BlockingIOError:
            pass
        return data

    t0 = time.monotonic()
    assert run_cmd.drain(child.child_fd, out_w, keep, limit=0.5) is False
    assert time.monotonic() - t0 < 15  # stopped by its limit: the writer never stops
    child.close(force=True)


def test_drain_returns_when_the_terminal_is_open_but_silent():
    """``sleep 30 &`` keeps the terminal open and writes nothing: no wait, no false alarm."""
    child = pexpect.spawn("/bin/sh", ["-c", "echo done; sleep 30"])
    child.expect("done")
    out_r, out_w = _sink()
    t0 = time.monotonic()
    assert run_cmd.drain(child.child_fd, out_w, lambda d: d, quiet=0.1) is True  # not its limit
    assert time.monotonic() - t0 < 15  # long before the terminal closes (30 s)
    child.close(force=True)


@pytest.fixture
def no_interact(monkeypatch):
    """``run_cmd`` as in a terminal, with the command's output left to the drain (``interact``
    needs a real terminal on stdin; the pexpect test in test_e2e_run_capture.py has one)."""
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(pexpect.spawn, "interact", lambda self, **kw: None)


def test_exit_status_and_output_come_back(no_interact, capfd):
    said = []
    status, output = run_cmd.run_cmd("echo hello; exit 3", error_print=said.append)
    assert status == 3 and output.startswith("hello") and said == []


def test_cut_is_said_in_one_line(no_interact, monkeypatch):
    monkeypatch.setattr(run_cmd, "drain", lambda *a, **k: False)
    said = []
    run_cmd.run_cmd("true", error_print=said.append)
    assert said == [run_cmd.CUT_NOTE] and "\n" not in said[0]
