"""End-to-end with the real Claude Code CLI against a scripted fake Messages API on 127.0.0.1.

Only the model is fake (tests/clients/fake_anthropic.py); the CLI, its hook runner, its MCP client
and its plugin loader are the real ones, so these tests catch what unit tests of the hooks cannot:
a hook JSON shape this CLI version ignores, a tool name it spells differently, a plugin file it does
not load. The CLI is the pinned one ``./dev install`` puts in ``.venv/claude-code`` (or
``GARDENER_CLAUDE_CLI``, or ``claude`` on PATH); without it, or with ``GARDENER_NO_CLAUDE_CODE``
set, every test here skips.

What the CLI needs to run offline (2.1.332): a temp ``HOME``, ``ANTHROPIC_BASE_URL`` at the fake,
``ANTHROPIC_API_KEY`` (any value), ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``,
``DISABLE_AUTOUPDATER=1``; ``-p --output-format stream-json --verbose``; tools allowed by name
(``--allowedTools``: -p mode cannot ask, and as root ``--dangerously-skip-permissions`` is
refused). It sends nothing but ``POST /v1/messages?beta=true`` (streamed) to the fake.

Covered: the plugin loaded with ``--plugin-dir`` and after ``aider-gardener claude install``;
PostToolUse storing a Bash output byte for byte (and whole past the CLI's 30,000-character cut);
the model told where the output went; the six MCP tools in the request (deferred behind ToolSearch
by default, in ``tools`` with ``ENABLE_TOOL_SEARCH=false``); recall's tool_result carrying the
stored error; UserPromptSubmit recall in a later session; ``/compact`` running PreCompact (its
state block in the summarization request, a checkpoint on disk) and SessionStart(compact)
restoring the state into the next request.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.clients.fake_anthropic import (
    FakeAnthropic,
    all_text,
    result_text,
    text,
    tool_results,
    tool_use,
)

ROOT = Path(__file__).resolve().parents[2]
PINNED_CLI = ROOT / ".venv" / "claude-code" / "node_modules" / ".bin" / "claude"
RUN_TIMEOUT = 180  # seconds for one CLI session; a hang fails the test instead of the suite


def _find_cli() -> str | None:
    for cand in (os.environ.get("GARDENER_CLAUDE_CLI"), str(PINNED_CLI), shutil.which("claude")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


@pytest.fixture(scope="module", autouse=True)
def private_hook_servers():
    """The hooks start a warm server (``claude_hooks``, idle for 15 minutes before it exits) on a
    socket in a per-user folder. The tests give it a folder of their own and end the servers they
    started, by the pid each wrote, so no test leaves a process behind or meets another run's."""
    folder = tempfile.mkdtemp(prefix="gardener-hookd-")  # short: AF_UNIX paths are
    old = os.environ.get("GARDENER_HOOKD_DIR")
    os.environ["GARDENER_HOOKD_DIR"] = folder
    try:
        yield folder
    finally:
        if old is None:
            os.environ.pop("GARDENER_HOOKD_DIR", None)
        else:
            os.environ["GARDENER_HOOKD_DIR"] = old
        for pid_file in Path(folder).glob("*.pid"):
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def claude_cli() -> str:
    if os.environ.get("GARDENER_NO_CLAUDE_CODE"):  # as ./dev install: leave the CLI out
        pytest.skip("GARDENER_NO_CLAUDE_CODE is set")
    cli = _find_cli()
    if cli is None:
        pytest.skip("Claude Code CLI not installed (./dev install puts it in .venv/claude-code)")
    try:
        out = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"Claude Code CLI at {cli} does not run: {e}")
    if out.returncode != 0 or "Claude Code" not in out.stdout:
        pytest.skip(f"Claude Code CLI at {cli} does not run: {(out.stderr or out.stdout)[:200]}")
    return cli


