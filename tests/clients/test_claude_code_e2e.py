"""End-to-end with the real Claude Code CLI against a scripted fake Messages API on 127.0.0.1.

Only the model is fake (tests/clients/fake_anthropic.py); the CLI, its hook runner, its MCP client
and its plugin loader are the real ones, so these tests catch what unit tests of the hooks cannot:
a hook JSON shape this CLI version ignores, a tool name it spells differently, a plugin file it does
not load. The CLI is the pinned one ``./dev install`` puts in ``.venv/claude-code`` (or
``GARDENER_CLAUDE_CLI``); without it every test here skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
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


@pytest.fixture(scope="module")
def claude_cli() -> str:
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


def run_claude(cli: str, api: FakeAnthropic, cwd: Path, home: Path, prompt: str, *args: str):
    """One headless session; returns the stream-json events. Fails with the CLI's own output."""
    p = subprocess.run(
        [cli, "-p", prompt, "--output-format", "stream-json", "--verbose", *args],
        cwd=cwd,
        env=cli_env(api, home),
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
