"""``/exit`` -> process end, and start -> first prompt, of the real CLI in a terminal (issue 15).

Goal: ``/exit`` <= 1 s with vectors on (it took 3-5 s, Aider alone 0.5 s). Each round starts
``aider-gardener`` against the stub model (terminal.py), runs a 1,500-line log through ``/run``
(so the embedder has work queued when the user leaves), then times ``/exit`` until the process
has ended. Cases, side by side in one run:

* ``off``: ``--gardener-mode off``, plain Aider;
* ``rag``: the default mode with vectors on, as users run it;
* ``rag-interpreter-exit``: the same with ``GARDENER_FAST_EXIT=0`` (the interpreter's own
  teardown instead of ``main.fast_exit``).

Run: ``.venv/bin/pytest tests/integration/bench_exit.py --benchmark-only -s`` (5 rounds each;
medians and p95 in the table, start-up times in extra_info and on stdout).
"""

from __future__ import annotations

import sqlite3
import time

import pytest

pexpect = pytest.importorskip("pexpect")

from .terminal import spawn  # noqa: E402

CASES = {
    "off": (["--gardener-mode", "off"], {}),
    "rag": (["--gardener-vectors"], {}),
    "rag-interpreter-exit": (["--gardener-vectors"], {"GARDENER_FAST_EXIT": "0"}),
}
ROUNDS = 5


@pytest.mark.parametrize("case", list(CASES))
def test_exit_time(benchmark, workspace, monkeypatch, case):
    args, env = CASES[case]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    starts: list[float] = []
    state: dict = {}

    def setup():
        t0 = time.perf_counter()
        child = spawn(workspace, *args)
        child.expect("\n> ")
        starts.append(time.perf_counter() - t0)
        child.sendline("/run sh import.sh")
        child.expect("\n> ", timeout=120)
        state["child"] = child
        return (child,), {}

    def leave(child):
        child.sendline("/exit")
        child.expect(pexpect.EOF, timeout=60)
        child.close()

    benchmark.pedantic(leave, setup=setup, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    starts.sort()
    benchmark.extra_info["start_to_prompt_median_s"] = round(starts[len(starts) // 2], 2)
    data = sorted(benchmark.stats.stats.data)
    print(
        f"\n{case}: /exit median {data[len(data) // 2]:.2f} s, max {data[-1]:.2f} s;"
        f" start to prompt median {starts[len(starts) // 2]:.2f} s"
    )


RECALL_CASES = {
    "rag": {},  # /recall reranks once the model is loaded (store/rerank.py)
    "rag-no-rerank": {"GARDENER_RERANK": "off"},
}


@pytest.mark.parametrize("case", list(RECALL_CASES))
def test_first_recall_time(benchmark, workspace, monkeypatch, case):
    """The first ``/recall`` of a session, sent as soon as the prompt shows (goal <= 1 s: the
    model preloads in the background, recall is full text until it is ready), after a ``/run``
    that stored a 1,500-line log; timed from the command to the next prompt."""
    for key, value in RECALL_CASES[case].items():
        monkeypatch.setenv(key, value)
    state: dict = {}

    def setup():
        if state.get("child") is not None:  # the previous round's session
            state["child"].close(force=True)
        child = spawn(workspace, "--gardener-vectors")
        child.expect("\n> ")
        child.sendline("/run sh import.sh")
        child.expect("\n> ", timeout=120)
        state["child"] = child
        return (child,), {}

    def recall(child):
        child.sendline("/recall ZebraTimeout frobnicate")
        child.expect("\n> ", timeout=60)

    _recall_rounds(benchmark, setup, recall, state, f"{case}: first /recall")


def _wait_indexed(repo, limit: float = 600) -> None:
    db = repo / ".aider.gardener" / "store.sqlite"
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as conn:
            if not conn.execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0]:
                return
        time.sleep(0.5)
    raise AssertionError("the store was not indexed in time")


@pytest.mark.parametrize("case", list(RECALL_CASES))
def test_first_recall_before_any_message_time(benchmark, workspace, case, monkeypatch):
    """A later session's first ``/recall``, typed before any message once the model has loaded
    (3 s after the prompt): the store opens for it and, the model being ready, the recall opens
    chromadb itself instead of answering by full text only (store/recall.py)."""
    for key, value in RECALL_CASES[case].items():
        monkeypatch.setenv(key, value)
    first = spawn(workspace, "--gardener-vectors")  # an earlier session stored the log
    first.expect("\n> ")
    first.sendline("/run sh import.sh")
    first.expect("\n> ", timeout=120)
    _wait_indexed(workspace[0])  # also what makes the model ready: its export, once per user
    first.sendline("/exit")
    first.expect(pexpect.EOF, timeout=60)
    first.close()
    state: dict = {}

    def setup():
        if state.get("child") is not None:
            state["child"].close(force=True)
        child = spawn(workspace, "--gardener-vectors")
        child.expect("\n> ")
        time.sleep(3)
        state["child"] = child
        return (child,), {}

    def recall(child):
        child.sendline("/recall ZebraTimeout frobnicate")
        child.expect("/recall ID --add puts an original", timeout=60)
        assert "full text only" not in child.before, child.before[-600:]
        child.expect("\n> ", timeout=60)

    _recall_rounds(benchmark, setup, recall, state, f"{case}: first /recall before any message")


def _recall_rounds(benchmark, setup, recall, state: dict, label: str) -> None:
    """ROUNDS timed recalls, each in the session ``setup`` started (kept in ``state`` so the
    last one is closed too); prints the median and the max."""
    try:
        benchmark.pedantic(recall, setup=setup, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    finally:
        child = state.get("child")
        if child is not None:
            child.close(force=True)
    data = sorted(benchmark.stats.stats.data)
    print(f"\n{label} median {data[len(data) // 2]:.2f} s, max {data[-1]:.2f} s")