def cli_env(api: FakeAnthropic, home: Path) -> dict[str, str]:
    """The caller's environment without any Anthropic or Claude Code setting of its own (a real
    key or config must never reach a test), pointed at the fake API, with a temp HOME so the CLI's
    settings, plugins and transcripts stay in the test's folder."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "CLAUDECODE", "MCP_", "ENABLE_TOOL_SEARCH"))
    }
    env.update(
        HOME=str(home),
        ANTHROPIC_BASE_URL=api.base_url,
        ANTHROPIC_API_KEY="dummy",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        TERM="dumb",
    )
    return env


def run_claude(
    cli: str,
    api: FakeAnthropic,
    cwd: Path,
    home: Path,
    prompt: str,
    *args: str,
    env: dict[str, str] | None = None,
):
    """One headless session; returns the stream-json events. Fails with the CLI's own output."""
    p = subprocess.run(
        [cli, "-p", prompt, "--output-format", "stream-json", "--verbose", *args],
        cwd=cwd,
        env={**cli_env(api, home), **(env or {})},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    events = []
    for line in p.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    assert (
        p.returncode == 0
    ), f"claude exited {p.returncode}\n{p.stderr[-3000:]}\n{p.stdout[-3000:]}"
    assert not api.errors, api.errors
    return events


def final_result(events: list[dict]) -> dict:
    results = [e for e in events if e.get("type") == "result"]
    assert results, f"no result event in {[e.get('type') for e in events]}"
    return results[-1]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    return work


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


# -- the bare CLI against the fake API: the harness itself works ---------------------------------


def test_plain_prompt_reaches_fake_api_and_answer_comes_back(claude_cli, repo, home):
    with FakeAnthropic([[text("Hello from the fake model.")]]) as api:
        events = run_claude(claude_cli, api, repo, home, "say hello, gardener-probe-41")
    res = final_result(events)
    assert res["subtype"] == "success" and not res["is_error"]
    assert res["result"] == "Hello from the fake model."
    assert len(api.main_requests) == 1
    body = api.main_requests[0].body
    assert "gardener-probe-41" in all_text(body)
    assert "Bash" in api.main_requests[0].tool_names
    assert body["stream"] is True  # the SSE path of the fake is the one exercised
    # With nonessential traffic off, the Messages endpoint is all it calls (without, it also
    # sends GET /api/hello to the base URL); a new endpoint would show here first.
    assert {r.method + " " + r.path.split("?")[0] for r in api.requests} == {"POST /v1/messages"}


def test_bash_tool_use_round_trip(claude_cli, repo, home):
    """The fake model asks for Bash; the CLI runs it for real and sends the output back."""
    cmd = "printf 'line one\\nline two\\n'; echo 'E1234 boom' >&2; echo done > made.txt"
    script = [[tool_use("Bash", {"command": cmd, "description": "print two lines"})], [text("ok")]]
    with FakeAnthropic(script) as api:
        events = run_claude(claude_cli, api, repo, home, "run it", "--allowedTools", "Bash")
    assert final_result(events)["result"] == "ok"
    assert (repo / "made.txt").read_text() == "done\n"  # the command really ran, in the repo
    assert len(api.main_requests) == 2
    (tr,) = tool_results(api.main_requests[1].body)
    out = result_text(tr)
    assert "line one\nline two" in out and "E1234 boom" in out
    assert not tr.get("is_error")


# -- the gardener's plugin in the real CLI ----------------------------------------------------

PLUGIN_DIR = ROOT / "aider_gardener" / "clients" / "claude_plugin"
ERROR_LINE = (
    "src/parser.c:412:17: error: 'tokn_kind' undeclared (first use in this function);"
    " did you mean 'token_kind'?"
)


def build_log() -> str:
    """A failing ninja build: ~12 KB, ~3,800 tokens (over the hook's replace threshold, under the
    CLI's 30,000-character cut), with the one error line the recall must find."""
    lines = []
    for i in range(1, 181):
        lines.append(f"[{i}/181] Building C object CMakeFiles/app.dir/src/module_{i:03d}.c.o")
        if i % 37 == 0:
            lines.append(
                f"src/module_{i:03d}.c:{i + 10}:5: warning: unused variable 'tmp_{i}'"
                " [-Wunused-variable]"
            )
    lines += [
        "[181/181] Building C object CMakeFiles/app.dir/src/parser.c.o",
        "FAILED: CMakeFiles/app.dir/src/parser.c.o",
        "src/parser.c: In function 'parse_expr':",
        ERROR_LINE,
        "  412 |     switch (tokn_kind) {",
        "      |             ^~~~~~~~~",
        "ninja: build stopped: subcommand failed.",
    ]
    return "\n".join(lines) + "\n"


def gardener_plugin() -> Path:
    override = os.environ.get("GARDENER_TEST_PLUGIN_DIR")  # exploring a plugin layout by hand
    plugin = Path(override) if override else PLUGIN_DIR
    if not (plugin / ".claude-plugin" / "plugin.json").is_file():
        pytest.skip(f"no Claude Code plugin at {plugin}")
    return plugin


def plugin_mcp_servers(plugin: Path) -> list[str]:
    """Permission rules for the plugin's MCP servers, as this CLI names their tools
    (``mcp__plugin_<plugin>_<server>__<tool>``): -p mode cannot ask, and as root the CLI refuses
    --dangerously-skip-permissions, so each server is allowed by name."""
    name = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())["name"]
    servers = json.loads((plugin / ".mcp.json").read_text()).get("mcpServers", {})
    return [f"mcp__plugin_{name}_{server}" for server in servers]


