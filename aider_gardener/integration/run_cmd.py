"""``/run`` and ``/test`` capture a command's whole output, to its last line.

Aider's ``run_cmd_pexpect`` copies the command's terminal with ``pexpect``'s ``interact``, whose
loop runs ``while child.isalive()``: once the command has exited the loop ends, and what was
still in the terminal's buffer (the last kilobytes: the traceback, the summary line) is neither
shown nor returned. A command that prints fast and exits at once lost its end in about half of
the runs, more when the user's terminal is slow to draw (tmux), and the gardener then stored
and compressed a cut output as "full text". Here the same command runs the same way (a shell
with ``-i -c`` in a pseudo-terminal, the user's keys forwarded), and after ``interact`` the
buffer is read to its end. The same fix is proposed upstream (patches/src/0010-*; decision 092).

A process the command left running (``cmd &``) keeps the terminal open, so the drain also stops
after a quiet moment (what such a process writes later is not the command's output) or, if it
keeps writing, at a deadline: that cut is said in one line, not stored silently.
"""

from __future__ import annotations

import errno
import os
import platform
import select
import sys
import time
from io import BytesIO

DRAIN_QUIET = 0.2  # seconds with nothing to read: the command's own output has all been read
DRAIN_LIMIT = 2.0  # seconds of drain at most: something left running may write forever
CUT_NOTE = (
    "gardener: output capture was cut: something the command started still writes to the"
    " terminal after it exited (only what came before is stored)"
)


def run_cmd(command, verbose=False, error_print=None, cwd=None):
    """``aider.run_cmd.run_cmd`` with the pexpect path draining the terminal to its end."""
    import pexpect
    from aider import run_cmd as aider_run_cmd

    try:
        if sys.stdin.isatty() and hasattr(pexpect, "spawn") and platform.system() != "Windows":
            return run_cmd_pexpect(command, verbose, cwd, error_print=error_print)
        return aider_run_cmd.run_cmd_subprocess(command, verbose, cwd)
    except OSError as e:
        error_message = f"Error occurred while running command '{command}': {str(e)}"
        if error_print is None:
            print(error_message)
        else:
            error_print(error_message)
        return 1, error_message


def run_cmd_pexpect(command, verbose=False, cwd=None, error_print=None):
    """Aider's ``run_cmd_pexpect`` plus ``drain`` after ``interact``."""
    import pexpect

    if verbose:
        print("Using run_cmd_pexpect:", command)
    output = BytesIO()

    def output_callback(b):
        output.write(b)
        return b

    try:
        shell = os.environ.get("SHELL", "/bin/sh")
        if verbose:
            print("With shell:", shell)
        if os.path.exists(shell):
            child = pexpect.spawn(shell, args=["-i", "-c", command], encoding="utf-8", cwd=cwd)
        else:
            child = pexpect.spawn(command, encoding="utf-8", cwd=cwd)
        child.interact(output_filter=output_callback)
        complete = drain(child.child_fd, child.STDOUT_FILENO, output_callback)
        child.close()
        if not complete:
            (error_print or print)(CUT_NOTE)
        return child.exitstatus, output.getvalue().decode("utf-8", errors="replace")
    except (pexpect.ExceptionPexpect, TypeError, ValueError) as e:
        return 1, f"Error running command {command}: {e}"


def drain(
    fd: int, out_fd: int, keep, quiet: float = DRAIN_QUIET, limit: float = DRAIN_LIMIT
) -> bool:
    """Copy what is left in the terminal ``fd`` to ``out_fd`` (through ``keep``) until its end
    or ``quiet`` seconds of silence: True then, False when output still flowed after ``limit``
    seconds (a process left running writes on)."""
    deadline = time.monotonic() + limit
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        wait = min(quiet, left)
        try:
            ready, _, _ = select.select([fd], [], [], wait)
        except InterruptedError:
            continue
        except (OSError, ValueError):  # closed already: nothing left to read
            return True
        if not ready:  # open but silent (a process left running that does not write), unless
            return wait >= quiet  # the deadline came first

        try:
            data = os.read(fd, 65536)
        except OSError as err:
            if err.errno == errno.EIO:  # Linux: the other side closed and the buffer is empty
                return True
            raise
        if not data:  # BSD-style end
            return True
        data = keep(data)
        while data:
            data = data[os.write(out_fd, data) :]
