"""End-to-end with the real Codex CLI (``codex exec``) against a scripted Responses API on
127.0.0.1 (``tests/clients/fake_openai_responses.py``), ``gardener-mcp`` configured as the
README's "Use it from Claude Code and other MCP clients" section says (its TOML block is read
from the README and only its paths are filled in).

Only the model is fake: Codex's MCP client, its tool catalog and what it forwards of a tool's
result are the real ones. The CLI is the pinned one ``./dev install`` puts in ``.venv/codex``
(or ``GARDENER_CODEX_CLI``, or ``codex`` on PATH); without it, or with ``GARDENER_NO_CODEX``
set, every test here skips.

What Codex 0.169.0 needs to run offline: a temp ``CODEX_HOME`` whose ``config.toml`` names a
model provider with ``base_url`` at the fake, ``wire_api = "responses"`` and an ``env_key`` set
to any value, and ``codex exec --skip-git-repo-check``. It posts ``/v1/responses`` (streamed)
and nothing else. An MCP server's tools are a namespace ``mcp__<server>`` in the request's
``tools``; the model calls one as ``{"name": "recall", "namespace": "mcp__gardener"}``; the
``function_call_output`` Codex sends back is "Wall time: ...\\nOutput:\\n" and the tool's
``structuredContent`` as JSON (its text content only when it has no structured part).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from aider_gardener.clients import project
from aider_gardener.types import Source
from tests.clients.fake_openai_responses import (
    FakeResponses,
    call_outputs,
    function_call,
    output_text,
    text,
)

ROOT = Path(__file__).resolve().parents[2]
PINNED_CLI = ROOT / ".venv" / "codex" / "node_modules" / ".bin" / "codex"
SERVER = Path(sys.executable).with_name("gardener-mcp")
README = ROOT / "README.md"
RUN_TIMEOUT = 180  # seconds for one CLI session; a hang fails the test instead of the suite
SIX = {"recall", "expand", "forget", "pin", "checkpoint", "context_pressure"}
OUTPUTS = {
    "cargo_compile_error__tsql_wasm.txt": "cargo build",
    "pytest_failures_typeerror__X_Ray_LLM.log": "pytest -x",
}


def _find_cli() -> str | None:
    for cand in (os.environ.get("GARDENER_CODEX_CLI"), str(PINNED_CLI), shutil.which("codex")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


@pytest.fixture(scope="module")
def codex_cli() -> str:
    if os.environ.get("GARDENER_NO_CODEX"):  # as ./dev install: leave the CLI out
        pytest.skip("GARDENER_NO_CODEX is set")
    cli = _find_cli()
    if cli is None:
        pytest.skip("Codex CLI not installed (./dev install puts it in .venv/codex)")
    try:
        out = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"Codex CLI at {cli} does not run: {e}")
    if out.returncode != 0 or "codex" not in out.stdout:
        pytest.skip(f"Codex CLI at {cli} does not run: {(out.stderr or out.stdout)[:200]}")
    if not SERVER.is_file():
        pytest.skip(f"{SERVER} is not installed (pip install -e .)")
    return cli


def readme_codex_config() -> str:
    """The README's Codex config: the TOML block of its MCP section with ``[mcp_servers.``."""
    section = README.read_text().split("## Use it from Claude Code and other MCP clients", 1)[-1]
    section = section.split("\n## ", 1)[0]
    blocks = re.findall(r"```toml\n(.*?)```", section, re.S)
    found = [b for b in blocks if "[mcp_servers.gardener]" in b]
    assert found, "the README's MCP section has no Codex config ([mcp_servers.gardener])"
    return found[0]


def codex_home(base: Path, api: FakeResponses, repo: Path) -> Path:
    """A Codex home: the scripted API as its model provider, and the README's server config
    with this venv's ``gardener-mcp`` and the test's repository filled in."""
    home = base / "codex-home"
    home.mkdir(exist_ok=True)
    server = readme_codex_config()
    assert "/path/to/.venv/bin/gardener-mcp" in server and "/path/to/repo" in server
    server = server.replace("/path/to/.venv/bin/gardener-mcp", str(SERVER))
    server = server.replace("/path/to/repo", str(repo))
    provider = (
        'model = "gpt-fake-1"\n'
        'model_provider = "fake"\n'
        "check_for_update_on_startup = false\n"
        "[analytics]\n"
        "enabled = false\n"
        "[model_providers.fake]\n"
        'name = "fake"\n'
        f'base_url = "{api.base_url}"\n'
        'env_key = "FAKE_API_KEY"\n'
        'wire_api = "responses"\n'
    )
    (home / "config.toml").write_text(provider + "\n" + server)
    return home