def gardener_env_path() -> str:
    """The venv's scripts first, as after ``pip install aider-gardener``: the plugin's hook and MCP
    commands are console scripts found on PATH."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def store_entries(repo: Path) -> list[sqlite3.Row]:
    from aider_gardener.clients.project import store_location

    _, db = store_location(repo)
    assert db.is_file(), f"no store at {db}: the PostToolUse hook never wrote"
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return con.execute("SELECT * FROM entries ORDER BY created").fetchall()
    finally:
        con.close()


def strings_in(text: str) -> str:
    """A tool result's text with any JSON in it decoded, so a stored line with quotes matches
    whether the MCP result came as text or as structured JSON."""
    try:
        obj = json.loads(text)
    except ValueError:
        return text
    out: list[str] = []

    def walk(x):
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(obj)
    return "\n".join(out)


MCP_WAIT_TURNS = 30  # scripted turns, of a 1 s sleep each, for the MCP server to come up
GARDENER_TOOLS = ("recall", "expand", "forget", "pin", "checkpoint", "context_pressure")


def hook_context(body: dict, event: str) -> str:
    """What a hook of ``event`` added to the model's context, as this CLI writes it into the
    request ("<Event>[:<tool>] hook additional context: ..."), or "" when none did."""
    found = re.findall(
        rf"{event}(?::\w+)? hook additional context: (.*?)(?:\n\n|\Z)", all_text(body), re.S
    )
    return "\n".join(found)


def long_test_run_log() -> str:
    """A pytest run of ~60 KB: over the 30,000 characters past which the CLI shows the model a
    preview and saves the whole output to a file."""
    lines = ["============================= test session starts =============================="]
    for i in range(1, 1201):
        lines.append(
            f"tests/test_big.py::test_case_{i:04d} PASSED{' ' * 10}[{i * 100 // 1201:3d}%]"
        )
    lines += [
        "tests/test_big.py::test_overflow FAILED                                  [100%]",
        "=================================== FAILURES ===================================",
        "E       OverflowError: cannot fit 'int' into an index-sized integer (case 7781)",
        "FAILED tests/test_big.py::test_overflow - OverflowError: cannot fit 'int' (case 7781)",
        "======================== 1 failed, 1200 passed in 9.81s ========================",
    ]
    return "\n".join(lines) + "\n"


@dataclass
class Sessions:
    """What the two scripted sessions left: the CLI's events, the requests the fake API got, the
    store, and the names the CLI gave the gardener's tools."""

    events: list[dict]
    api: FakeAnthropic
    later: FakeAnthropic  # the second session (UserPromptSubmit recall; no ToolSearch)
    repo: Path
    home: Path
    env: dict[str, str]
    recall: str
    log: str
    big_log: str

    @property
    def prefix(self) -> str:
        return self.recall[: -len("recall")]

    def entry(self, command: str) -> sqlite3.Row:
        rows = [r for r in store_entries(self.repo) if r["command"] == command]
        assert len(rows) == 1, [(r["id"], r["command"]) for r in store_entries(self.repo)]
        return rows[0]


