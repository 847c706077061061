"""Start -> first prompt of ``aider-gardener`` beside plain ``aider`` (goal: at most +0.3 s).

Each run starts the real command in a pseudo-terminal (80 columns) in a temp git repository
against the stub model (``tests/integration/terminal.py``'s workspace: temp HOME, litellm's
``mock_response``), times until the prompt shows, then leaves with ``/exit``. Cases run
alternately (A B C A B C ...), so load on the machine falls on all of them alike; medians and
ranges are printed, with each case's difference to the first. One warm-up round first (the first
start of a HOME also writes Aider's caches). Cases: ``aider``, ``gardener`` (the default: rag
mode, vectors on, as users run it), and with ``--baseline DIR`` the same ``aider-gardener`` from
another checkout (e.g. ``git worktree add ../before HEAD~1``), run with ``PYTHONPATH=DIR``::

    .venv/bin/python -m bench.start --runs 7 [--baseline DIR]

Results, with the load they were measured at: ``docs/benchmarks.md``; see also
docs/decisions/057-start-cost.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAGS = [
    "--yes-always",
    "--no-pretty",
    "--no-fancy-input",
    "--no-show-model-warnings",
    "--no-auto-commits",
]

OFFLINE = {
    "AIDER_CHECK_UPDATE": "false",
    "AIDER_ANALYTICS_DISABLE": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
}


def _workspace(tmp: Path):
    import litellm

    sys.path.insert(0, str(ROOT))
    from tests.integration.terminal import make_workspace

    src = Path(litellm.__file__).parent / "model_prices_and_context_window_backup.json"
    cache = tmp / "model_prices_and_context_window.json"
    shutil.copyfile(src, cache)
    return make_workspace(tmp, cache)


def start_once(exe: str, workspace, env_extra: dict[str, str], screen: list[str]) -> float:
    import pexpect

    repo, home, settings = workspace
    env = dict(os.environ, HOME=str(home), OPENAI_API_KEY="sk-test", TERM="dumb", COLUMNS="80")
    env.pop("AIDER_SANITY_CHECK_TURNS", None)
    env.update(OFFLINE)  # both alike: no update check or price-list download in the timing
    env.update(env_extra)
    args = ["--model", "gpt-4o", "--model-settings-file", str(settings), *FLAGS]
    t0 = time.perf_counter()
    child = pexpect.spawn(
        exe, args, cwd=str(repo), env=env, encoding="utf-8", timeout=300, dimensions=(50, 80)
    )
    child.expect("\n> ")
    took = time.perf_counter() - t0
    screen.append(child.before)
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=60)
    child.close()
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.start", description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", help="another checkout, run as 'before'")
    parser.add_argument("--show", action="store_true", help="print each case's last screen")
    args = parser.parse_args(argv)
    bindir = Path(sys.executable).parent
    cases = {"aider": (str(bindir / "aider"), {})}
    if args.baseline:
        cases["before"] = (str(bindir / "aider-gardener"), {"PYTHONPATH": args.baseline})
    cases["gardener"] = (str(bindir / "aider-gardener"), {})
    times: dict[str, list[float]] = {name: [] for name in cases}
    screens: dict[str, list[str]] = {name: [] for name in cases}
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        workspace = _workspace(Path(tmp))
        for name, (exe, env) in cases.items():  # warm-up: first-start caches, one-time export
            start_once(exe, workspace, env, [])
        for _ in range(args.runs):
            for name, (exe, env) in cases.items():
                times[name].append(start_once(exe, workspace, env, screens[name]))
    first = statistics.median(next(iter(times.values())))
    print(f"start -> first prompt, {args.runs} alternated runs, load {os.getloadavg()[0]:.1f}")
    print(f"{'case':<10} {'median':>7} {'min':>6} {'max':>6} {'vs aider':>9}")
    for name, values in times.items():
        med = statistics.median(values)
        print(
            f"{name:<10} {med:>6.2f}s {min(values):>5.2f}s {max(values):>5.2f}s"
            f" {med - first:>+8.2f}s"
        )
    if args.show:
        for name, shown in screens.items():
            print(f"\n--- {name} ---\n{shown[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
