"""Peak RSS of a real ``aider-gardener`` session with vectors on (goal: <= 500 MB).

Each run starts the real CLI in a pseudo-terminal against the stub model (the harness of
``tests/integration/terminal.py``) with ``--gardener-vectors`` and does what a user does: ``/run
cat`` of a large real log (so the embedder has work), two messages, a wait until the embedder has
drained the queue, ``/recall``; then it reads ``VmHWM`` and ``VmRSS`` from ``/proc/<pid>/status``,
and the peak until the process is gone after ``/exit``. The ONNX export is made once per case and
copied into every run, as every later session of a project finds it. Cases run alternately
(A B A B ...), so a busy machine affects them alike; each is a name and ``KEY=VALUE`` settings or
``--flag`` arguments for the CLI. Also reported: whether torch and friends were imported, the
backend's shared libraries mapped, wall time::

    .venv/bin/python -m bench.rss --runs 3 --case base --case novec:--no-gardener-vectors

Results: docs/decisions/052-session-peak-rss.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "tool_outputs_more"
DEFAULT_LOG = DATA / "clippy__google-zerocopy.txt"  # 7,654 lines, 318 kB
MESSAGES = (
    "What does parse do in app.py?",
    "Which clippy warnings did the last run report?",
)
RECALL = "/recall needless lifetimes warning"
HEAVY = ("torch", "transformers", "sentence_transformers")

SITECUSTOMIZE = """
import atexit, os, sys
_out = os.environ.get("GARDENER_BENCH_MODULES")
if _out:
    def _dump():
        try:
            with open(os.path.join(_out, "modules-%d.json" % os.getpid()), "w") as f:
                f.write(__import__("json").dumps(sorted(sys.modules)))
        except Exception:
            pass
    atexit.register(_dump)
_trim = float(os.environ.get("GARDENER_BENCH_TRIM", "0") or 0)
if _trim > 0:  # an experiment's ceiling: glibc's free memory handed back every _trim seconds
    import ctypes, threading, time
    def _trimmer():
        libc = ctypes.CDLL("libc.so.6")
        while True:
            time.sleep(_trim)
            libc.malloc_trim(0)
    threading.Thread(target=_trimmer, daemon=True).start()
"""


def status(pid: int) -> dict[str, int]:
    """VmHWM / VmRSS in kB (empty once the process is gone)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    out[key] = int(rest.split()[0])
    except OSError:
        pass
    return out


def cpu_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return -1


def pending(db: Path) -> int:
    """Chunks still waiting for the embedder (-1 before the store exists)."""
    if not db.is_file():
        return -1
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return -1


def wait_idle(pid: int, db: Path, timeout: float, quiet: float = 2.0, queue: bool = True) -> float:
    """Until the queue is empty (``queue``: vectors on) and the process has used no CPU for
    ``quiet`` seconds."""
    start = time.monotonic()
    last, still = cpu_ticks(pid), time.monotonic()
    while time.monotonic() - start < timeout:
        time.sleep(0.25)
        now = cpu_ticks(pid)
        if now != last:
            last, still = now, time.monotonic()
        elif time.monotonic() - still >= quiet and (not queue or pending(db) <= 0):
            break
    return time.monotonic() - start


def prompt(child, timeout: float = 300) -> None:
    child.expect("\n> ", timeout=timeout)


def mapped_libs(pid: int) -> list[str]:
    names = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1]
                if path.endswith(".so") or ".so." in path:
                    base = os.path.basename(path)
                    if any(k in base for k in ("torch", "onnxruntime", "chromadb", "hnswlib")):
                        names.add(base)
    except OSError:
        pass
    return sorted(names)


def session(workdir: Path, models: Path | None, log: Path, args: list[str], env: dict) -> dict:
    """One measured session in a fresh workspace under ``workdir``."""
    import pexpect

    from tests.integration.terminal import make_workspace, spawn

    spec = importlib.util.find_spec("litellm")  # its price list, without importing it (seconds)
    price = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
    cache = workdir / "model_prices_and_context_window.json"
    shutil.copyfile(price, cache)
    ws = make_workspace(workdir, cache)
    repo = ws[0]
    store = repo / ".aider.gardener"
    vectors = "--no-gardener-vectors" not in args
    if models is not None and models.is_dir():
        shutil.copytree(models, store / "models", ignore=shutil.ignore_patterns(".*"))
    env = {"GARDENER_MODEL_CACHE": "store", **env}  # the copy above, not the user's cache
    mods = workdir / "mods"
    mods.mkdir()
    site = workdir / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    saved = dict(os.environ)
    os.environ.update(env)
    os.environ["GARDENER_BENCH_MODULES"] = str(mods)
    path = os.environ.get("PYTHONPATH")  # a case may run another checkout (git archive)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), path]))
    t0 = time.monotonic()
    try:
        child = spawn(ws, "--gardener-vectors", *args)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    child.maxread = 65536
    pid = child.pid
    db = store / "store.sqlite"
    phases: dict[str, float] = {}

    def mark(name: str) -> None:
        phases[name] = status(pid).get("VmRSS", 0) / 1024

    try:
        prompt(child)
        wait_idle(pid, db, 120, quiet=1.0, queue=False)  # the model loads in the background
        mark("start")
        child.sendline(f"/run cat {log}")
        prompt(child, 600)
        mark("run")
        for msg in MESSAGES:
            child.sendline(msg)
            prompt(child)
        mark("msgs")
        drained = wait_idle(pid, db, 600, queue=vectors)
        mark("drained")
        child.sendline(RECALL)
        prompt(child)
        wait_idle(pid, db, 60, quiet=1.0, queue=vectors)
        mark("recall")
        before = status(pid)
        if os.environ.get("GARDENER_BENCH_SMAPS"):  # where the memory is, mapping by mapping
            shutil.copyfile(f"/proc/{pid}/smaps", os.environ["GARDENER_BENCH_SMAPS"])
        libs = mapped_libs(pid)
        left = pending(db)
        child.sendline("/exit")
        peak = before.get("VmHWM", 0)
        while child.isalive():
            peak = max(peak, status(pid).get("VmHWM", 0))
            try:
                child.expect(pexpect.EOF, timeout=0.05)
            except pexpect.TIMEOUT:
                pass
        child.close()
    finally:
        if child.isalive():
            child.terminate(force=True)
    wall = time.monotonic() - t0
    modules: list[str] = []
    dump = mods / f"modules-{pid}.json"
    if dump.is_file():
        modules = json.loads(dump.read_text())
    return {
        "hwm_mb": before.get("VmHWM", 0) / 1024,
        "rss_mb": before.get("VmRSS", 0) / 1024,
        "exit_hwm_mb": peak / 1024,
        "wall_s": wall,
        "drain_wait_s": drained,
        "phases_rss_mb": phases,
        "pending_left": left,
        "heavy": [m for m in HEAVY if m in modules] if modules else ["?"],
        "packages": sorted({m.split(".")[0] for m in modules if not m.startswith("_")}),
        "libs": libs,
        "models": (
            sorted(p.name for p in (store / "models").glob("*"))
            if (store / "models").is_dir()
            else []
        ),
    }