@pytest.fixture(scope="module")
def sessions(claude_cli, tmp_path_factory) -> Sessions:
    """Two headless sessions with the plugin loaded as shipped (``--plugin-dir``; the hooks and
    the MCP server are the console scripts of this venv, first on PATH as after an install).

    The first: the fake model runs a failing build and a long test run through Bash, loads the
    gardener's recall tool (MCP tools are deferred behind ToolSearch by default) and recalls the
    build error. The second, later, asks about the error, with tool search off."""
    plugin = gardener_plugin()
    base = tmp_path_factory.mktemp("claude-e2e")
    repo, home = base / "work", base / "home"
    home.mkdir()
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    log, big = build_log(), long_test_run_log()
    (repo / "build-output.txt").write_text(log)
    (repo / "build.sh").write_text("cat build-output.txt\n")
    (repo / "pytest-output.txt").write_text(big)
    recall: list[str] = []

    def load_recall(body, api):
        names = re.findall(r"mcp__[\w-]*gardener[\w-]*__recall", all_text(body))
        names += [t["name"] for t in body["tools"] if t["name"].endswith("__recall")]
        if names:
            recall.append(names[0])
            return [tool_use("ToolSearch", {"query": f"select:{names[0]}"})]
        # -p mode does not wait for MCP servers: a slow start (a loaded machine) is announced in
        # a later request. Wait a little, through a tool call, and look again.
        if api.turns_served < MCP_WAIT_TURNS:
            api.script.insert(api.turns_served, load_recall)
            return [tool_use("Bash", {"command": "sleep 1", "description": "wait"})]
        return [text("no gardener recall tool was offered")]

    script = [
        [tool_use("Bash", {"command": "sh build.sh", "description": "build"})],
        [tool_use("Bash", {"command": "cat pytest-output.txt", "description": "tests"})],
        load_recall,
        lambda body, api: [tool_use(recall[0], {"query": "tokn_kind undeclared"})],
        [text("The build fails on tokn_kind.")],
    ]
    env = {"PATH": gardener_env_path()}
    load = ["--plugin-dir", str(plugin)]
    allowed = ["--allowedTools", "Bash", "ToolSearch", *plugin_mcp_servers(plugin)]
    with FakeAnthropic(script) as api:
        prompt = "build the project and find the error"
        events = run_claude(claude_cli, api, repo, home, prompt, *load, *allowed, env=env)
    assert recall, "no gardener recall tool was offered to the model"

    def answer_once_tools_listed(body, api):
        if any(t["name"].endswith("__recall") and "gardener" in t["name"] for t in body["tools"]):
            return [text("It is the tokn_kind typo.")]
        if api.turns_served < MCP_WAIT_TURNS:
            api.script.insert(api.turns_served, answer_once_tools_listed)
            return [tool_use("Bash", {"command": "sleep 1", "description": "wait"})]
        return [text("no gardener tools were listed")]

    later = FakeAnthropic([answer_once_tools_listed])
    with later:
        prompt = "why does the build fail on tokn_kind undeclared?"
        env2 = {**env, "ENABLE_TOOL_SEARCH": "false"}
        run_claude(claude_cli, later, repo, home, prompt, *load, "--allowedTools", "Bash", env=env2)
    return Sessions(events, api, later, repo, home, env, recall[0], log, big)


def test_plugin_loads_with_its_hooks_and_mcp_server(sessions):
    events = sessions.events
    init = next(e for e in events if e.get("subtype") == "init")
    assert "aider-gardener" in [p["name"] for p in init["plugins"]]
    # Still "pending" at init on a loaded machine (the server answers a few seconds in); that it
    # connected shows in the requests' tool lists (test_mcp_tools_reach_the_requests_tool_list).
    servers = [s for s in init["mcp_servers"] if s["name"].startswith("plugin:")]
    assert [s["status"] in ("connected", "pending") for s in servers] == [True], servers
    started = [e for e in events if e.get("subtype") == "hook_response"]
    assert [e["hook_event"] for e in started] == ["SessionStart"]
    assert started[0]["exit_code"] == 0 and started[0]["outcome"] == "success", started[0]
    assert final_result(events)["result"] == "The build fails on tokn_kind."


def test_hooks_log_no_internal_error(sessions):
    from aider_gardener.clients.project import store_location

    folder, _ = store_location(sessions.repo)
    log = folder / "hooks.log"
    lines = log.read_text().splitlines() if log.is_file() else []
    assert not [x for x in lines if "internal error" in x], lines


def test_post_tool_use_stores_bash_output_byte_for_byte(sessions):
    # The CLI strips the one trailing newline before any hook sees the output.
    assert sessions.entry("sh build.sh")["original"] == sessions.log.rstrip("\n")