def run_codex(cli: str, api: FakeResponses, base: Path, repo: Path, prompt: str) -> list[dict]:
    """One headless ``codex exec``; returns its JSON events. Fails with the CLI's own output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "CODEX"))}
    home = base / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        CODEX_HOME=str(codex_home(base, api, repo)),
        FAKE_API_KEY="dummy",
        # the server's model cache and hook folders stay in the test's HOME
        XDG_CACHE_HOME=str(home / ".cache"),
    )
    p = subprocess.run(
        [cli, "exec", "--skip-git-repo-check", "--json", prompt],
        cwd=repo,
        env=env,
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
    assert p.returncode == 0, f"codex exited {p.returncode}\n{p.stderr[-3000:]}\n{p.stdout[-2000:]}"
    assert not api.errors, api.errors
    return events


def structured(output) -> dict:
    """The tool result Codex forwarded: the JSON after its "Output:" line."""
    raw = output_text(output)
    body = raw.split("Output:\n", 1)[-1]
    try:
        return json.loads(body)
    except ValueError:
        raise AssertionError(f"no JSON tool result in {raw[:500]!r}") from None


def gardener_namespace(body: dict) -> tuple[str, set[str]]:
    """The namespace Codex put the gardener's tools in, and their names."""
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace" and "gardener" in tool.get("name", ""):
            return tool["name"], {t["name"] for t in tool.get("tools") or []}
    return "", set()


@pytest.fixture(scope="module")
def outputs(tool_outputs_dir) -> dict[str, Path]:
    files = {name: tool_outputs_dir / name for name in OUTPUTS}
    missing = [n for n, p in files.items() if not p.is_file()]
    if missing:
        pytest.skip(f"shared tool outputs missing: {missing}")
    return files


@pytest.fixture(autouse=True)
def no_export_left(tmp_path: Path):
    """The server's first use in the test's HOME starts the model's one-time export, which is
    left to finish after the server exits (``store/embeddings.py``): a minute of CPU per test
    on a shared machine. The test ends the exports that work in its own folder."""
    yield
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"_export_here" in cmd and str(tmp_path).encode() in cmd:
            try:
                os.killpg(int(proc.name), signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def repo(tmp_path: Path, outputs) -> tuple[Path, dict]:
    """A git repository whose store holds real tool outputs, stored as a hook would."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    store = project.open_project_store(work, vectors=False, worker=False, session_id="codex-e2e")
    try:
        entries = {
            name: store.ingest(path.read_bytes(), Source(role="tool", command=OUTPUTS[name]))
            for name, path in outputs.items()
        }
    finally:
        store.close()
    return work, entries


def test_codex_offers_the_six_tools_in_its_first_request(codex_cli, tmp_path, repo):
    """With the README's config Codex waits for the server: the six tools are in the very
    first request (with Codex's default ~1 s grace for optional servers they were missing from
    it in 15 of 23 runs under load)."""
    work, _ = repo
    with FakeResponses([[text("hello")]]) as api:
        run_codex(codex_cli, api, tmp_path, work, "say hello")
    assert len(api.turns) == 1
    namespace, names = gardener_namespace(api.turns[0].body)
    assert namespace == "mcp__gardener" and names == SIX, api.turns[0].tool_names
    assert {r.method + " " + r.path.split("?")[0] for r in api.requests} == {"POST /v1/responses"}


def test_recall_expand_and_context_pressure_reach_the_model_intact(
    codex_cli, tmp_path, repo, outputs
):
    """The scripted model recalls an error, expands the hit it names and asks for the
    context pressure; what Codex sends back to the API holds the stored content: the hit and
    its matching lines, the original's whole text (issue 22: only expand's metadata arrived),
    the store's figures."""
    work, entries = repo
    cargo = entries["cargo_compile_error__tsql_wasm.txt"]
    seen: dict[str, str] = {}

    def call(tool: str, args: Callable[[dict], dict]) -> Callable:
        def turn(body, api):
            namespace, names = gardener_namespace(body)
            assert tool in names, f"no gardener {tool} in {api.turns[-1].tool_names}"
            outs = [structured(o) for o in call_outputs(body).values()]
            if outs and "hits" in outs[-1]:
                seen["id"] = outs[-1]["hits"][0]["id"]
            return [function_call(tool, args(seen), namespace=namespace)]

        return turn

    script = [
        call("recall", lambda s: {"query": "E0432 unresolved import"}),
        call("expand", lambda s: {"id": s["id"]}),
        call("context_pressure", lambda s: {}),
        [text("The build fails on an unresolved import.")],
    ]
    with FakeResponses(script) as api:
        events = run_codex(codex_cli, api, tmp_path, work, "why does cargo build fail?")
    assert len(api.turns) == 4
    last = api.turns[-1].body
    outputs_by_call = call_outputs(last)
    calls = [i for i in last["input"] if i.get("type") == "function_call"]
    assert [c["name"] for c in calls] == ["recall", "expand", "context_pressure"]
    recall, expand, pressure = (structured(outputs_by_call[c["call_id"]]) for c in calls)

    hit = recall["hits"][0]
    assert hit["id"] == cargo.id and hit["source"] == "cargo build"
    assert any("E0432" in m["text"] for m in hit["matching_lines"])
    assert "E0432" in hit["summary"]

    original = outputs["cargo_compile_error__tsql_wasm.txt"].read_bytes().decode()
    assert expand["id"] == cargo.id
    assert expand["text"] == original  # the original itself, not only its metadata
    assert expand["next_offset"] is None and expand["total_chars"] == len(original)

    assert pressure["project"]["entries"] == len(entries)
    assert pressure["project"]["tokens_original"] == sum(
        e.tokens_original for e in entries.values()
    )
    assert "project:" in pressure["message"]
    final = [e for e in events if e.get("type") == "item.completed"]
    assert final and final[-1]["item"].get("text") == "The build fails on an unresolved import."