def parse_case(text: str) -> tuple[str, list[str], dict[str, str]]:
    name, _, rest = text.partition(":")
    args: list[str] = []
    env: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        if item.startswith("-"):
            args.append(item)
        else:
            key, _, value = item.partition("=")
            env[key] = value
    return name, args, env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.rss", description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="measured sessions per case (>= 3)")
    ap.add_argument(
        "--case",
        action="append",
        help="NAME[:KEY=VALUE,--flag,...] (repeatable; default: one case 'base')",
    )
    ap.add_argument("--log", type=Path, default=DEFAULT_LOG, help="the file /run cats")
    ap.add_argument("--json", type=Path, help="also write every run's numbers here")
    ap.add_argument("--keep", action="store_true", help="keep the temp folders")
    opts = ap.parse_args(argv)
    if not opts.log.is_file():
        print(f"{opts.log}: not found (shared data absent); nothing measured", file=sys.stderr)
        return 0
    cases = [parse_case(c) for c in (opts.case or ["base"])]
    sys.path.insert(0, str(ROOT))
    from aider_gardener import offline

    for key, value in offline.env().items():
        os.environ.setdefault(key, value)
    tmp = Path(tempfile.mkdtemp(prefix="bench-rss-"))
    results: dict[str, list[dict]] = {name: [] for name, _, _ in cases}
    try:
        # Per case, that checkout's model cache (the export, once, as the first session of a
        # project makes it in a child process), then one unmeasured session.
        caches: dict[str, Path] = {}
        for name, args, env in cases:
            caches[name] = tmp / f"models-{name}"
            code = (
                "import sys; from aider_gardener.store import embeddings as e;"
                " e._export_here(sys.argv[1])"
            )
            subprocess.run(
                [sys.executable, "-c", code, str(caches[name])],
                cwd=tmp,  # not this checkout: a case's PYTHONPATH must win
                env={**os.environ, **env},
                check=True,
            )
            warm = tmp / f"warm-{name}"
            warm.mkdir()
            r = session(warm, caches[name], opts.log, args, env)
            print(f"warm-up {name}: {r['hwm_mb']:.0f} MB, models {r['models']}", file=sys.stderr)
        for i in range(opts.runs):
            for name, args, env in cases:
                work = tmp / f"{name}-{i}"
                work.mkdir()
                r = session(work, caches[name], opts.log, args, env)
                results[name].append(r)
                print(
                    f"run {i + 1} {name}: VmHWM {r['hwm_mb']:.0f} MB, at exit"
                    f" {r['exit_hwm_mb']:.0f}, VmRSS {r['rss_mb']:.0f}, {r['wall_s']:.0f} s,"
                    f" pending {r['pending_left']}, heavy {r['heavy']}; VmRSS by phase"
                    f" {' '.join(f'{k} {v:.0f}' for k, v in r['phases_rss_mb'].items())}",
                    file=sys.stderr,
                )
                if not opts.keep:
                    shutil.rmtree(work, ignore_errors=True)
    finally:
        if not opts.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()
    print(f"\nlog: {opts.log.name}; runs per case: {opts.runs}; load avg {load[0]:.2f}")
    print(
        f"{'case':<14} {'VmHWM med':>9} {'min':>5} {'max':>5} {'exit':>5} {'VmRSS':>6}"
        f" {'wall s':>6}  heavy modules / libs"
    )
    for name, runs in results.items():
        hwm = sorted(r["hwm_mb"] for r in runs)
        print(
            f"{name:<14} {statistics.median(hwm):>9.0f} {hwm[0]:>5.0f} {hwm[-1]:>5.0f}"
            f" {statistics.median(r['exit_hwm_mb'] for r in runs):>5.0f}"
            f" {statistics.median(r['rss_mb'] for r in runs):>6.0f}"
            f" {statistics.median(r['wall_s'] for r in runs):>6.0f}"
            f"  {sorted({m for r in runs for m in r['heavy']}) or 'none'}"
            f" {runs[-1]['libs']}"
        )
    if opts.json:
        opts.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
