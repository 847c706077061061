"""What ``gardener-mcp`` costs a client at start, variants side by side.

Server: each run spawns the real server in a git repository holding one stored output and speaks
to it as Claude Code 2.1.332 does; it times spawn to each answer (``server/discover``,
``initialize``, ``tools/list``) and to the first tool result, and stdin's close to exit.
``--claude`` runs the real Claude Code CLI in ``-p`` mode against a scripted Messages API without
the plugin, with it and with its parts alone (MCP server; hooks warm and cold) beside two floors
(a server answering at once, hooks that only ``cat``): seconds to exit and to the first API
request, and each hook's time from the CLI's debug log. ``--codex`` does the same with ``codex
exec``; ``--baseline DIR`` adds another checkout, run with ``PYTHONPATH=DIR``. Runs alternate
between variants, so load falls on all alike; medians, with each variant's ratio to the first.

    python -m bench.mcp_start [--runs N] [--baseline DIR] [--claude] [--hooks-only] [--codex]

Method in full: docs/decisions/057-start-cost.md; results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
CLAUDE = ROOT / ".venv" / "claude-code" / "node_modules" / ".bin" / "claude"
CODEX = ROOT / ".venv" / "codex" / "node_modules" / ".bin" / "codex"
PLUGIN = ROOT / "aider_gardener" / "clients" / "claude_plugin"
DISCOVER = {
    "jsonrpc": "2.0",
    "id": "server-discover-probe-1",
    "method": "server/discover",
    "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


class Variant:
    """A checkout of the gardener: its code on ``PYTHONPATH``, and a bin folder whose
    ``gardener-mcp`` and ``gardener-hook`` run it with this interpreter."""

    def __init__(self, name: str, source: Path, bin_dir: Path) -> None:
        self.name, self.source, self.bin = name, source, bin_dir
        bin_dir.mkdir(parents=True, exist_ok=True)
        scripts = _scripts(source)
        for script in ("gardener-mcp", "gardener-hook"):
            module, _, func = scripts[script].partition(":")
            path = bin_dir / script
            path.write_text(
                "#!/bin/sh\n"
                f'PYTHONPATH="{source}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -c'
                f' "import sys; from {module} import {func}; sys.exit({func}())" "$@"\n'
            )
            path.chmod(0o755)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return dict(base, PATH=os.pathsep.join([str(self.bin), base.get("PATH", "")]))


def _scripts(source: Path) -> dict[str, str]:
    """The checkout's console scripts (``[project.scripts]``): each version's own entry points."""
    import tomllib

    with open(source / "pyproject.toml", "rb") as fh:
        return dict(tomllib.load(fh)["project"]["scripts"])


def _model_cache(chosen: str | None) -> Path | None:
    if chosen:
        return Path(chosen)
    from aider_gardener.store import embeddings

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = base / "aider-gardener" / "models"
    try:
        ready = embeddings._mapped_ready(folder / embeddings.mapped_filename())
    except Exception:  # noqa: BLE001 - no model installed: the servers run without vectors
        ready = False
    return folder if ready else None


def _base_env(home: Path, cache: Path | None) -> dict[str, str]:
    from aider_gardener import offline

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE", "MCP_", "OPENAI", "CODEX", "AIDER_GARDENER"))
    }
    env.update(offline.env(), HOME=str(home))
    env.pop("PYTHONPATH", None)
    # Compiled modules, as an installed package has them: with PYTHONDONTWRITEBYTECODE (set in
    # some dev shells) every hook recompiled claude_hooks.py, ~30 ms a process. Written aside,
    # not into the checkouts.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(home / "pycache")
    if cache is not None:
        env["GARDENER_MODEL_CACHE"] = str(cache)
    return env


def _repo(base: Path) -> Path:
    from aider_gardener.clients.project import open_project_store
    from aider_gardener.types import Source

    repo = base / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    store = open_project_store(repo, vectors=False, worker=False, session_id="bench")
    try:
        log = "".join(f"[{i}/90] Building src/m{i}.c\n" for i in range(90))
        store.ingest(log + "src/parser.c:412: error: 'tokn_kind' undeclared\n", Source(role="tool"))
    finally:
        store.close()
    return repo


# The floor for any MCP server in a plugin: one that answers the handshake from the first line
# (a bare interpreter, no imports but json), and one tool.
INSTANT_SERVER = """
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method, r = m.get("method"), None
    if method == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "instant", "version": "1"}}
    elif method == "tools/list":
        r = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif method in ("prompts/list", "resources/list"):
        r = {method.split("/")[0]: []}
    reply = {"jsonrpc": "2.0", "id": m["id"]}
    reply.update({"result": r} if r is not None else
                 {"error": {"code": -32601, "message": "Method not found"}})
    print(json.dumps(reply), flush=True)
