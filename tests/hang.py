"""For inputs that used to hang: the call must finish within a bound thousands of times what it
needs now. A super-linear path (a backtracking regex, a quadratic loop) then fails the test in
seconds instead of running for hours; speed itself is measured in benchmarks, never here."""

from __future__ import annotations

import signal

HANG_SECONDS = 60


def finishes(fn, *args, seconds: int = HANG_SECONDS, **kwargs):
    """``fn(*args, **kwargs)``, or TimeoutError if it is still running after ``seconds``."""

    def stop(signum, frame):
        raise TimeoutError(f"{getattr(fn, '__name__', fn)} still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        return fn(*args, **kwargs)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
