"""The Claude Code hooks, run as Claude Code runs them: the real ``gardener-hook`` console script
as a subprocess, hook JSON on stdin, in a temp git repository with a temp HOME. Payloads are built
at test time from the real transcripts in ``../shared/data/claude_code_transcripts`` (each
tool_use paired with its result's ``toolUseResult``, which is what PostToolUse's
``tool_response`` carries); nothing of them is copied into the repository."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from aider_gardener.clients import claude_hooks, hook_client, hook_wire
from aider_gardener.clients.claude_hooks import handle, tool_output
from aider_gardener.continuity.checkpoint import load_latest, parse_checkpoint
from aider_gardener.continuity.state import HEADER as AIDER_HEADER
from aider_gardener.continuity.state import TOOLS_RECALL
from aider_gardener.pipeline import entry_id
from aider_gardener.store.db import Store
from tests.conftest import SHARED

HEADER = TOOLS_RECALL.header  # the state block's header in Claude Code's words
TRANSCRIPTS = SHARED / "claude_code_transcripts"
HOOK = Path(sys.executable).with_name("gardener-hook")
SMALL = "cc_session__DRMacIver-claude-reliability__coverage-test-fix.jsonl"
BIG_OUTPUTS = "cc_session__Eduardodmb-ClaudeWork__4a5c6ea5.jsonl"  # Claude Code 2.1.146
LONG = "cc_session__Jason-liu-0219-my-claude__48244adb.jsonl"


def transcript(name: str) -> Path:
    path = TRANSCRIPTS / name
    if not path.is_file():
        pytest.skip(f"shared transcript not found: {path}")
    return path


def tool_payloads(path: Path, cwd: Path, limit: int | None = None) -> list[dict]:
    """PostToolUse payloads for the main-thread tool calls of a real transcript."""
    uses: dict[str, dict] = {}
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("isSidechain"):
            continue
        content = (record.get("message") or {}).get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                uses[block["id"]] = block
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in uses:
                use = uses[block["tool_use_id"]]
                out.append(
                    {
                        "session_id": record.get("sessionId", "s"),
                        "transcript_path": str(path),
                        "cwd": str(cwd),
                        "hook_event_name": "PostToolUse",
                        "tool_name": use["name"],
                        "tool_input": use.get("input") or {},
                        "tool_response": record.get("toolUseResult", block.get("content")),
                        "tool_use_id": use["id"],
                    }
                )
    return out[:limit] if limit else out


@pytest.fixture
def server_dir(monkeypatch):
    """A private folder for this test's warm hook server, which is stopped (by the pid it
    wrote) at the end: no test leaves a process behind or shares one with another test."""
    folder = Path(tempfile.mkdtemp(prefix="gh"))  # short: AF_UNIX socket paths are limited
    monkeypatch.setenv(hook_wire.SERVER_DIR_ENV, str(folder))
    yield folder
    for pid_file in folder.glob("*.pid"):
        try:
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def repo(tmp_path, monkeypatch, server_dir):
    root = tmp_path / "proj"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("AIDER_GARDENER_STORE", raising=False)
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    return root


def wait_for_server(folder: Path, timeout: float = 60.0) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        socks = list(folder.glob("*.sock"))
        if socks:
            return socks[0]
        time.sleep(0.1)
    raise AssertionError(f"no hook server socket in {folder}")


def run_hook(
    event: str, payload, cwd: Path, raw: bytes | None = None, timeout: float = 120
) -> tuple[int, str, str]:
    if not HOOK.exists():
        pytest.skip(f"console script not installed: {HOOK}")
    data = raw if raw is not None else json.dumps(payload).encode()
    proc = subprocess.run(
        [str(HOOK), event],
        input=data,
        capture_output=True,
        cwd=cwd,
        timeout=timeout,
        env=os.environ,
    )
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def store_of(root: Path) -> Store:
    return Store(root=root, vectors=False)


def log_lines(root: Path) -> list[str]:
    path = root / ".aider.gardener" / claude_hooks.LOG_NAME
    return path.read_text().splitlines() if path.exists() else []


def settled(root: Path, session: str, timeout: float = 60.0) -> None:
    """Wait for the work the warm server does after a hook's answer (storing the conversation):
    it holds the session's lock from before the answer until that work is done."""
    import fcntl

    lock = root / ".aider.gardener" / "claude" / f"claude-{session}.lock"
    deadline = time.monotonic() + timeout
    with open(lock, "a") as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                assert time.monotonic() < deadline, f"{lock} still held after {timeout} s"
                time.sleep(0.02)


def valid_hook_json(out: str, event: str) -> dict:
    if not out.strip():
        return {}
    data = json.loads(out)
    assert isinstance(data, dict)
    assert set(data) <= {"hookSpecificOutput", "systemMessage", "continue", "suppressOutput"}
    spec = data.get("hookSpecificOutput")
    if spec is not None:
        assert spec["hookEventName"] == event
        allowed = {
            "PostToolUse": {"additionalContext", "updatedToolOutput", "updatedMCPToolOutput"},
            "UserPromptSubmit": {"additionalContext"},
            "SessionStart": {"additionalContext"},
        }[event]
        assert set(spec) - {"hookEventName"} <= allowed
        assert all(isinstance(v, (str, list, dict)) and v for k, v in spec.items())
    return data


# --- PostToolUse ---


def test_post_tool_use_stores_real_outputs_byte_exact(repo):
    payloads = tool_payloads(transcript(SMALL), repo)
    assert len(payloads) >= 8
    expected = {}
    for payload in payloads:
        code, out, err = run_hook("PostToolUse", payload, repo)
        assert code == 0, err
        valid_hook_json(out, "PostToolUse")
        got = tool_output(payload["tool_name"], payload["tool_input"], payload["tool_response"])
        if got is not None:
            expected[entry_id(got.text)] = got.text
    assert expected
    with store_of(repo) as store:
        for eid, text in expected.items():
            entry = store.get(eid)
            assert entry is not None, eid
            assert entry.original == text
            assert entry.original.encode("utf-8") == text.encode("utf-8")
    assert log_lines(repo) == []


def test_large_bash_output_is_replaced_by_its_summary(repo):
    """A session recorded with Claude Code 2.1.146, which replaces any tool's output."""
    payloads = [
        p
        for p in tool_payloads(transcript(BIG_OUTPUTS), repo)
        if p["tool_name"] == "Bash" and isinstance(p["tool_response"], dict)
    ]
    big = max(payloads, key=lambda p: len(p["tool_response"].get("stdout") or ""))
    code, out, err = run_hook("PostToolUse", big, repo)
    assert code == 0, err
    spec = valid_hook_json(out, "PostToolUse")["hookSpecificOutput"]
    text = tool_output("Bash", big["tool_input"], big["tool_response"]).text
    eid = entry_id(text)
    shaped = spec["updatedToolOutput"]  # Bash's own result shape: a string would be dropped
    assert set(shaped) >= {"stdout", "stderr", "interrupted"} and shaped["stderr"] == ""
    assert f"[full output stored: id={eid}]" in shaped["stdout"]
    assert "updatedMCPToolOutput" not in spec  # Bash is not an MCP tool
    assert len(shaped["stdout"]) < len(text) / 2
    with store_of(repo) as store:
        assert store.get(eid).original == text


def test_read_is_never_replaced_only_noted(repo):
    reads = [
        p
        for p in tool_payloads(transcript(LONG), repo)
        if p["tool_name"] == "Read" and isinstance(p["tool_response"], dict)
    ]
    big = max(reads, key=lambda p: len(str(p["tool_response"])))
    answer = handle("PostToolUse", big)
    spec = answer["hookSpecificOutput"]
    assert "updatedToolOutput" not in spec
    eid = entry_id(big["tool_response"]["file"]["content"])
    assert spec["additionalContext"].startswith(f"[gardener: stored as id={eid} (")


def test_mcp_output_replacement_keeps_the_content_block_shape(repo):
    lines = [
        f"2026-01-01T00:00:{i % 60:02d} INFO worker {i}: processed batch ok" for i in range(3000)
    ]
    lines[1234] = "2026-01-01T00:00:34 ERROR worker 1234: ConnectionResetError: peer closed"
    text = "\n".join(lines)
    payload = {
        "session_id": "m1",
        "cwd": str(repo),
        "tool_name": "mcp__logs__tail",
        "tool_input": {"n": 3000},
        "tool_response": [{"type": "text", "text": text}],
    }
    spec = handle("PostToolUse", payload)["hookSpecificOutput"]
    blocks = spec["updatedMCPToolOutput"]
    assert isinstance(blocks, list) and blocks[0]["type"] == "text"
    assert "ConnectionResetError" in blocks[0]["text"]
    assert blocks == spec["updatedToolOutput"]


def test_an_unusable_store_never_replaces_output(repo, tmp_path, monkeypatch):
    """A store that cannot be opened runs in memory and is gone with the process: no id may
    stand in for the output then, and the reason is one line in the log."""
    broken = tmp_path / "broken"
    (broken / "store.sqlite").mkdir(parents=True)  # a folder where the database file should be
    monkeypatch.setenv("AIDER_GARDENER_STORE", str(broken))
    text = "\n".join(f"ERROR [job {i}] upstream timed out after 30s" for i in range(2000))
    payload = {
        "session_id": "d1",
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": "./run-jobs"},
        "tool_response": {"stdout": text, "stderr": ""},
    }
    code, out, err = run_hook("PostToolUse", payload, repo)
    assert code == 0 and out == "", err
    lines = (broken / claude_hooks.LOG_NAME).read_text().splitlines()
    assert len(lines) == 1 and "in-memory store" in lines[0]


def test_the_gardeners_own_tools_are_left_alone(repo):
    payload = {
        "session_id": "m1",
        "cwd": str(repo),
        "tool_name": "mcp__plugin_aider-gardener_gardener__expand",
        "tool_input": {"id": "abc"},
        "tool_response": [{"type": "text", "text": "x\n" * 50_000}],
    }
    assert handle("PostToolUse", payload) == {}
    assert not (repo / ".aider.gardener" / "store.sqlite").exists()


def test_old_claude_code_gets_a_note_not_a_replacement(repo, tmp_path):
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps({"type": "user", "version": "2.1.14"}) + "\n")
    text = "\n".join(f"src/mod{i}.py:{i}: E501 line too long ({80 + i} > 79)" for i in range(900))
    payload = {
        "session_id": "o1",
        "transcript_path": str(old),
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": "flake8"},
        "tool_response": {"stdout": text, "stderr": "", "interrupted": False},
    }
    spec = handle("PostToolUse", payload)["hookSpecificOutput"]
    assert set(spec) == {"hookEventName", "additionalContext"}
    assert entry_id(text) in spec["additionalContext"]


SESSION = "0b6c3a52-6a7e-4f4e-9d2a-1c2b3d4e5f60"


def claude_session(home: Path, sid: str = SESSION) -> tuple[Path, Path]:
    """A transcript and its tool-results folder where Claude Code 2.1.x keeps them:
    ``~/.claude/projects/<sanitized cwd>/<session>.jsonl`` and ``<session>/tool-results/``."""
    project = home / ".claude" / "projects" / "-work-proj"
    results = project / sid / "tool-results"
    results.mkdir(parents=True)
    path = project / f"{sid}.jsonl"
    path.write_text(json.dumps({"type": "user", "version": "2.1.332"}) + "\n")
    return path, results