"""


def instant_plugin(tmp: Path) -> Path:
    folder = tmp / "plugin-instant-server"
    if not folder.exists():
        shutil.copytree(PLUGIN, folder, ignore=shutil.ignore_patterns("hooks"))
        (tmp / "instant_server.py").write_text(INSTANT_SERVER)
        server = {"command": sys.executable, "args": [str(tmp / "instant_server.py")]}
        (folder / ".mcp.json").write_text(json.dumps({"mcpServers": {"gardener": server}}))
    return folder


def instant_hooks_plugin(tmp: Path) -> Path:
    """The plugin with its hooks but no MCP server, each hook a ``cat`` that reads its input and
    answers nothing: what Claude Code itself spends on a plugin's hooks."""
    folder = tmp / "plugin-instant-hooks"
    if not folder.exists():
        shutil.copytree(PLUGIN, folder, ignore=shutil.ignore_patterns(".mcp.json"))
        spec = json.loads((folder / "hooks" / "hooks.json").read_text())
        for groups in spec["hooks"].values():
            for hook in (h for group in groups for h in group["hooks"]):
                hook["command"] = "cat >/dev/null"
        (folder / "hooks" / "hooks.json").write_text(json.dumps(spec))
    return folder


# Claude Code 2.1.332's debug line for a hook that ran (``--debug-file``).
HOOK_LINE = re.compile(
    r"Hooks: (\w+)(?::\w+)? \[([^\]]*)\].* finished with status (\d+) \((\d+)ms\)"
)


def hook_times(debug: Path) -> dict[str, float]:
    """Seconds each hook event took in one run, from the CLI's debug log (summed over the
    event's hooks, should it have several). A hook that exited non-zero stops the benchmark: a
    hook that fails at once (a wrong entry point) would measure as the fastest."""
    times: dict[str, float] = {}
    try:
        text = debug.read_text(errors="replace")
    except OSError:
        return times
    for event, command, status, ms in HOOK_LINE.findall(text):
        if status != "0":
            raise SystemExit(f"hook {event} [{command}] exited {status}: see {debug}")
        times[f"{event} s"] = times.get(f"{event} s", 0.0) + int(ms) / 1000
    return times


# -- the server alone ------------------------------------------------------------------------