def test_mcp_tools_reach_the_requests_tool_list(sessions):
    """Deferred by default: named in the request once the server is up (-p mode does not wait for
    it before the first request; a FastMCP server takes 2-3 s to answer ``initialize`` on a
    loaded machine), and recall with its schema in ``tools`` once ToolSearch loaded it; with tool
    search off, all six in ``tools`` once the server is up."""
    api, recall = sessions.api, sessions.recall
    after_search = api.main_requests[-2]
    for t in GARDENER_TOOLS:
        assert sessions.prefix + t in all_text(after_search.body)
    (schema,) = [t for t in after_search.body["tools"] if t["name"] == recall]
    assert "query" in json.dumps(schema["input_schema"])
    last = sessions.later.main_requests[-1]
    assert {sessions.prefix + t for t in GARDENER_TOOLS} <= set(last.tool_names)


def test_recall_tool_result_sent_to_the_api_holds_the_stored_error(sessions):
    after_search, after_recall = sessions.api.main_requests[-2:]
    earlier = {r["tool_use_id"] for r in tool_results(after_search.body)}
    (result,) = [r for r in tool_results(after_recall.body) if r["tool_use_id"] not in earlier]
    got = strings_in(result_text(result))
    assert not result.get("is_error"), got[:500]
    assert ERROR_LINE in got
    assert sessions.entry("sh build.sh")["id"] in got


def test_user_prompt_submit_context_reaches_the_request(sessions):
    """A later session's prompt about the error gets the stored error back as hook context."""
    req = sessions.later.main_requests[0]
    ctx = hook_context(req.body, "UserPromptSubmit")
    entry = sessions.entry("sh build.sh")
    assert entry["id"] in ctx or ERROR_LINE in ctx, all_text(req.body)[-3000:]


def test_model_is_told_where_the_output_went(sessions):
    """The hook replaced the build output by its summary (or added a note) naming the entry, and
    the error line still reached the model."""
    after_build = sessions.api.main_requests[1]
    seen = all_text(after_build.body)
    assert ERROR_LINE in seen
    entry = sessions.entry("sh build.sh")
    assert entry["id"] in seen, "neither a replaced output nor a note named the stored entry"
    (result,) = tool_results(after_build.body)
    if ERROR_LINE in result_text(result) and len(result_text(result)) < len(sessions.log) / 2:
        assert entry["id"] in result_text(result)  # replaced: the summary names its entry


def test_output_over_the_cli_cut_is_stored_whole(sessions):
    """Past 30,000 characters the hook's ``tool_response.stdout`` is cut to 30,000; the whole
    output is in the file ``tool_response.persistedOutputPath`` names."""
    entry = sessions.entry("cat pytest-output.txt")
    assert entry["original"] == sessions.big_log.rstrip("\n")


@dataclass
class Compacted:
    compaction: FakeAnthropic  # what the CLI sent to have the conversation summarized
    events: list[dict]
    resumed: FakeAnthropic  # the first turn after the compaction


@pytest.fixture(scope="module")
def compacted(claude_cli, sessions) -> Compacted:
    """The first session again (``--resume``): ``/compact`` (the manual compaction, which runs
    PreCompact and then SessionStart with source "compact"), then one more prompt."""
    session_id = final_result(sessions.events)["session_id"]
    load = ["--plugin-dir", str(gardener_plugin()), "--resume", session_id]
    with FakeAnthropic([[text("Summary: the build fails on tokn_kind.")]]) as compaction:
        events = run_claude(
            claude_cli,
            compaction,
            sessions.repo,
            sessions.home,
            "/compact",
            *load,
            env=sessions.env,
        )
    with FakeAnthropic([[text("Carrying on.")]]) as resumed:
        run_claude(
            claude_cli, resumed, sessions.repo, sessions.home, "go on", *load, env=sessions.env
        )
    return Compacted(compaction, events, resumed)


def test_pre_compact_state_block_reaches_the_compaction_request(sessions, compacted):
    """PreCompact's stdout is what this CLI appends to the summarization instructions: the open
    error and its entry id must be in them, and a verified checkpoint on disk."""
    entry = sessions.entry("sh build.sh")
    instructions = [
        t[t.rfind("Additional Instructions:") :]
        for t in (all_text(r.body) for r in compacted.compaction.requests if r.body)
        if "Additional Instructions:" in t
    ]
    assert instructions, "no summarization request carried additional instructions"
    assert any(ERROR_LINE in t and entry["id"] in t for t in instructions), instructions[0][:2000]
    from aider_gardener.clients.project import store_location

    folder, _ = store_location(sessions.repo)
    checkpoints = sorted((folder / "checkpoints").glob("*.md"))
    assert checkpoints and ERROR_LINE in checkpoints[-1].read_text()