def cut_bash(stdout: str, saved: str) -> dict:
    """Bash's result as Claude Code gives it for an output past its cut."""
    return {
        "stdout": stdout,
        "stderr": "",
        "interrupted": False,
        "persistedOutputPath": saved,
        "persistedOutputSize": 99_999,
    }


def test_output_claude_code_cut_is_read_whole_from_its_sessions_folder(repo):
    path, results = claude_session(Path(os.environ["HOME"]))
    whole = "".join(f"line {i}: FAILED tests/test_x.py::test_{i}\n" for i in range(2000))
    saved = results / "b1.txt"
    saved.write_text(whole)  # as the command printed it; Claude Code's stdout drops the last \n
    resp = cut_bash(whole[:30000], str(saved))
    assert tool_output("Bash", {}, resp, tool_results=results).text == whole.rstrip("\n")
    payload = {
        "session_id": SESSION,
        "transcript_path": str(path),
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": "pytest"},
        "tool_response": resp,
    }
    handle("PostToolUse", payload)
    with store_of(repo) as store:
        assert store.get(entry_id(whole.rstrip("\n"))).original == whole.rstrip("\n")
    resp["persistedOutputPath"] = str(results / "gone.txt")  # deleted since: what we have
    assert tool_output("Bash", {}, resp, tool_results=results).text == whole[:30000]


@pytest.mark.parametrize("where", ["etc", "ssh", "symlink", "dotdot", "other session"])
def test_persisted_output_outside_the_sessions_folder_is_not_read(repo, tmp_path, where):
    """``persistedOutputPath`` comes with the hook's input: read only inside this session's
    tool-results folder (after symlinks), else one log line and the output as given."""
    home = Path(os.environ["HOME"])
    path, results = claude_session(home)
    secret = "".join(f"gardener-test-secret {i}\n" for i in range(2000))
    ssh = home / ".ssh" / "id_rsa"
    ssh.parent.mkdir()
    ssh.write_text(secret)
    outside = tmp_path / "outside.txt"
    outside.write_text(secret)
    (results / "link.txt").symlink_to(outside)
    _, elsewhere = claude_session(home, "1f2e3d4c-0000-4000-8000-000000000000")
    (elsewhere / "b9.txt").write_text(secret)
    target = {
        "etc": "/etc/passwd",
        "ssh": str(ssh),
        "symlink": str(results / "link.txt"),
        "dotdot": f"{results}/{os.path.relpath(outside, results)}",
        "other session": str(elsewhere / "b9.txt"),
    }[where]
    assert ".." in target or where != "dotdot"
    cut = "".join(f"collected item {i}\n" for i in range(20)).rstrip("\n")
    payload = {
        "session_id": SESSION,
        "transcript_path": str(path),
        "cwd": str(repo),
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "pytest"},
        "tool_response": cut_bash(cut, target),
    }
    claude_hooks.answer("PostToolUse", json.dumps(payload).encode())
    with store_of(repo) as store:
        assert store.get(entry_id(cut)).original == cut
        assert store.get(entry_id(Path(target).read_text().rstrip("\n"))) is None
    (line,) = log_lines(repo)
    assert "persistedOutputPath" in line and "not read" in line


def test_the_file_claude_code_saved_a_cut_output_to_is_known():
    """From the response's ``persistedOutputPath`` (2.1.332), or from Claude Code's own words
    when a result reaches the hook as text (older versions, transcripts)."""
    saved = "C:\\Users\\e\\.claude\\projects\\X\\s1\\tool-results\\bt86y5h3w.txt"
    text = (
        f"<persisted-output>\nOutput too large (38.8KB). Full output saved to: {saved}\n\n"
        "Preview (first 2KB):\n2026-05-22 04:24:41,980 42 INFO ? odoo: Odoo version 18.0\n"
    )
    assert tool_output("Bash", {"command": "odoo -u x"}, text).saved == saved
    resp = {"stdout": "a\nb", "stderr": "", "persistedOutputPath": "/p/tool-results/b.txt"}
    assert tool_output("Bash", {"command": "x"}, resp).saved == "/p/tool-results/b.txt"
    assert tool_output("Bash", {"command": "x"}, {"stdout": "a\nb"}).saved is None
    quoted = "notes.md says: <persisted-output>\nFull output saved to: /etc/passwd"
    assert (
        tool_output("Bash", {"command": "cat notes.md"}, quoted).saved is None
    )  # not at the start


def test_replacements_keep_each_tools_result_shape():
    bash = {
        "stdout": "x",
        "stderr": "y",
        "interrupted": False,
        "isImage": False,
        "persistedOutputPath": "/p",
        "persistedOutputSize": 9,
    }
    assert claude_hooks.replacement("Bash", bash, "S") == {
        "stdout": "S",
        "stderr": "",
        "interrupted": False,
        "isImage": False,
    }
    grep = {"mode": "content", "numFiles": 0, "filenames": [], "content": "a\nb"}
    assert claude_hooks.replacement("Grep", grep, "S1\nS2")["content"] == "S1\nS2"
    files = {"mode": "files_with_matches", "filenames": ["a", "b", "c"], "numFiles": 3}
    # Claude Code prints "Found {numFiles} files" then the names: the real count, then the text
    assert claude_hooks.replacement("Grep", files, "a\n[x]") == {
        "mode": "files_with_matches",
        "filenames": ["a\n[x]"],
        "numFiles": 3,
    }
    # Glob: the names joined, then its own "Showing N of M" note, which would count the
    # summary's lines as files: the text is one name, the note (about the real files) says it
    glob = {
        "filenames": ["a", "b"],
        "numFiles": 2,
        "truncated": True,
        "totalMatches": 300,
        "countIsComplete": True,
        "durationMs": 5,
    }
    assert claude_hooks.replacement("Glob", glob, "[full output stored: id=x] S\nT") == {
        "filenames": [
            "[full output stored: id=x] S\nT\n(Showing 2 of 300 matching files; 298 more are"
            " not listed. Narrow the pattern or path to see the rest.)"
        ],
        "numFiles": 2,
        "truncated": False,
        "durationMs": 5,
    }
    whole = {"filenames": ["a"], "numFiles": 1, "truncated": False, "durationMs": 1}
    assert claude_hooks.replacement("Glob", whole, "S\nT")["filenames"] == ["S\nT"]
    web = {"bytes": 9, "code": 200, "result": "page", "url": "u"}
    assert claude_hooks.replacement("WebFetch", web, "S")["result"] == "S"
    assert claude_hooks.replacement("Bash", "Error: Exit code 1\nboom", "S") == "S"
    blocks = [{"type": "text", "text": "a"}]
    assert claude_hooks.replacement("mcp__x__y", blocks, "S") == [{"type": "text", "text": "S"}]
    assert claude_hooks.replacement("Task", {"content": blocks}, "S") is None
    assert claude_hooks.replacement("mcp__x__y", 42, "S") is None


def test_tool_output_shapes():
    bash = tool_output("Bash", {"command": "make"}, {"stdout": "a", "stderr": "b"})
    assert (bash.text, bash.command, bash.tool) == ("a\nb", "make", None)
    assert tool_output("Bash", {}, "Error: Exit code 2\nboom").exit_code == 2
    grep = tool_output(
        "Grep", {"pattern": "x"}, {"mode": "files_with_matches", "filenames": ["a", "b"]}
    )
    assert (grep.text, grep.command) == ("a\nb", "Grep x")
    web = tool_output("WebFetch", {"url": "https://e.x"}, {"result": "page", "url": "https://e.x"})
    assert (web.text, web.command) == ("page", "WebFetch https://e.x")
    assert tool_output("Edit", {}, {"filePath": "a"}) is None
    assert tool_output("Read", {}, {"type": "image", "file": {"base64": "..."}}) is None
    assert tool_output("Bash", {}, {"stdout": "", "stderr": ""}) is None
    task = tool_output("Task", {}, {"content": [{"type": "text", "text": "report"}]})
    assert task.text == "report"
    other = tool_output("Whatever", {}, {"k": [1, 2]})
    assert json.loads(other.text) == {"k": [1, 2]}


def test_warm_server_answers_for_each_callers_project(repo, tmp_path, server_dir):
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)

    def payload(root: Path, n: int) -> dict:
        text = "\n".join(
            f"FAILED tests/test_{n}.py::test_case_{i} - AssertionError" for i in range(50)
        )
        return {
            "session_id": f"srv{n}",
            "cwd": str(root),
            "tool_name": "Bash",
            "tool_input": {"command": "pytest"},
            "tool_response": {"stdout": text, "stderr": ""},
        }

    first = payload(repo, 1)
    code, out, err = run_hook("PostToolUse", first, repo)  # answered in process; starts it
    assert code == 0, err
    wait_for_server(server_dir)
    assert list(server_dir.glob("*.pid"))
    second, third = payload(repo, 2), payload(other, 3)
    assert run_hook("PostToolUse", second, repo)[0] == 0
    assert run_hook("PostToolUse", third, other)[0] == 0
    for root, p in ((repo, first), (repo, second), (other, third)):
        text = p["tool_response"]["stdout"]
        with store_of(root) as store:
            assert store.get(entry_id(text)).original == text
    with store_of(other) as store:
        assert store.get(entry_id(first["tool_response"]["stdout"])) is None
    # the server answers exactly what the process itself would
    via_server = run_hook(
        "UserPromptSubmit",
        {"session_id": "q", "cwd": str(repo), "prompt": "why did test_case_7 fail in test_2?"},
        repo,
    )[1]
    os.environ[hook_wire.SERVER_ENV] = "0"
    try:
        alone = run_hook(
            "UserPromptSubmit",
            {"session_id": "q2", "cwd": str(repo), "prompt": "why did test_case_7 fail in test_2?"},
            repo,
        )[1]
    finally:
        del os.environ[hook_wire.SERVER_ENV]
    assert via_server and via_server == alone
    assert log_lines(repo) == [] and log_lines(other) == []


# --- bad input ---


@pytest.mark.parametrize(
    "raw, says",
    [
        (b"", "empty input"),
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not an object"),
        (b"\xff\xfe\x00garbage\x80", "not JSON"),
    ],
)
def test_bad_input_exits_0_with_one_log_line(repo, raw, says):
    code, out, err = run_hook("PostToolUse", None, repo, raw=raw)
    assert code == 0 and out == ""
    lines = log_lines(repo)
    assert len(lines) == 1 and says in lines[0]


def test_binary_tool_output_is_stored_and_exits_0(repo):
    blob = bytes(range(256)).decode("latin-1") * 64 + "\udc80\udcff"
    payload = {
        "session_id": "b1",
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": "cat /bin/ls"},
        "tool_response": {"stdout": blob, "stderr": ""},
    }
    raw = json.dumps(payload).encode("utf-8")  # lone surrogates travel as \\udc80 escapes
    code, out, err = run_hook("PostToolUse", None, repo, raw=raw)
    assert code == 0, err
    valid_hook_json(out, "PostToolUse")
    assert len(log_lines(repo)) <= 1