def server_run(variant: Variant, env: dict[str, str], repo: Path, vectors: bool) -> dict:
    """One start, as Claude Code's handshake: milliseconds from spawn to each answer."""
    args = ["gardener-mcp", "--root", str(repo)] + ([] if vectors else ["--no-vectors"])
    env = variant.env(env)
    start = time.perf_counter()
    proc = subprocess.Popen(
        args,
        env=env,
        cwd=repo,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    times: dict[str, float] = {}

    def ask(name: str, message: dict) -> None:
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{variant.name}: the server ended before answering {name}")
            if json.loads(line).get("id") == message["id"]:
                times[name] = 1000 * (time.perf_counter() - start)
                return

    try:
        ask("discover", DISCOVER)
        ask("initialize", INITIALIZE)
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        ask("tools/list", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        call = {"name": "context_pressure", "arguments": {}}
        ask("first call", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        closed = time.perf_counter()
        proc.stdin.close()
        proc.wait(120)
        times["exit"] = 1000 * (time.perf_counter() - closed)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return times


# -- the real CLIs ---------------------------------------------------------------------------


def claude_run(
    variant: Variant | None,
    env: dict[str, str],
    repo: Path,
    home: Path,
    plugin: Path = PLUGIN,
    cold: Path | None = None,
) -> dict:
    """One ``claude -p``: seconds to exit and to the first API request. ``cold``: a folder of
    its own for the hook server, whose server is stopped first (the run starts it, as the
    first hook of a day does)."""
    sys.path.insert(0, str(ROOT))
    from tests.clients.fake_anthropic import FakeAnthropic, text

    if cold is not None:
        stop_hook_servers(cold)
        env = dict(env, GARDENER_HOOKD_DIR=str(cold))
    with FakeAnthropic([[text("ok")]]) as api:
        run_env = dict(
            variant.env(env) if variant else env,
            ANTHROPIC_BASE_URL=api.base_url,
            ANTHROPIC_API_KEY="dummy",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            TERM="dumb",
        )
        debug = home / "bench-debug.txt"
        debug.unlink(missing_ok=True)
        args = [str(CLAUDE), "-p", "hello", "--output-format", "stream-json", "--verbose"]
        args += ["--debug-file", str(debug)]
        if variant is not None:
            args += ["--plugin-dir", str(plugin)]
        out = _timed(args, run_env, repo, api.requests, "claude")
        out.update(hook_times(debug))
        return out


def stop_hook_servers(folder: Path) -> None:
    """End the hook servers in ``folder`` (by the pids they wrote) and wait for them to go,
    with their files: the next hook finds none and may start one at once."""
    pids = []
    for pid_file in folder.glob("*.pid"):
        try:
            pids.append(int(pid_file.read_text().strip()))
            os.kill(pids[-1], signal.SIGTERM)
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + 30
    while pids and time.monotonic() < deadline:
        try:
            os.kill(pids[-1], 0)
            time.sleep(0.05)
        except OSError:
            pids.pop()
    for leftover in folder.glob("*"):
        leftover.unlink(missing_ok=True)


def codex_run(
    variant: Variant | None, env: dict[str, str], repo: Path, home: Path, required: bool = True
) -> dict:
    """One ``codex exec``: seconds to exit and to the first API request, and whether the
    gardener's tools were in it (``required``: the README's config; else Codex's default
    ~1 s grace for an optional server)."""
    sys.path.insert(0, str(ROOT))
    from tests.clients.fake_openai_responses import FakeResponses, text

    codex_home = home / "codex"
    codex_home.mkdir(exist_ok=True)
    with FakeResponses([[text("ok")]]) as api:
        config = codex_config(api.base_url, repo, variant, required)
        (codex_home / "config.toml").write_text(config)
        run_env = dict(
            variant.env(env) if variant else env, CODEX_HOME=str(codex_home), FAKE_API_KEY="x"
        )
        args = [str(CODEX), "exec", "--skip-git-repo-check", "--json", "hello"]
        out = _timed(args, run_env, repo, api.requests, "codex")
        names = api.turns[0].tool_names if api.turns else []
        out["tools"] = float(any(n.startswith("mcp__gardener") for n in names))
        return out


def codex_config(base_url: str, repo: Path, variant: Variant | None, required: bool) -> str:
    """A Codex home's config.toml: the scripted API, and the server as the README has it."""
    text = (
        'model = "gpt-fake-1"\nmodel_provider = "fake"\ncheck_for_update_on_startup = false\n'
        "[model_providers.fake]\n"
        f'name = "fake"\nbase_url = "{base_url}"\nenv_key = "FAKE_API_KEY"\n'
        'wire_api = "responses"\n'
        "[analytics]\nenabled = false\n"
    )
    if variant is not None:
        text += (
            "[mcp_servers.gardener]\n"
            f'command = "{variant.bin / "gardener-mcp"}"\n'
            f'args = ["--root", "{repo}"]\n'
        )
        if required:
            text += "required = true\nstartup_timeout_sec = 20\n"
    return text


def _timed(args: list[str], env: dict, cwd: Path, requests: list, name: str) -> dict:
    start = time.perf_counter()
    first: list[float] = []

    def watch() -> None:
        while not first and time.perf_counter() - start < 300:
            if requests:
                first.append(time.perf_counter() - start)
            time.sleep(0.005)

    threading.Thread(target=watch, daemon=True).start()
    res = subprocess.run(
        args,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    total = time.perf_counter() - start
    if res.returncode != 0:
        raise RuntimeError(f"{name} exited {res.returncode}: {res.stderr[-1500:]}")
    return {"total s": total, "first request s": first[0] if first else float("nan")}


# -- the report ------------------------------------------------------------------------------


def _table(title: str, results: dict[str, list[dict]], unit: str) -> str:
    """Medians per variant; a key some variants lack (a hook's time without hooks) is left
    blank for them, and its ratio is to the first variant that has it."""
    names = list(results)
    keys: list[str] = []
    for runs in results.values():
        for run in runs:
            keys += [k for k in run if k != "tools" and k not in keys]
    lines = [f"{title} (median of {len(results[names[0]])} runs, alternated; ratio to the first)"]
    head = f"{'variant':<22}" + "".join(f"{k:>22}" for k in keys)
    lines += [head, "-" * len(head)]
    first: dict[str, float] = {}
    for name in names:
        cells = []
        for k in keys:
            values = [r[k] for r in results[name] if k in r]
            if not values:
                cells.append("")
                continue
            med = statistics.median(values)
            base = first.setdefault(k, med)
            ratio = med / base if base else float("nan")
            cells.append(f"{med:>10.{2 if unit == 's' else 0}f} ({ratio:4.2f}x)")
        lines.append(f"{name:<22}" + "".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.mcp_start", description=__doc__)
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--baseline", help="another checkout to compare with (PYTHONPATH=DIR)")
    p.add_argument("--model-cache", help="folder with the exported model (default: the user's)")
    p.add_argument("--claude", action="store_true", help="also claude -p with/without the plugin")
    p.add_argument("--codex", action="store_true", help="also codex exec with/without the server")
    p.add_argument("--no-server", action="store_true", help="skip the server-alone runs")
    p.add_argument(
        "--hooks-only",
        action="store_true",
        help="claude -p without the plugin, with its hooks alone, and with instant hooks only",
    )
    opts = p.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-start-"))
    home = tmp / "home"
    home.mkdir()
    hookd = Path(tempfile.mkdtemp(prefix="bench-hookd-"))
    cache = _model_cache(opts.model_cache)
    env = dict(_base_env(home, cache), GARDENER_HOOKD_DIR=str(hookd))
    variants = [Variant("current", ROOT, tmp / "bin-current")]
    if opts.baseline:
        variants.append(Variant("baseline", Path(opts.baseline).resolve(), tmp / "bin-baseline"))
    repo = _repo(tmp)
    floor = []
    for _ in range(5):  # what any Python server pays before its first line of work
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import aider_gardener"], env=env, check=True)
        floor.append(1000 * (time.perf_counter() - t))
    load = os.getloadavg()
    print(
        f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, {os.cpu_count()} cores;"
        f" model cache: {cache or 'none (servers run --no-vectors)'};"
        f" python -c 'import aider_gardener': {statistics.median(floor):.0f} ms median",
        file=sys.stderr,
    )
    try:
        if not opts.no_server:
            results: dict[str, list[dict]] = {v.name: [] for v in variants}
            for v in variants:  # one unmeasured start each: .pyc files, page cache
                server_run(v, env, repo, cache is not None)
            for _ in range(opts.runs):
                for v in variants:
                    results[v.name].append(server_run(v, env, repo, cache is not None))
            print(_table("gardener-mcp start, ms from spawn", results, "ms"))
        for flag, cli, run, label in (
            (opts.claude, CLAUDE, claude_run, "claude -p"),
            (opts.codex, CODEX, codex_run, "codex exec"),
        ):
            if not flag:
                continue
            if not cli.exists():
                print(f"{cli} not installed: ./dev install", file=sys.stderr)
                continue
            cases: list[tuple[str, Variant | None, dict]] = [("without", None, {})]
            hooks_only = tmp / "plugin-hooks-only"  # the rest of the plugin's cost
            if not hooks_only.exists():
                shutil.copytree(PLUGIN, hooks_only, ignore=shutil.ignore_patterns(".mcp.json"))
            if run is codex_run:  # and as an optional server, Codex's default
                cases += [(f"with ({v.name})", v, {}) for v in variants]
                cases += [(f"optional ({v.name})", v, {"required": False}) for v in variants]
            else:
                if not opts.hooks_only:  # the plugin, its MCP server alone and that one's floor
                    cases += [(f"with ({v.name})", v, {}) for v in variants]
                    server_only = tmp / "plugin-server-only"
                    if not server_only.exists():
                        shutil.copytree(PLUGIN, server_only, ignore=shutil.ignore_patterns("hooks"))
                    cases += [
                        (f"server only ({v.name})", v, {"plugin": server_only}) for v in variants
                    ]
                    cases.append(("instant server", variants[0], {"plugin": instant_plugin(tmp)}))
                cases += [(f"hooks only ({v.name})", v, {"plugin": hooks_only}) for v in variants]
                cases.append(("instant hooks", variants[0], {"plugin": instant_hooks_plugin(tmp)}))
                for v in variants:  # the first run of a day: no hook server yet
                    cold = tmp / f"hookd-cold-{v.name}"
                    cold.mkdir()
                    cases.append(
                        (f"hooks, cold ({v.name})", v, {"plugin": hooks_only, "cold": cold})
                    )
            results = {name: [] for name, _, _ in cases}
            for _name, v, kw in cases:  # warm-up: the CLI's caches, the hook server
                run(v, env, repo, home, **kw)
            for _ in range(opts.runs):
                for name, v, kw in cases:
                    results[name].append(run(v, env, repo, home, **kw))
            print(_table(f"{label}, seconds", results, "s"))
            for name, runs in results.items():
                if "tools" in runs[0] and name != "without":
                    have = sum(int(r["tools"]) for r in runs)
                    print(
                        f"  {name}: the gardener's tools in the first request in {have} of"
                        f" {len(runs)} runs"
                    )
            if len(results) > 1:
                base = statistics.median(r["total s"] for r in results["without"])
                for name in list(results)[1:]:
                    med = statistics.median(r["total s"] for r in results[name])
                    print(f"  {name}: {med - base:+.2f} s median over without")
    finally:
        for folder in tmp.glob("hookd-cold-*"):
            stop_hook_servers(folder)
        for pid_file in hookd.glob("*.pid"):
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        shutil.rmtree(hookd, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