def test_session_start_after_compaction_restores_the_state(sessions, compacted):
    """SessionStart(compact) answers with the state block, and the next turn's request carries
    it as the hook's context (the conversation it came from is summarized away)."""
    (hook,) = [
        e
        for e in compacted.events
        if e.get("subtype") == "hook_response" and e.get("hook_name") == "SessionStart:compact"
    ]
    assert hook["exit_code"] == 0 and ERROR_LINE in hook["output"], hook
    req = compacted.resumed.main_requests[0]
    t = all_text(req.body)
    at = t.rfind("SessionStart hook additional context:")
    assert at >= 0, t[-3000:]
    assert ERROR_LINE in t[at : at + 4000]


def test_installed_plugin_loads_without_plugin_dir_or_venv_on_path(claude_cli, repo, home):
    """``aider-gardener claude install`` (temp HOME) registers the plugin with this CLI; a plain
    ``claude -p`` then loads it from any shell: hooks and MCP server run from their absolute
    paths, with this venv nowhere on PATH."""
    gardener_plugin()  # skips as the others when the package ships no plugin
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ANTHROPIC_"))}
    env.update(HOME=str(home), PATH=path, XDG_DATA_HOME=str(home / ".local" / "share"))
    env.update(DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    env.pop("GARDENER_CLAUDE_PLUGIN_DIR", None)
    done = subprocess.run(
        [str(Path(venv_bin) / "aider-gardener"), "claude", "install", "--claude", claude_cli],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (repo / "build-output.txt").write_text(build_log())

    def answer_once_tools_listed(body, api):
        if any(t["name"].endswith("__recall") and "gardener" in t["name"] for t in body["tools"]):
            return [text("Built.")]
        if api.turns_served < MCP_WAIT_TURNS:
            api.script.insert(api.turns_served, answer_once_tools_listed)
            return [tool_use("Bash", {"command": "sleep 1", "description": "wait"})]
        return [text("no gardener tools were listed")]

    script = [
        [tool_use("Bash", {"command": "cat build-output.txt", "description": "build"})],
        answer_once_tools_listed,
    ]
    with FakeAnthropic(script) as api:
        events = run_claude(
            claude_cli,
            api,
            repo,
            home,
            "build it",
            "--allowedTools",
            "Bash",
            env={"PATH": path, "ENABLE_TOOL_SEARCH": "false"},
        )
    init = next(e for e in events if e.get("subtype") == "init")
    assert "aider-gardener" in [p["name"] for p in init["plugins"]], init["plugins"]
    assert final_result(events)["result"] == "Built."
    assert [
        r["original"] for r in store_entries(repo) if r["command"] == "cat build-output.txt"
    ] == [build_log().rstrip("\n")]


def test_a_key_in_a_bash_output_reaches_the_model_redacted(claude_cli, repo, home):
    """Issue 21, point 2, in the real CLI: the command line and the error print an API key;
    the tool result the model gets has it redacted, the store keeps the original."""
    plugin = gardener_plugin()
    key = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz" * 3
    cmd = f"OPENAI_API_KEY={key} sh -c 'echo \"Incorrect API key provided: $OPENAI_API_KEY\"'"
    script = [[tool_use("Bash", {"command": cmd, "description": "deploy"})], [text("ok")]]
    with FakeAnthropic(script) as api:
        run_claude(
            claude_cli,
            api,
            repo,
            home,
            "deploy",
            "--plugin-dir",
            str(plugin),
            "--allowedTools",
            "Bash",
            env={"PATH": gardener_env_path()},
        )
    (tr,) = tool_results(api.main_requests[1].body)
    out = result_text(tr)
    assert "Incorrect API key provided: [redacted: " in out
    assert key not in json.dumps(tr)  # (the model's own tool call holds the command it wrote)
    [row] = [r for r in store_entries(repo) if r["command"] == cmd]
    assert key in row["original"]  # for the user, in the store