def test_100_mb_output_is_ignored_with_one_log_line(repo):
    payload = {
        "session_id": "h1",
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": "yes"},
        "tool_response": {"stdout": "y\n" * (50 << 20), "stderr": ""},
    }
    raw = json.dumps(payload).encode()
    assert len(raw) > 100 << 20
    code, out, err = run_hook("PostToolUse", None, repo, raw=raw)
    assert code == 0 and out == ""
    lines = log_lines(repo)
    assert len(lines) == 1 and "over" in lines[0]


def test_internal_error_is_logged_not_raised(repo, monkeypatch):
    def boom(payload):
        raise RuntimeError("kaput")

    monkeypatch.setitem(claude_hooks.HANDLERS, "SessionStart", boom)
    monkeypatch.setattr(sys, "stdin", _Stdin(json.dumps({"cwd": str(repo)}).encode()))
    assert hook_client.main(["SessionStart"]) == 0
    lines = log_lines(repo)
    assert len(lines) == 1 and "internal error RuntimeError: kaput" in lines[0]


class _Stdin:
    def __init__(self, data: bytes) -> None:
        import io

        self.buffer = io.BytesIO(data)


# --- UserPromptSubmit ---


def _usage_transcript(path: Path, used: int, model: str = "claude-sonnet-4-5") -> Path:
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 90,
        "cache_read_input_tokens": used - 100,
    }
    records = [
        {"type": "user", "message": {"role": "user", "content": "hi"}, "version": "2.1.332"},
        {"type": "assistant", "message": {"role": "assistant", "model": model, "usage": usage}},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def test_user_prompt_usage_is_the_hand_sum_of_a_real_transcript(repo):
    path = transcript(LONG)
    last = None
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("type") == "assistant" and not r.get("isSidechain"):
            u = r["message"].get("usage") or {}
            n = sum(u.get(k, 0) for k in claude_hooks_usage_keys())
            if n and r["message"].get("model") != "<synthetic>":
                last = n
        elif r.get("type") == "system" and r.get("subtype") == "compact_boundary":
            last = (r.get("compactMetadata") or {}).get("postTokens")
    payload = {"session_id": "u1", "transcript_path": str(path), "cwd": str(repo), "prompt": "ok"}
    code, out, err = run_hook("UserPromptSubmit", payload, repo)
    assert code == 0, err
    valid_hook_json(out, "UserPromptSubmit")
    from aider_gardener.clients.transcript import load_usage

    usage = load_usage(repo / ".aider.gardener")
    assert usage.used == last and usage.window == 200_000


def claude_hooks_usage_keys():
    from aider_gardener.clients.transcript import USAGE_KEYS

    return USAGE_KEYS


def test_warnings_fire_at_70_and_85_percent_once_each(repo, tmp_path):
    def ask(used: int) -> dict:
        path = _usage_transcript(tmp_path / f"t{used}.jsonl", used)
        payload = {
            "session_id": "w1",
            "transcript_path": str(path),
            "cwd": str(repo),
            "prompt": "go",
        }
        return handle("UserPromptSubmit", payload)

    assert ask(139_000) == {}  # 69.5 %
    first = ask(141_000)  # 70.5 %
    assert "70%" in first["systemMessage"] or "71%" in first["systemMessage"]
    assert "full" in first["hookSpecificOutput"]["additionalContext"]
    assert ask(150_000) == {}  # same level: said once
    crit = ask(171_000)  # 85.5 %
    assert "compact soon" in crit["systemMessage"]
    assert ask(180_000) == {}
    assert ask(100_000) == {}  # far below: rearmed
    assert "systemMessage" in ask(142_000)


def test_rag_recalls_stored_context_within_budget_and_skips_what_is_in_context(repo):
    trace = "\n".join(
        ["Traceback (most recent call last):"]
        + [f'  File "/srv/app/pipeline/stage{i}.py", line {10 + i}, in run' for i in range(40)]
        + ["KafkaOffsetOutOfRangeError: offset 991 out of range for partition orders-7"]
    )
    payload = {
        "session_id": "old-session",
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": "python -m app.consume"},
        "tool_response": {"stdout": "", "stderr": trace},
    }
    handle("PostToolUse", payload)
    eid = entry_id(trace)
    ask = {
        "session_id": "new-session",
        "cwd": str(repo),
        "prompt": "why did the consumer hit KafkaOffsetOutOfRangeError on orders-7?",
    }
    ctx = handle("UserPromptSubmit", ask)["hookSpecificOutput"]["additionalContext"]
    assert f"id={eid}" in ctx
    from aider_gardener.tokens import count_tokens

    assert count_tokens(ctx) <= claude_hooks.RAG_BUDGET
    assert handle("UserPromptSubmit", ask) == {}  # recalled once: now in context
    same = dict(ask, session_id="old-session")  # the session that stored it still holds it
    assert handle("UserPromptSubmit", same) == {}


def test_recalled_context_and_replacements_carry_no_secret(repo):
    """A key printed by a failing command stays in the store: neither the replaced output nor
    the context recalled on a later prompt gives it to the model."""
    key = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz" * 3
    trace = "\n".join(
        ["Traceback (most recent call last):"]
        + [f'  File "/srv/app/pipeline/stage{i}.py", line {10 + i}, in run' for i in range(40)]
        + [f"openai.AuthenticationError: Incorrect API key provided: {key} (orders-7)"]
    )
    payload = {
        "session_id": "old-session",
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": f"OPENAI_API_KEY={key} python -m app.consume"},
        "tool_response": {"stdout": "", "stderr": trace},
    }
    replaced = handle("PostToolUse", payload)["hookSpecificOutput"]["updatedToolOutput"]
    assert key not in json.dumps(replaced) and "orders-7" in replaced["stdout"]
    assert "Incorrect API key provided: [redacted: " in replaced["stdout"]
    assert "secrets redacted before the model saw this output" in replaced["stdout"]
    ask = {
        "session_id": "new-session",
        "cwd": str(repo),
        "prompt": "why did the consumer fail with AuthenticationError on orders-7?",
    }
    ctx = handle("UserPromptSubmit", ask)["hookSpecificOutput"]["additionalContext"]
    assert f"id={entry_id(trace)}" in ctx and "AuthenticationError" in ctx
    assert key not in ctx and "[redacted: " in ctx


# --- PreCompact / SessionStart ---


def test_pre_compact_writes_a_verified_checkpoint_and_session_start_returns_it(repo):
    path = transcript(SMALL)
    for payload in tool_payloads(path, repo):
        run_hook("PostToolUse", payload, repo)
    pre = {
        "session_id": "c64",
        "transcript_path": str(path),
        "cwd": str(repo),
        "hook_event_name": "PreCompact",
        "trigger": "auto",
        "custom_instructions": "",
    }
    code, out, err = run_hook("PreCompact", pre, repo)
    assert code == 0, err
    assert not out.lstrip().startswith("{")  # plain text: what Claude Code feeds the compaction
    assert HEADER in out and AIDER_HEADER not in out and "/recall" not in out
    folder = repo / ".aider.gardener" / "checkpoints"
    files = sorted(folder.glob("*.md"))
    assert len(files) == 1
    checkpoint = parse_checkpoint(files[0].read_text(), files[0])
    assert checkpoint.verified and checkpoint.trigger == "pressure"
    assert checkpoint.session == "claude-c64"
    assert len(checkpoint.facts) > 0
    assert any("multiply_numbers" in f.text for f in checkpoint.facts)
    assert str(files[0]) in out
    assert load_latest(folder).path == files[0]

    start = dict(pre, hook_event_name="SessionStart", source="compact")
    code, out2, err = run_hook("SessionStart", start, repo)
    assert code == 0, err
    ctx = valid_hook_json(out2, "SessionStart")["hookSpecificOutput"]["additionalContext"]
    assert ctx.startswith(HEADER)
    assert ctx.split("\n[gardener:")[0] == out.split("\n", 1)[1].split("\nFull checkpoint:")[0]

    other = dict(start, session_id="someone-else", source="startup")
    fresh = handle("SessionStart", other)  # carried facts only, or nothing
    assert fresh == {} or fresh["hookSpecificOutput"]["additionalContext"].startswith(HEADER)
    assert log_lines(repo) == []


def test_pre_compact_on_a_long_real_session_with_compactions(repo):
    path = transcript(LONG)
    pre = {
        "session_id": "long",
        "transcript_path": str(path),
        "cwd": str(repo),
        "trigger": "manual",
    }
    answer = handle("PreCompact", pre)
    checkpoint = parse_checkpoint(Path(answer["checkpoint"]).read_text())
    assert checkpoint.verified and checkpoint.trigger == "manual"
    assert checkpoint.facts.find("goal", live=False)
    assert HEADER in answer["text"]


def test_only_the_users_words_become_prompts():
    assert claude_hooks.is_prompt("fix the failing build")
    for wrapper in (
        "<command-name>/plugin</command-name>",
        "<local-command-stdout>done</local-command-stdout>",
        "[Request interrupted by user]",
        "<task-notification>x</task-notification>",
        "Caveat: The messages below were generated by the user while running local commands.",
        "",
        None,
    ):
        assert not claude_hooks.is_prompt(wrapper)


def test_checkpoint_reads_replaced_outputs_as_their_originals(repo, tmp_path):
    """Claude Code writes the replaced output to the transcript; PreCompact reads the original
    back through the id the summary cites, so the error and its id are the real ones."""
    lines = [f"[{i}/400] Building C object src/mod_{i}.c.o" for i in range(400)]
    lines.insert(200, "src/mod_199.c:12:5: error: 'tokn_kind' undeclared (first use here)")
    text = "\n".join(lines + ["ninja: build stopped: subcommand failed."])
    resp = {"stdout": text, "stderr": "", "interrupted": False, "isImage": False}
    current = tmp_path / "t.jsonl"
    current.write_text(json.dumps({"type": "user", "version": "2.1.332"}) + "\n")
    post = {
        "session_id": "r1",
        "transcript_path": str(current),
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": "ninja"},
        "tool_response": resp,
    }
    shaped = handle("PostToolUse", post)["hookSpecificOutput"]["updatedToolOutput"]
    assert "tokn_kind" in shaped["stdout"] and len(shaped["stdout"]) < len(text) / 2
    records = [
        {"type": "user", "message": {"role": "user", "content": "build it"}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ninja"}}
                ],
            },
        },
        {
            "type": "user",
            "toolUseResult": shaped,
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": shaped["stdout"],
                        "is_error": True,
                    }
                ],
            },
        },
    ]
    current.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    answer = handle("PreCompact", dict(post, trigger="auto"))
    checkpoint = parse_checkpoint(Path(answer["checkpoint"]).read_text())
    errors = [f for f in checkpoint.facts if f.kind == "error"]
    assert any("tokn_kind" in f.text for f in errors)
    assert f"expand {entry_id(text)}" in answer["text"] and "/recall" not in answer["text"]
    assert f"/recall {entry_id(text)}" in Path(answer["checkpoint"]).read_text()  # parsed back


def test_session_start_without_checkpoints_says_nothing(repo):
    for source in ("startup", "resume", "compact", "clear"):
        code, out, err = run_hook(
            "SessionStart", {"session_id": "x", "cwd": str(repo), "source": source}, repo
        )
        assert code == 0 and out == "", err


def test_unknown_event_is_ignored(repo):
    code, out, err = run_hook("Notification", {"session_id": "x", "cwd": str(repo)}, repo)
    assert code == 0 and out == ""


# --- speed (measured, not asserted) ---


@pytest.mark.skipif(
    not os.environ.get("GARDENER_MEASURE_HOOKS"), reason="set GARDENER_MEASURE_HOOKS=1"
)
def test_measure_post_tool_use_p95(repo, server_dir, capsys):
    """PostToolUse wall time over the 20 largest real outputs of a session, side by side: the
    console script as a subprocess (what Claude Code waits for) answered by the warm server,
    the same with the server off (GARDENER_HOOKD=0), and ``handle`` in process. Printed, never
    asserted. Every call stores a new entry (the store is emptied between calls)."""
    payloads = [
        p
        for p in tool_payloads(transcript(BIG_OUTPUTS), repo)
        if tool_output(p["tool_name"], p["tool_input"], p["tool_response"]) is not None
    ]
    payloads = sorted(payloads, key=lambda p: -len(json.dumps(p)))[:20]
    run_hook("PostToolUse", payloads[-1], repo)  # starts the server
    wait_for_server(server_dir)
    time.sleep(3)  # its warm-up
    pid = int(next(server_dir.glob("*.pid")).read_text())
    names = ("server", "no server", "in process")
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}

    def server_cpu() -> float:
        """The server's and its ended children's (one per request, reaped within 0.1 s)."""
        time.sleep(0.3)
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    for n, payload in enumerate(payloads):
        for name in names:
            shutil.rmtree(repo / ".aider.gardener", ignore_errors=True)
            p = dict(payload, session_id=f"{name}{n}")
            c0, s0, p0 = children_cpu(), server_cpu(), time.process_time()
            t = time.perf_counter()
            if name == "in process":
                handle("PostToolUse", p)
            else:
                if name == "no server":
                    os.environ[hook_wire.SERVER_ENV] = "0"
                try:
                    run_hook("PostToolUse", p, repo)
                finally:
                    os.environ.pop(hook_wire.SERVER_ENV, None)
            times[name].append(time.perf_counter() - t)
            if name == "in process":
                cpu[name].append(time.process_time() - p0)
            else:
                cpu[name].append(children_cpu() - c0 + server_cpu() - s0)

    def q(xs, p):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))] * 1000

    sizes = sorted(len(json.dumps(p)) for p in payloads)
    with capsys.disabled():
        print(f"\nPostToolUse n={len(payloads)} payloads {sizes[0]:,}-{sizes[-1]:,} B")
        for name, xs in times.items():
            print(
                f"  {name:10s} wall median {q(xs, .5):5.0f} ms p95 {q(xs, .95):5.0f} ms;"
                f" CPU median {q(cpu[name], .5):5.0f} ms p95 {q(cpu[name], .95):5.0f} ms"
            )
        print(f"  load average {os.getloadavg()}")


# --- the conversation: prompts and replies ---


def _text_record(text: str, mid: str, uuid: str, **extra) -> dict:
    return {
        "type": "assistant",
        "uuid": uuid,
        "message": {
            "id": mid,
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": text}],
        },
        **extra,
    }


def _append(path: Path, *records: dict) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record) + "\n")


def _conversation(root: Path) -> list[tuple]:
    """(id, cls, original, context) of the store's prompts and replies, in ingest order."""
    import sqlite3

    with sqlite3.connect(root / ".aider.gardener" / "store.sqlite") as c:
        return c.execute(
            "SELECT id, cls, original, context FROM entries WHERE cls IN ('prompt', 'prose')"
            " ORDER BY seq"
        ).fetchall()


DECISION = (
    "We decided: the billing ledger stays in PostgreSQL 16 behind pgbouncer, never SQLite,"
    " and every migration goes through alembic."
)
REPLY_1 = (
    "Done. The ledger now talks to PostgreSQL 16 through pgbouncer in transaction mode.\n"
    "I removed the SQLite fallback from billing/ledger.py and added an alembic revision."
)
REPLY_2 = "Both migrations apply cleanly:\n- 0007_invoices\n- 0008_ledger_index"


def test_prompts_and_replies_are_stored_with_the_turn_they_answer(repo, tmp_path):
    """A synthetic session: the replies after a tool output are indexed with the prompt they
    answer (the store alone would see the tool output as their previous entry); fillers,
    subagent messages and tool-call-only messages are not stored; Stop stores the final reply
    the transcript does not hold yet, and the next prompt does not store it again."""
    t = tmp_path / "session.jsonl"
    t.write_text("")
    base = {"session_id": "conv", "cwd": str(repo), "transcript_path": str(t)}
    handle("UserPromptSubmit", dict(base, prompt=DECISION))
    _append(
        t,
        {"type": "user", "message": {"role": "user", "content": DECISION}},
        _text_record("Let me look at the ledger first.", "m1", "u1"),  # a filler
        {
            "type": "assistant",
            "uuid": "u2",
            "message": {
                "id": "m1",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
                ],
            },
        },
        _text_record("A subagent's long report that is not the main thread's reply.", "s", "u3")
        | {"isSidechain": True},
    )
    listing = "\n".join(f"billing/migrations/{i:04d}_step.py" for i in range(60))
    handle(
        "PostToolUse",
        dict(
            base,
            tool_name="Bash",
            tool_input={"command": "ls billing/migrations"},
            tool_response={"stdout": listing, "stderr": ""},
        ),
    )
    _append(t, _text_record(REPLY_1, "m2", "u4"))
    handle("Stop", dict(base, last_assistant_message=REPLY_1))
    handle("UserPromptSubmit", dict(base, prompt="now add the invoices migration"))
    _append(
        t,
        {"type": "user", "message": {"role": "user", "content": "now add the invoices migration"}},
    )
    handle("Stop", dict(base, last_assistant_message=REPLY_2))  # not in the transcript yet
    _append(t, _text_record(REPLY_2, "m3", "u5"))  # written after Stop ran
    handle("UserPromptSubmit", dict(base, prompt="/compact"))  # a command: not stored

    rows = _conversation(repo)
    assert [(r[1], r[2]) for r in rows] == [
        ("prompt", DECISION),
        ("prose", REPLY_1),
        ("prompt", "now add the invoices migration"),
        ("prose", REPLY_2),
    ]
    assert rows[0][3] == ""  # the session's first turn answers nothing
    assert rows[1][3] == f"(in reply to: {DECISION})"
    assert rows[2][3] == f"(in reply to: {REPLY_1})"
    assert rows[3][3] == "(in reply to: now add the invoices migration)"
    state = json.loads((repo / ".aider.gardener" / "claude" / "claude-conv.json").read_text())
    assert state["conv_offset"] == t.stat().st_size  # the next call reads only what is new

    # a later session: the decision comes back with the prompt that stated it
    ask = dict(base, session_id="later", prompt="which database did we choose for the ledger?")
    ctx = handle("UserPromptSubmit", ask)["hookSpecificOutput"]["additionalContext"]
    assert f"id={rows[0][0]} (prompt)" in ctx and DECISION in ctx


def test_a_compaction_makes_the_sessions_own_prompts_recallable(repo, tmp_path):
    """Within the session the prompt is in context (not offered again); after PreCompact it is
    not, and recall finds it; replies written before the compaction are stored by it."""
    t = tmp_path / "s.jsonl"
    t.write_text("")
    base = {"session_id": "cmp", "cwd": str(repo), "transcript_path": str(t)}
    handle("UserPromptSubmit", dict(base, prompt=DECISION))
    _append(t, _text_record(REPLY_1, "m1", "u1"))
    question = dict(base, prompt="remind me which database the ledger must use")
    assert "additionalContext" not in (handle("UserPromptSubmit", question) or {}).get(
        "hookSpecificOutput", {}
    )
    _append(t, _text_record(REPLY_2, "m2", "u2"))
    handle("PreCompact", dict(base, trigger="auto"))
    assert REPLY_2 in [r[2] for r in _conversation(repo)]  # stored before the compaction
    ctx = handle("UserPromptSubmit", question)["hookSpecificOutput"]["additionalContext"]
    assert DECISION in ctx


REPLAYED = "cc_session__Eduardodmb-ClaudeWork__a572bd87.jsonl"  # 27 prompts, 2.1.x


def _prompt_text(record: dict) -> str | None:
    if record.get("type") != "user" or record.get("isSidechain") or record.get("isMeta"):
        return None
    if record.get("isCompactSummary"):
        return None
    content = (record.get("message") or {}).get("content")
    if isinstance(content, str):
        return content if claude_hooks.is_prompt(content) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text":
            if claude_hooks.is_prompt(block.get("text")):
                return block["text"]
    return None


def test_real_session_replayed_through_the_script_recalls_an_earlier_decision(repo, tmp_path):
    """A real session, replayed as Claude Code would run the hooks: its transcript written line
    by line into a temp file, each tool result through PostToolUse (in process), Stop at each
    turn's end and UserPromptSubmit at each prompt through the real ``gardener-hook``. Every
    prompt and every main-thread reply (fillers aside) is stored byte-exact, and a new session
    asking where the Docker configuration lives gets the prompt that said so."""
    source = transcript(REPLAYED)
    lines = source.read_text(encoding="utf-8").splitlines(True)
    live = tmp_path / "live.jsonl"
    live.write_text("")
    base = {"session_id": "replay", "cwd": str(repo), "transcript_path": str(live)}
    posts = {p["tool_use_id"]: p for p in tool_payloads(source, repo)}
    prompts, replies, last = [], [], None
    for line in lines:
        record = json.loads(line)
        prompt = _prompt_text(record)
        if prompt is not None:
            if last is not None:
                code, out, err = run_hook("Stop", dict(base, last_assistant_message=last), repo)
                assert code == 0 and out == "", err
            code, out, err = run_hook("UserPromptSubmit", dict(base, prompt=prompt), repo)
            assert code == 0, err
            valid_hook_json(out, "UserPromptSubmit")
            prompts.append(prompt.strip())
            last = None
        reply = claude_hooks_reply(record)
        if reply is not None:
            last = reply
            if not claude_hooks._is_filler(reply):
                replies.append(reply)
        for block in (record.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                post = posts.get(block.get("tool_use_id"))
                if post is not None:
                    handle("PostToolUse", dict(post, session_id="replay"))
        with open(live, "a", encoding="utf-8") as fh:
            fh.write(line)
    if last is not None:
        assert run_hook("Stop", dict(base, last_assistant_message=last), repo)[0] == 0
    settled(repo, "replay")  # the server stores the last replies after Stop's answer
    assert len(prompts) >= 20 and len(replies) >= 50
    stored = {(cls, text) for _, cls, text, _ in _conversation(repo)}
    assert {("prompt", p) for p in prompts} <= stored
    with store_of(repo) as store:
        missing = [t for t in replies if store.get(entry_id(t)) is None]
        assert missing == []  # byte-exact: the id is the text's hash
        prose = [t for t in replies if store.get(entry_id(t)).cls == "prose"]
    assert len(prose) >= 0.8 * len(replies)
    with_context = [r for r in _conversation(repo) if r[1] == "prose" and r[3]]
    assert len(with_context) >= 0.8 * len(prose)  # tool outputs came in between: named anyway

    said = next(p for p in prompts if "Odoo_Docker" in p)
    ask = {
        "session_id": "next-day",
        "cwd": str(repo),
        "transcript_path": str(tmp_path / "none.jsonl"),
        "prompt": "where is the docker configuration for odoo defined?",
    }
    code, out, err = run_hook("UserPromptSubmit", ask, repo)
    assert code == 0, err
    ctx = valid_hook_json(out, "UserPromptSubmit")["hookSpecificOutput"]["additionalContext"]
    assert f"id={entry_id(said)} (prompt)" in ctx
    assert log_lines(repo) == []


def claude_hooks_reply(record: dict) -> str | None:
    from aider_gardener.clients.transcript import _reply_of

    reply = _reply_of(record) if isinstance(record, dict) else None
    return reply.text if reply else None


def test_state_block_wording_follows_the_client():
    """Aider's block is unchanged (``/recall``); Claude Code's names the gardener's tools, in
    the header and in every line, dropped lines' notes included; the facts are the same."""
    from aider_gardener.continuity.facts import FactBook
    from aider_gardener.continuity.state import AIDER_RECALL, render_state
    from aider_gardener.continuity.tracker import FactTracker

    tracker = FactTracker(FactBook())
    tracker.on_prompt("Fix the flaky ledger test; never touch the public API.", 1)
    for n in range(30):
        tracker.on_output(
            f"pytest tests/test_ledger_{n}.py",
            f"FAILED tests/test_ledger_{n}.py::test_balance - AssertionError: {n} != 0\n",
            n + 2,
            f"id{n:08d}",
            exit_code=1,
        )
    book = tracker.book
    for budget in (10_000, 300):
        aider = render_state(book, max_tokens=budget, model="gpt-4o")
        assert aider == render_state(book, max_tokens=budget, model="gpt-4o", recall=AIDER_RECALL)
        assert aider.startswith("Session state kept by aider-gardener (details: /recall ID):\n")
        tools = render_state(book, max_tokens=budget, model="gpt-4o", recall=TOOLS_RECALL)
        assert tools.startswith(HEADER + "\n") and "/recall" not in tools
        assert "expand id00000029" in tools  # the newest: kept in both
        if budget == 10_000:  # all fits: the same block, in other words
            translated = aider.replace(AIDER_HEADER, HEADER).replace("/recall", "expand")
            assert translated == tools and "more" not in tools
        else:  # lines dropped: the note says how to get them back
            assert "more commands: /recall <query>" in aider
            assert "more commands: recall <query>" in tools


# --- the warm server's exit ---


@pytest.mark.parametrize("how", ["removed", "taken"])
def test_warm_server_exits_once_its_socket_is_removed_or_taken(tmp_path, server_dir, how):
    """Every ``GARDENER_HOOKD_CHECK`` seconds (30 by default) the server checks that its socket
    is still its own: removed (the folder cleaned) or taken by another server, it exits and
    leaves another server's socket in place."""
    sock = server_dir / "hookd-test.sock"
    env = dict(os.environ, GARDENER_HOOKD_CHECK="0.5")
    proc = subprocess.Popen(
        [sys.executable, "-m", "aider_gardener.clients.claude_hooks", "--serve", str(sock)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_server(server_dir)
        assert proc.poll() is None
        sock.unlink()
        if how == "taken":
            sock.write_text("another server's")
        # 0.5 s checks: well within this; the 30 s default would not be
        assert proc.wait(timeout=20) == 0, proc.stderr.read().decode()
        assert sock.exists() == (how == "taken")
        assert not Path(f"{sock}.pid").exists()  # it named this server: gone with it
    finally:
        Path(f"{sock}.pid").unlink(missing_ok=True)  # the fixture must not signal a dead pid
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_warm_server_removes_its_files_on_sigterm(server_dir):
    sock = server_dir / "hookd-term.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "aider_gardener.clients.claude_hooks", "--serve", str(sock)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_server(server_dir)
        deadline = time.monotonic() + 30
        while not Path(f"{sock}.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, proc.stderr.read().decode()
        assert not sock.exists() and not Path(f"{sock}.pid").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- reading only what it should; a server that cannot be wedged ---


@pytest.fixture
def hook_server(server_dir):
    """A warm hook server of this test's own: a real subprocess on a real socket, ready (its
    pid file is written once it listens) and warm, and stopped at the end.

    Warm, because a request's child ends itself once its client has stopped waiting (10 s, a
    third of the hook's timeout), and a child forked before the warm-up is done loads the store
    for itself: on a busy machine that outlasted the 10 s and the test saw no answer. The
    warm-up answers its requests in a scratch folder of the server's temp folder (private here)
    and removes it when done: that folder coming and going is the event waited for."""
    sock = server_dir / "hookd-own.sock"
    scratch = server_dir / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "aider_gardener.clients.claude_hooks", "--serve", str(sock)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, TMPDIR=str(scratch)),
    )
    try:
        deadline = time.monotonic() + 300  # a bound on the waits, not a speed test
        while not Path(f"{sock}.pid").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "no hook server"
            time.sleep(0.05)
        seen = False
        while True:
            warming = any(scratch.glob("gardener-warm-up-*"))
            if seen and not warming:
                break
            seen = seen or warming
            assert proc.poll() is None, "the hook server exited"
            assert time.monotonic() < deadline, "the hook server did not finish its warm-up"
            time.sleep(0.01)
        yield sock
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ask_within(sock: Path, event: str, payload: dict, seconds: float = 120) -> str | None:
    """The server's reply through the hooks' own client (None: it answered nothing), failing
    the test when the client is still waiting after ``seconds``. The client waits that long
    too: its own patience (a third of the hook's timeout, 10 s) is a production setting, and a
    server that is not wedged may need longer than that on a busy machine."""
    from unittest import mock

    got: dict = {}

    def ask() -> None:
        got["reply"] = hook_wire.ask_server(sock, event, json.dumps(payload).encode())

    with mock.patch.object(hook_wire, "reply_wait", lambda event: seconds):
        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        asker.join(seconds + 10)
    assert not asker.is_alive(), f"no answer to {event} within {seconds} s"
    return got["reply"]


def bash_payload(root: Path, n: int, lines: int = 50) -> dict:
    text = "\n".join(
        f"FAILED tests/test_{n}.py::test_case_{i} - AssertionError" for i in range(lines)
    )
    return {
        "session_id": f"b{n}",
        "cwd": str(root),
        "tool_name": "Bash",
        "tool_input": {"command": "pytest"},
        "tool_response": {"stdout": text, "stderr": "", "interrupted": False},
    }


def test_a_fifo_as_transcript_is_not_read_and_wedges_no_server(repo, tmp_path, hook_server):
    """A FIFO at ``transcript_path`` blocked the server's read for good, and with it every
    later hook of every session."""
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    payload = {
        "session_id": "f1",
        "transcript_path": str(fifo),
        "cwd": str(repo),
        "prompt": "why does the build fail on the tokenizer?",
    }
    assert ask_within(hook_server, "UserPromptSubmit", payload) is not None
    (line,) = log_lines(repo)
    assert str(fifo) in line and "not a regular file" in line
    after = bash_payload(repo, 1)
    assert ask_within(hook_server, "PostToolUse", after) is not None
    with store_of(repo) as store:
        text = after["tool_response"]["stdout"]
        assert store.get(entry_id(text)).original == text


def test_readers_give_nothing_for_a_fifo_rather_than_block(repo, tmp_path):
    """What passed the check at the door may be a FIFO by the time it is opened: the readers
    check the file they opened, and a FIFO gives them nothing instead of blocking them."""
    fifo = tmp_path / "swapped.jsonl"
    os.mkfifo(fifo)
    _, results = claude_session(Path(os.environ["HOME"]))
    os.mkfifo(results / "b2.txt")
    got: dict = {}

    def read() -> None:
        got["version"] = claude_hooks.claude_version(str(fifo))
        got["facts"] = len(claude_hooks.facts_from_transcript(str(fifo), repo).book)
        resp = cut_bash("cut", str(results / "b2.txt"))
        got["output"] = tool_output("Bash", {}, resp, tool_results=results).text

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(120)  # a blocked reader never returns: any bound tells them apart
    assert not reader.is_alive(), "a reader blocked on a FIFO"
    assert got == {"version": None, "facts": 0, "output": "cut"}


def test_a_project_the_user_cannot_write_gets_no_store(repo, monkeypatch):
    """Someone else's repository (a folder without write permission; as root, where that does
    not stop writes, one owned by another user): no store is made there, the hook answers
    nothing and says why in the user's own log."""
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    payload = bash_payload(repo, 2, lines=3000)  # big enough for an answer (a note) elsewhere
    info = repo.stat()
    os.chmod(repo, 0o555)
    if os.getuid() == 0:
        os.chown(repo, 65534, 65534)
    try:
        code, out, err = run_hook("PostToolUse", payload, repo)
    finally:
        os.chown(repo, info.st_uid, info.st_gid)
        os.chmod(repo, 0o755)
    assert code == 0 and out == "", err
    assert not (repo / ".aider.gardener").exists()
    user_log = Path(os.environ["HOME"]) / ".local" / "state" / "aider-gardener" / "hooks.log"
    (line,) = user_log.read_text().splitlines()
    assert str(repo) in line and "PostToolUse" in line


def test_a_stalled_request_does_not_hold_up_the_next(repo, hook_server):
    """A client that sends half a request and stops: the next request is answered at once, and
    the server drops the stalled one by itself (its reads have a timeout)."""
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stalled.connect(str(hook_server))
    stalled.sendall(b'{"event": "PostToolUse", "cwd"')
    try:
        payload = bash_payload(repo, 3)
        assert ask_within(hook_server, "PostToolUse", payload) is not None
        with store_of(repo) as store:
            text = payload["tool_response"]["stdout"]
            assert store.get(entry_id(text)).original == text
        stalled.settimeout(120)  # the server's own timeout is 5 s: a bound, not a speed test
        assert stalled.recv(100) == b""  # closed, no answer
    finally:
        stalled.close()


def hook_timeouts() -> dict[str, float]:
    data = json.loads(
        Path(claude_hooks.__file__)
        .with_name("claude_plugin")
        .joinpath("hooks", "hooks.json")
        .read_text()
    )
    return {
        event: min(h["timeout"] for group in groups for h in group["hooks"])
        for event, groups in data["hooks"].items()
    }


def test_the_client_waits_at_most_a_third_of_its_hooks_timeout():
    timeouts = hook_timeouts()
    assert set(timeouts) == set(claude_hooks.EVENTS)
    for event, timeout in timeouts.items():
        assert 0 < hook_wire.reply_wait(event) <= timeout / 3, event
    assert hook_wire.reply_wait("") <= min(timeouts.values()) / 3


def test_the_hook_answers_in_process_when_its_server_does_not(repo, server_dir):
    """A server that takes the request and never answers (a real socket where the hook looks
    for its own): the hook gives up on it in time and answers in process, within the timeout
    Claude Code gives it in hooks.json."""
    path = hook_wire.server_path()
    Path(f"{path}.spawned").touch()  # no other server is started for this one's socket
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    taken: list = []

    def hold() -> None:
        while True:
            try:
                taken.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=hold, daemon=True).start()
    payload = bash_payload(repo, 4, lines=3000)
    try:
        code, out, err = run_hook(
            "PostToolUse", payload, repo, timeout=hook_timeouts()["PostToolUse"]
        )
    finally:
        listener.close()
        for conn in taken:
            conn.close()
    assert taken, "the hook never asked the server"
    assert code == 0, err
    spec = valid_hook_json(out, "PostToolUse")["hookSpecificOutput"]
    text = payload["tool_response"]["stdout"]
    # over Bash's 30,000 characters, so replaced by its summary fitted to the limit (issue 22)
    assert f"[full output stored: id={entry_id(text)}]" in json.dumps(spec)
    with store_of(repo) as store:
        assert store.get(entry_id(text)).original == text


def test_a_big_output_is_replaced_by_a_summary_without_its_key(repo):
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    out = "".join(f"INFO synced row {i} of the mirror\n" for i in range(4000))
    out += f"ERROR push refused: remote https://{token}@github.com/acme/app rejected the ref\n"
    payload = {
        "session_id": "s1",
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": "./mirror.sh"},
        "tool_response": {"stdout": out, "stderr": ""},
    }
    replaced = handle("PostToolUse", payload)["hookSpecificOutput"]["updatedToolOutput"]
    assert "ERROR push refused" in replaced["stdout"] and len(replaced["stdout"]) < len(out) / 10
    assert token not in replaced["stdout"] and "[redacted: " in replaced["stdout"]


# --- issue 22: Claude Code's limits, failures, Read (points 1, 2, 7) ---

import re  # noqa: E402

from aider_gardener import critical as facts_mod  # noqa: E402
from aider_gardener.clients import claude_read  # noqa: E402
from aider_gardener.clients import fit as fit_mod  # noqa: E402
from aider_gardener.tokens import count_tokens  # noqa: E402
from tests.conftest import TOOL_OUTPUTS, TOOL_OUTPUTS_MORE  # noqa: E402

PLUGIN_DIR = Path(claude_hooks.__file__).resolve().parent / "claude_plugin"
NPM_E403 = TOOL_OUTPUTS_MORE / "npm_debug_publish_E403_node_stack__mineral-loader.log"


def shared_output(path: Path) -> str:
    if not path.is_file():
        pytest.skip(f"shared tool output not found: {path}")
    return path.read_text(encoding="utf-8", errors="replace")


def current_cli_transcript(tmp_path: Path) -> str:
    path = tmp_path / "current.jsonl"
    path.write_text(json.dumps({"type": "user", "version": "2.1.332"}) + "\n")
    return str(path)


def named_facts(found: dict) -> dict:
    """The facts a reader acts on by name: all kinds but locations."""
    return {k: v for k, v in found.items() if k not in ("path_lines", "frames")}


def test_a_summary_over_claude_codes_bash_limit_is_fitted_with_its_facts_and_id(repo, tmp_path):
    """A Django log whose summary (42 KB) is over Bash's 30,000 characters: Claude Code would
    show the model a 2 KB preview of it. The replacement fits the summary budget and the limit
    with a margin, starts with the id and the expand/recall tools, and keeps every named fact
    (exceptions, codes); the locations that did not fit are counted in its last line."""
    log = shared_output(TOOL_OUTPUTS_MORE / "django_runserver_log_tracebacks__nopayloaddb.log")
    payload = {
        "session_id": "f1",
        "transcript_path": current_cli_transcript(tmp_path),
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": "cat server.log"},
        "tool_response": {"stdout": log, "stderr": "", "interrupted": False, "isImage": False},
    }
    seen = handle("PostToolUse", payload)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    eid = entry_id(log)
    assert fit_mod.js_length(seen) <= fit_mod.room(fit_mod.BASH_LIMIT)
    assert count_tokens(seen) <= fit_mod.SUMMARY_TOKENS
    first, *_, last = seen.splitlines()
    assert first.startswith(f"[full output stored: id={eid}] ")
    assert f"{claude_hooks.GARDENER_TOOL}expand" in first and f'"id": "{eid}"' in first
    found = facts_mod.extract(log)
    assert facts_mod.missing(log, seen, named_facts(found)) == {}
    gone = facts_mod.missing(log, seen, found)
    if gone:
        assert "with facts not shown here" in last
    with store_of(repo) as store:
        assert store.get(eid).original == log


def test_facts_that_do_not_fit_keep_the_distinct_ones_and_say_how_many_more():
    """A build log with 302 distinct ``path:line`` warnings and 18 error codes: 2,000 tokens hold
    every code (each once, as the line first showing it) and as many locations as fit; the last
    line says how many summary lines with facts were left out."""
    log = shared_output(TOOL_OUTPUTS / "c_build_log__minix.log")
    from aider_gardener.pipeline import compress

    summary = compress(log).summary
    found = facts_mod.extract(log)
    head = "[full output stored: id=aaaaaaaaaa] head"
    done = fit_mod.fit(summary, head, 2000, 24_000, fit_mod.fact_keys(found))
    assert done.tokens <= 2000 and done.text.startswith(head + "\n")
    assert facts_mod.missing(log, done.text, named_facts(found)) == {}
    assert facts_mod.missing(log, done.text, found)  # the locations do not all fit
    m = re.search(r"\[gardener: ([\d,]+) more summary lines, ([\d,]+) with facts", done.text)
    assert m and int(m.group(2).replace(",", "")) > 0
    assert done.fact_lines_kept < done.fact_lines
    # the folded template counts by its count: the summary's [×N] lines weigh N
    assert done.fact_lines > summary.count("\n[×")


def test_a_summary_that_fits_is_passed_whole():
    summary = "line one\nERROR boom in app.py:3\n[full output stored: id=bbbbbbbbbb]\n"
    done = fit_mod.fit(summary, "HEAD", 2000, 24_000)
    assert done.text == "HEAD\nline one\nERROR boom in app.py:3"
    assert done.kept == done.lines == 2


@pytest.mark.parametrize(
    "setting,limit", [(None, 30_000), (8_000, 8_000), (1_000, 4_000), (999_999, 128_000)]
)
def test_bash_limit_follows_claude_codes_setting(repo, setting, limit):
    if setting is not None:
        settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps({"bashOutputMaxChars": setting}))
    assert fit_mod.char_limit("Bash", str(repo)) == limit
    assert fit_mod.char_limit("Grep", str(repo)) == 20_000
    assert fit_mod.char_limit("Read", str(repo)) is None


def test_a_lowered_bash_limit_shrinks_the_replacement(repo, tmp_path):
    settings = repo / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"bashOutputMaxChars": 4_000}))
    log = "".join(
        f"2026-01-02 10:{i % 60:02d}:00 ERROR worker-{i}: job {i} failed: KeyError: 'k{i}'\n"
        for i in range(600)
    )
    payload = {
        "session_id": "f2",
        "transcript_path": current_cli_transcript(tmp_path),
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": "./jobs"},
        "tool_response": {"stdout": log, "stderr": ""},
    }
    seen = handle("PostToolUse", payload)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert fit_mod.js_length(seen) <= fit_mod.room(4_000)
    assert seen.startswith(f"[full output stored: id={entry_id(log)}] ")


def run_payload(session: str, repo: Path, tmp_path: Path, command: str, stdout: str, **resp):
    """A PostToolUse payload of a Bash call, as Claude Code 2.1.332 sends it."""
    return {
        "session_id": session,
        "transcript_path": current_cli_transcript(tmp_path),
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_response": {"stdout": stdout, "stderr": "", **resp},
    }


def test_names_folded_in_a_summary_come_back_within_the_budget(repo, tmp_path):
    """``unzip`` of 700 files: the log summary folds them to ``[×700] inflating: <*>``, where
    the agent's next command needs one of them. The replacement names as many as the summary
    budget holds, by folder, and how to get the rest; it still saves more than half. The path
    Claude Code saved the whole output to (outside this session's folder: not read) is named in
    the first line, since the replaced result no longer says it."""
    files = [f"magisk_work/assets/part{i % 9}/file_{i:03d}.sh" for i in range(700)]
    out = "Archive:  magisk.apk\n" + "".join(f"  inflating: {f}  \n" for f in files) + "done"
    saved = str(tmp_path / "elsewhere" / "tool-results" / "b1.txt")
    payload = run_payload(
        "u1", repo, tmp_path, "unzip -o magisk.apk -d magisk_work", out, persistedOutputPath=saved
    )
    seen = handle("PostToolUse", payload)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    first = seen.split("\n", 1)[0]
    assert first.startswith(f"[full output stored: id={entry_id(out)}] ")
    assert f"(Claude Code saved it too: {saved})" in first
    shown = [f for f in files if f.rsplit("/", 1)[1] in seen]
    assert len(shown) >= 100  # the summary alone named none of them
    assert "  magisk_work/assets/part0/: file_000.sh, file_009.sh, file_018.sh" in seen
    more = re.search(r"^  … ([\d,]+) more \(([^)]*)\) \(all: (\S+)expand", seen, re.M)
    assert more and int(more.group(1).replace(",", "")) == 700 - len(shown)
    assert more.group(3) == claude_hooks.GARDENER_TOOL
    assert "magisk_work/assets/part8/ " in more.group(2)  # the last folder, named with its count
    assert count_tokens(seen) <= min(fit_mod.SUMMARY_TOKENS, count_tokens(out) / 2)


def test_a_failure_giving_names_back_leaves_the_folded_summary(repo, tmp_path, monkeypatch):
    from aider_gardener.compress import unfold

    def broken(*args, **kwargs):
        raise RecursionError("a template nobody foresaw")

    monkeypatch.setattr(unfold, "unfold", broken)
    out = "Archive:  a.apk\n" + "".join(
        f"  inflating: w/p{i % 5}/f_{i:03d}.sh  \n" for i in range(700)
    )
    payload = run_payload("u3", repo, tmp_path, "unzip a.apk", out)
    seen = handle("PostToolUse", payload)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert seen.startswith(f"[full output stored: id={entry_id(out)}] ")
    assert "[×700]   inflating: w/p<n>/f_<n>.sh" in seen and "f_001.sh" not in seen


def test_rows_a_small_summary_folded_come_back_whole(repo, tmp_path):
    """A failed Odoo install (its bad query clipped in the summary) whose 12 failing rows the
    log summary folds into one template: the budget holds them all, so the replacement shows
    them as printed."""
    rows = [
        f"('search_leads', 'access_rule_{i:02d}_user', 'ir.model.access', {2204 + i}, False)"
        for i in range(12)
    ]
    query = ", ".join(f"('search_leads','access_rule_{i:02d}_user',{2204 + i})" for i in range(80))
    log = "\n".join(
        [
            "2026-05-05 23:09:16,886 1214 INFO odoo18 odoo.modules.loading: Loading module"
            " search_leads (227/227)",
            f'2026-05-05 23:09:20,504 1214 ERROR odoo18 odoo.sql_db: bad query: b"INSERT INTO'
            f' ir_model_data VALUES {query}"',
            "ERROR: ON CONFLICT DO UPDATE command cannot affect row a second time",
            "2026-05-05 23:09:20,504 1214 ERROR odoo18 odoo.addons.base.models.ir_model: Failed"
            " to insert ir_model_data",
            *rows,
        ]
    )
    payload = run_payload("u2", repo, tmp_path, "odoo -i search_leads", log)
    seen = handle("PostToolUse", payload)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert "[×" not in seen and "saved it too" not in seen
    assert all(row in seen.split("\n") for row in rows)
    assert count_tokens(seen) <= count_tokens(log) / 2


def test_mcp_limit_follows_max_mcp_output_tokens(monkeypatch):
    assert fit_mod.char_limit("mcp__x__y") == 50_000
    monkeypatch.setenv("MAX_MCP_OUTPUT_TOKENS", "5000")
    assert fit_mod.char_limit("mcp__x__y") == 20_000


def test_the_gardener_tool_names_are_the_plugins():
    """The first line names the tools as Claude Code names a plugin's MCP tools."""
    plugin = json.loads((PLUGIN_DIR / ".claude-plugin" / "plugin.json").read_text())["name"]
    (server,) = json.loads((PLUGIN_DIR / ".mcp.json").read_text())["mcpServers"]
    assert claude_hooks.GARDENER_TOOL == f"mcp__plugin_{plugin}_{server}__"


def failure_payload(repo: Path, error: str, command: str = "cat npm-debug.log; exit 1") -> dict:
    return {
        "session_id": "pf1",
        "cwd": str(repo),
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "publish"},
        "tool_use_id": "toolu_1",
        "error": error,
        "is_interrupt": False,
    }


def test_post_tool_use_failure_stores_the_output_and_adds_its_summary(repo):
    """2.1.332 sends a command that exits non-zero to PostToolUseFailure with ``error`` = "Exit
    code 1" and the output. It is stored (the same id as from the transcript's "Error: Exit
    code 1" record) and its summary, with its facts and the id, is added beside it."""
    npm = shared_output(NPM_E403).rstrip("\n")
    code, out, err = run_hook(
        "PostToolUseFailure", failure_payload(repo, "Exit code 1\n" + npm), repo
    )
    assert code == 0, err
    spec = json.loads(out)["hookSpecificOutput"]
    assert set(spec) == {"hookEventName", "additionalContext"}
    assert spec["hookEventName"] == "PostToolUseFailure"
    context = spec["additionalContext"]
    assert context.startswith(f"[full output stored: id={entry_id(npm)}] ")
    assert facts_mod.missing(npm, context) == {}
    assert count_tokens(context) <= count_tokens(npm) / 2
    assert len(context) <= fit_mod.room(fit_mod.CONTEXT_LIMIT)
    with store_of(repo) as store:
        entry = store.get(entry_id(npm))
        assert entry.original == npm and entry.command == "cat npm-debug.log; exit 1"
    recorded = tool_output("Bash", {}, "Error: Exit code 1\n" + npm)  # the transcript's record
    assert (recorded.text, recorded.exit_code) == (npm, 1)
    assert log_lines(repo) == []


def test_a_small_failure_is_stored_without_an_answer_and_other_tools_are_left_out(repo):
    code, out, err = run_hook(
        "PostToolUseFailure", failure_payload(repo, "Exit code 2\nmake: *** [all] Error 2"), repo
    )
    assert (code, out) == (0, ""), err
    with store_of(repo) as store:
        assert store.get(entry_id("make: *** [all] Error 2")) is not None
    read = dict(failure_payload(repo, "File content (281.1KB) exceeds maximum allowed size"))
    read["tool_name"] = "Read"  # Claude Code's words about the call, not a file's content
    assert handle("PostToolUseFailure", read) == {}
    with store_of(repo) as store:
        assert store.get(entry_id(read["error"])) is None


def test_a_failures_summary_carries_no_secret(repo):
    key = "sk-proj-" + "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1" * 3
    lines = [f"deploy step {i}: uploading chunk {i} of 900" for i in range(900)]
    lines[450] = f"ERROR auth failed for OPENAI_API_KEY={key}: 401 Unauthorized"
    error = "Exit code 1\n" + "\n".join(lines)
    context = handle("PostToolUseFailure", failure_payload(repo, error, "./deploy"))[
        "hookSpecificOutput"
    ]["additionalContext"]
    assert "ERROR auth failed" in context and key not in context and "[redacted: " in context


def test_hooks_json_registers_post_tool_use_failure():
    hooks = json.loads((PLUGIN_DIR / "hooks" / "hooks.json").read_text())["hooks"]
    (group,) = hooks["PostToolUseFailure"]
    assert group["matcher"] == "*"
    assert [h["command"] for h in group["hooks"]] == ["gardener-hook PostToolUseFailure"]
    assert set(hooks) <= set(claude_hooks.HANDLERS) == set(claude_hooks.EVENTS)


def read_payload(repo: Path, tmp_path: Path, path: Path, text: str, **args) -> dict:
    lines = text.count("\n") + 1
    return {
        "session_id": "r1",
        "transcript_path": current_cli_transcript(tmp_path),
        "cwd": str(repo),
        "tool_name": "Read",
        "tool_input": {"file_path": str(path), **args},
        "tool_response": {
            "type": "text",
            "file": {
                "filePath": str(path),
                "content": text,
                "numLines": lines,
                "startLine": 1,
                "totalLines": lines,
            },
        },
    }


def test_a_big_read_of_a_log_is_replaced_like_bash_output(repo, tmp_path):
    log = shared_output(TOOL_OUTPUTS_MORE / "docker_buildkit__paladin.log")
    path = repo / "build.log"
    spec = handle("PostToolUse", read_payload(repo, tmp_path, path, log))["hookSpecificOutput"]
    shaped = spec["updatedToolOutput"]
    assert shaped["type"] == "text" and shaped["file"]["filePath"] == str(path)
    content = shaped["file"]["content"]
    assert content.startswith(f"[full output stored: id={entry_id(log)}] aider-gardener summary")
    assert "Read with offset/limit" in content.split("\n", 1)[0]
    assert shaped["file"]["numLines"] == content.count("\n") + 1
    assert count_tokens(content) <= min(count_tokens(log) / 2, fit_mod.SUMMARY_TOKENS)
    assert facts_mod.missing(log, content) == {}
    # the lines asked for by offset/limit are what the model wants: never replaced
    part = handle("PostToolUse", read_payload(repo, tmp_path, path, log, offset=100, limit=900))
    assert "updatedToolOutput" not in part["hookSpecificOutput"]


def test_a_big_source_file_gets_an_outline_only_when_asked(repo, tmp_path, monkeypatch):
    """argparse.py (2,600 lines of real Python): noted only by default; with
    GARDENER_HOOK_READ_OUTLINE=1 its outline, each kept line with its number in the file and
    each folded body with its line range."""
    import argparse
    import inspect

    path = Path(inspect.getsourcefile(argparse))
    source = path.read_text(encoding="utf-8")
    payload = read_payload(repo, tmp_path, path, source)
    assert "updatedToolOutput" not in handle("PostToolUse", payload)["hookSpecificOutput"]
    monkeypatch.setenv(claude_read.OUTLINE_ENV, "1")
    content = handle("PostToolUse", payload)["hookSpecificOutput"]["updatedToolOutput"]["file"][
        "content"
    ]
    first, *rest = content.split("\n")
    assert first.startswith(f"[full output stored: id={entry_id(source)}] aider-gardener outline")
    lines = source.split("\n")
    numbered = [re.match(r"(\d+)\| (.*)\Z", x) for x in rest]
    assert sum(m is not None for m in numbered) > 20
    for m in filter(None, numbered):
        assert lines[int(m.group(1)) - 1].startswith(m.group(2)[:40])
    kept = [m.group(2) for m in numbered if m]
    assert "class ArgumentParser(_AttributeHolder, _ActionsContainer):" in kept  # outer level
    folds = [re.search(r"… lines (\d+)-(\d+) …", x) for x in rest]
    assert any(folds)
    for m in filter(None, folds):
        assert 1 <= int(m.group(1)) <= int(m.group(2)) <= len(lines)
    assert count_tokens(content) <= fit_mod.SUMMARY_TOKENS


@pytest.mark.parametrize(
    "path,text,kind",
    [
        ("/w/logs/app.log", "x", "log"),
        ("/w/out.txt", "x", None),
        ("/home/u/.claude/projects/-w/abc/tool-results/b1.txt", "x", "saved output"),
        ("/w/package-lock.json", "{}", "lock"),
        ("/w/Cargo.lock", "x", "lock"),
        ("/w/go.sum", "x", "lock"),
        ("/w/static/app.min.js", "x", "minified"),
        ("/w/dist/index.js", "x", "generated"),
        ("/w/api/service_pb2.py", "x", "generated"),
        ("/w/gen/models.go", "// Code generated by sqlc. DO NOT EDIT.\npackage db\n", "generated"),
        ("/w/fixtures/users.json", "[]", "data"),
        ("/w/data.csv", "a,b", "data"),
        ("/w/package.json", "{}", None),
        ("/w/tsconfig.build.json", "{}", None),
        ("/w/src/app.py", "def f():\n    pass\n", None),
        ("/w/views/form.xml", "<odoo/>", None),
        ("/w/bundle.js", "var a=1;" * 2000, "minified"),
    ],
)
def test_read_kind_tells_files_nobody_edits_from_source(path, text, kind):
    assert claude_read.read_kind(path, text) == kind
    if path.endswith("out.txt"):
        assert claude_read.read_kind(path, text, "log") == "log"


# --- what a hook loads, and when its work is done (issue 22, point 4: a cheap start) ---

# What answering needs and the client handing its event to the warm server does not.
LIBRARY = (
    "aider_gardener.clients.claude_hooks",  # the hooks themselves: the server runs them
    "aider_gardener.tokens",
    "aider_gardener.types",
    "aider_gardener.redact",
    "aider_gardener.clients.transcript",
    "aider_gardener.clients.project",
    "aider_gardener.store.db",
    "aider_gardener.pipeline",
    "aider_gardener.continuity.checkpoint",
    "tiktoken",
    "sqlite3",
    "logging",
)


def hook_modules(event: str, payload: dict, cwd: Path) -> tuple[str, set[str]]:
    """One hook as the console script runs it, in a fresh interpreter: its answer, and every
    module it had loaded by the end."""
    code = (
        "import sys\nfrom aider_gardener.clients import hook_client\n"
        "hook_client.main([sys.argv[1]])\nsys.stderr.write(' '.join(sorted(sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        cwd=cwd,
        timeout=120,
        env=os.environ,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return proc.stdout.decode(), set(proc.stderr.decode().split())


@pytest.fixture
def warm_server(server_dir):
    """The warm server at the socket the hooks look for, ready: a request was answered."""
    sock = hook_wire.server_path()
    proc = subprocess.Popen(
        [sys.executable, "-m", "aider_gardener.clients.claude_hooks", "--serve", str(sock)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        ping = json.dumps({"cwd": str(server_dir), "source": "startup"}).encode()
        while not sock.exists() or hook_wire.ask_server(sock, "SessionStart", ping) is None:
            assert time.monotonic() < deadline and proc.poll() is None, "no hook server"
            time.sleep(0.1)
        yield sock
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_through_the_warm_server_a_hooks_client_loads_none_of_the_library(
    repo, tmp_path, warm_server
):
    """The client only hands its event to the server and prints the answer: none of what
    answering loads (the store, the pipeline, continuity, redaction, tiktoken, logging) is
    imported in it, so each hook of a ``claude -p`` costs an interpreter and a round trip.
    The server stores the conversation after the answer: it is there once the client exited."""
    t = tmp_path / "session.jsonl"
    _append(t, {"type": "user", "message": {"role": "user", "content": DECISION}})
    base = {"session_id": "lean", "cwd": str(repo), "transcript_path": str(t)}
    out, loaded = hook_modules("SessionStart", dict(base, source="startup"), repo)
    assert out == "" and not loaded & set(LIBRARY), sorted(loaded & set(LIBRARY))
    out, loaded = hook_modules("UserPromptSubmit", dict(base, prompt=DECISION), repo)
    assert out == "" and not loaded & set(LIBRARY), sorted(loaded & set(LIBRARY))
    _append(t, _text_record(REPLY_1, "m1", "u1"))
    out, loaded = hook_modules("Stop", dict(base, last_assistant_message=REPLY_1), repo)
    assert out == "" and not loaded & set(LIBRARY), sorted(loaded & set(LIBRARY))
    settled(repo, "lean")
    assert [(r[1], r[2]) for r in _conversation(repo)] == [("prompt", DECISION), ("prose", REPLY_1)]
    assert log_lines(repo) == []


def test_with_nothing_to_do_a_hook_in_process_loads_no_store(repo, tmp_path, monkeypatch):
    """Without the server (``GARDENER_HOOKD=0``, or before it is up): a start with no
    checkpoint and a stop with nothing new to store answer without loading continuity, the
    pipeline or tiktoken, and make no store."""
    monkeypatch.setenv(hook_wire.SERVER_ENV, "0")
    t = tmp_path / "session.jsonl"
    _append(t, {"type": "user", "message": {"role": "user", "content": "hi"}})
    _append(t, _text_record("Hello.", "m1", "u1"))  # a filler: not stored
    base = {"session_id": "idle", "cwd": str(repo), "transcript_path": str(t)}
    heavy = {"aider_gardener.continuity.checkpoint", "aider_gardener.pipeline", "tiktoken"}
    for event, extra in (
        ("SessionStart", {"source": "startup"}),
        ("Stop", {"last_assistant_message": "Hello."}),
    ):
        out, loaded = hook_modules(event, dict(base, **extra), repo)
        assert out == "" and not loaded & heavy, (event, sorted(loaded & heavy))
    assert not (repo / ".aider.gardener" / "store.sqlite").exists()
    assert log_lines(repo) == []


def _texts(root: Path) -> list[str]:
    db = root / ".aider.gardener" / "store.sqlite"
    return [r[2] for r in _conversation(root)] if db.exists() else []


@pytest.mark.parametrize("event", ["UserPromptSubmit", "Stop"])
def test_the_conversation_is_stored_after_the_answer_even_with_the_client_gone(
    repo, tmp_path, event
):
    """As the server answers (``answer(..., send=...)``): the answer goes out before the
    prompt and replies are stored, and they are stored even when it cannot be delivered."""
    t = tmp_path / "session.jsonl"
    _append(t, {"type": "user", "message": {"role": "user", "content": "x"}})
    _append(t, _text_record(REPLY_1, "m1", "u1"))
    base = {"session_id": f"after-{event}", "cwd": str(repo), "transcript_path": str(t)}
    payload = dict(base, prompt=DECISION, last_assistant_message=REPLY_1)
    sent: list[tuple[str, list[str]]] = []

    def send(out: str) -> None:
        sent.append((out, _texts(repo)))
        raise BrokenPipeError("the client is gone")

    out = claude_hooks.answer(event, json.dumps(payload).encode(), send=send)
    assert sent == [(out, [])]  # answered with nothing stored yet
    expected = [REPLY_1, DECISION] if event == "UserPromptSubmit" else [REPLY_1]
    assert _texts(repo) == expected
    assert claude_hooks._deferred is None  # nothing left over for the next in-process answer
    (line,) = log_lines(repo)
    assert "answer not sent (BrokenPipeError" in line


def test_the_server_warm_up_loads_what_handlers_need_and_touches_nothing_of_the_users(tmp_path):
    """``_warm_up`` in a fresh interpreter: afterwards the modules every handler loads on first
    use are loaded, no thread but the main one runs (children are forked from it), the
    environment is as it was, and neither the user's store nor any file of the warm-up is
    left."""
    code = (
        "import json, os, sys, threading\nfrom aider_gardener.clients import claude_hooks\n"
        "before = dict(os.environ)\nclaude_hooks._warm_up()\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'threads': threading.active_count(),"
        " 'env': dict(os.environ) == before}))\n"
    )
    scratch, store = tmp_path / "tmp", tmp_path / "user-store"
    scratch.mkdir()
    env = dict(
        os.environ,
        TMPDIR=str(scratch),
        AIDER_GARDENER_STORE=str(store),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    wanted = {
        "aider_gardener.continuity.checkpoint",
        "aider_gardener.continuity.tracker",
        "aider_gardener.store.db",
        "aider_gardener.store.chunking",
        "aider_gardener.pipeline",
        "aider_gardener.redact",
        "aider_gardener.clients.fit",
        "aider_gardener.clients.claude_read",
        "aider_gardener.clients.prompt_recall",
        "aider_gardener.clients.transcript",
        "tiktoken",
        "tokenizers",
    }
    assert wanted <= set(found["modules"]), sorted(wanted - set(found["modules"]))
    assert found["threads"] == 1 and found["env"]
    assert not store.exists() and list(scratch.iterdir()) == []
    assert not (tmp_path / "state").exists()  # nothing logged: the warm-up did not fail


def test_the_warm_up_requests_take_each_handlers_real_path(tmp_path, monkeypatch):
    """What ``_warm_up`` answers: each request gets the answer a real one would (an output
    replaced, a failure summarised, a recall, a checkpoint, the state back after it), with no
    error logged: the warm-up loads what a real request loads."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AIDER_GARDENER_STORE", raising=False)
    answers = [
        (event, claude_hooks.answer(event, json.dumps(payload).encode()))
        for event, payload in claude_hooks._warm_up_requests(tmp_path)
    ]
    events = [event for event, _ in answers]
    assert set(events) == set(claude_hooks.EVENTS)

    def context(i: int) -> str:
        return json.loads(answers[i][1])["hookSpecificOutput"]["additionalContext"]

    replaced = json.loads(answers[2][1])["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert replaced.startswith("[full output stored: id=") and "tokn_kind" in replaced
    assert "tokn_kind" in context(3)  # the failure's summary
    assert "updatedToolOutput" in json.loads(answers[4][1])["hookSpecificOutput"]  # a log Read
    assert answers[6][1].startswith("Keep the following session state")
    assert "tokn_kind" in context(7) and "tokn_kind" in context(8)  # after it, the next start
    assert "--- id=" in context(9) and "tokn_kind" in context(9)  # recalled
    assert log_lines(tmp_path / "project") == []


def test_the_servers_name_changes_with_any_module_of_the_package(tmp_path):
    """The server holds every module its children run: a change to any of them (not only to
    the few it used to stamp) must reach the next hook through a new server."""
    (tmp_path / "store").mkdir()
    (tmp_path / "__pycache__").mkdir()
    for name in ("__init__.py", "store/db.py", "__pycache__/x.pyc"):
        (tmp_path / name).write_text("")
        os.utime(tmp_path / name, ns=(10**18, 10**18))
    first = hook_wire._newest_code(str(tmp_path))
    os.utime(tmp_path / "__pycache__" / "x.pyc", ns=(2 * 10**18, 2 * 10**18))
    assert hook_wire._newest_code(str(tmp_path)) == first
    os.utime(tmp_path / "store" / "db.py", ns=(2 * 10**18, 2 * 10**18))
    assert hook_wire._newest_code(str(tmp_path)) == 2 * 10**18 != first


def glob_payload(repo: Path, filenames: list[str], truncated: bool = True) -> dict:
    return {
        "session_id": "g1",
        "cwd": str(repo),
        "tool_name": "Glob",
        "tool_input": {"pattern": "**/*.md"},
        "tool_response": {
            "filenames": filenames,
            "durationMs": 12,
            "numFiles": len(filenames),
            "truncated": truncated,
            "totalMatches": 300,
            "countIsComplete": True,
        },
    }


def test_a_glob_is_replaced_by_its_tree_with_every_name_claude_code_shows(repo):
    """Issue 22: the model got ``[×100] docs/area_<n>/…`` for a Glob of 300 files, zero usable
    paths where plain Claude Code shows 100. Now every one of the 100, and the id."""
    from tests.compress.test_paths import names_under, similar_files

    filenames = [p[2:] for p in similar_files()][:100]  # what Glob returns: 100, relative
    spec = handle("PostToolUse", glob_payload(repo, filenames))["hookSpecificOutput"]
    shaped = spec["updatedToolOutput"]
    [seen] = shaped["filenames"]  # the model reads exactly this text
    eid = entry_id("\n".join(filenames))
    assert seen.startswith(f"[full output stored: id={eid}] ")
    assert names_under(seen) == set(filenames)
    assert seen.endswith(
        "(Showing 100 of 300 matching files; 200 more are not listed. Narrow"
        " the pattern or path to see the rest.)"
    )
    assert shaped["truncated"] is False and "totalMatches" not in shaped
    assert count_tokens(seen) < count_tokens("\n".join(filenames))


def test_a_find_keeps_all_names_claude_code_shows_beyond_the_budget(repo, monkeypatch):
    """Bash passes up to 30,000 characters whole: a tree of fewer names would show less than
    plain Claude Code, so the budget gives way to them."""
    from tests.compress.test_paths import names_under, similar_files

    monkeypatch.setenv("GARDENER_HOOK_SUMMARY_TOKENS", "500")
    listed = similar_files()
    stdout = "\n".join(listed)
    payload = {
        "session_id": "f1",
        "cwd": str(repo),
        "tool_name": "Bash",
        "tool_input": {"command": "find . -name '*.md'"},
        "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False},
    }
    seen = handle("PostToolUse", payload)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert seen.startswith(f"[full output stored: id={entry_id(stdout)}] ")
    assert names_under(seen) == set(listed)
    assert count_tokens(seen) < count_tokens(stdout)
