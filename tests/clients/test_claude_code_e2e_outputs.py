"""What the model gets of big and failing tool outputs in the real Claude Code CLI (issue 22,
points 1, 2, 7), against the scripted Messages API of ``fake_anthropic.py``.

One headless session with the plugin as shipped: the fake model ``cat``s a Hadoop log of over
100,000 tokens (the real HDFS log of ``../shared/data`` with error lines and their stack traces
mixed in, as a Hadoop job's log has them), runs a command that prints an npm debug log and
exits 1, reads a 56 KB build log with Read, then follows the first line of the log's
replacement: loads the expand tool it names, expands the id it names, and searches the failed
command's output with the recall tool it names. A second test runs one turn of the interactive
TUI (pexpect, a prepared ``~/.claude.json`` so no onboarding or login screen shows).

Before issue 22 the log's summary (80 KB) went over Bash's 30,000-character limit and the model
got Claude Code's 2 KB preview of it (no error line, no id); the failure went to
PostToolUseFailure, which the plugin did not register (nothing stored); the Read was only noted.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from aider_gardener import critical
from aider_gardener.clients import fit
from aider_gardener.clients.claude_hooks import GARDENER_TOOL
from aider_gardener.tokens import count_tokens
from tests.clients.fake_anthropic import (
    FakeAnthropic,
    all_text,
    result_text,
    text,
    tool_results,
    tool_use,
)
from tests.clients.test_claude_code_e2e import (  # noqa: F401  (fixtures used by name)
    MCP_WAIT_TURNS,
    claude_cli,
    cli_env,
    gardener_env_path,
    gardener_plugin,
    plugin_mcp_servers,
    private_hook_servers,
    run_claude,
    store_entries,
    strings_in,
)
from tests.conftest import TOOL_OUTPUTS, TOOL_OUTPUTS_MORE

HDFS = TOOL_OUTPUTS / "loghub_HDFS_2k.log"
NPM_DEBUG = TOOL_OUTPUTS_MORE / "npm_debug_publish_E403_node_stack__mineral-loader.log"
BUILD_LOG = TOOL_OUTPUTS_MORE / "docker_buildkit__paladin.log"
HADOOP_CMD = "cat hadoop.log"
FAIL_CMD = "cat npm-debug.log; exit 1"
UNZIP_CMD = "cat unzip.log"
UNZIP_FILES = [f"magisk_work/assets/part{i % 9}/file_{i:03d}.sh" for i in range(700)]
HEAD = re.compile(r"\A\[full output stored: id=([a-z2-7]{10})\] ")

ERRORS = [
    "ERROR dfs.DataNode: DatanodeRegistration({ip}:50010, storageID=DS-{n}-{ip}-50010-{ts},"
    " infoPort=50075, ipcPort=50020):DataXceiver: java.io.IOException: Block blk_{blk} is valid,"
    " and cannot be written to.",
    "ERROR dfs.DataNode: {ip}:50010:DataXceiver: java.io.EOFException: while trying to read"
    " 65557 bytes",
    "ERROR dfs.DataNode: {ip}:50010:DataXceiver: java.net.SocketTimeoutException: 480000 millis"
    " timeout while waiting for channel to be ready for write. ch :"
    " java.nio.channels.SocketChannel[connected local=/{ip}:50010 remote=/{ip}:{port}]",
    "ERROR dfs.FSNamesystem: PendingReplicationMonitor timed out block blk_{blk}",
    "ERROR dfs.DataNode$BlockReceiver: Exception in receiveBlock for block blk_{blk}"
    " java.io.IOException: Connection reset by peer",
    "FATAL dfs.DataNode: Shutting down DataNode at {ip}: java.lang.OutOfMemoryError: Java heap"
    " space",
    "ERROR mapred.TaskTracker: Error running child: java.lang.RuntimeException: Error in"
    " configuring object (task attempt_200811092030_{n}_m_{n}_0)",
    "ERROR mapred.JobTracker: Job job_200811092030_{n} failed with state FAILED due to: NA",
    "ERROR dfs.DataNode: {ip}:50010:Failed to transfer blk_{blk} to {ip}:50010 got"
    " java.net.SocketException: Broken pipe",
    "ERROR ipc.Server: IPC Server handler {n} on 9000, call addBlock(/user/root/rand/part-{n},"
    " DFSClient_{n}) from {ip}:{port}: error: org.apache.hadoop.dfs.LeaseExpiredException: No"
    " lease on /user/root/rand/part-{n}",
    "ERROR dfs.DataBlockScanner: Verification failed for blk_{blk}: java.io.IOException:"
    " Checksum error in block file",
    "ERROR namenode.NameNode: java.net.BindException: Problem binding to namenode/{ip}:9000 :"
    " Address already in use",
    "FATAL conf.Configuration: error parsing conf file: org.xml.sax.SAXParseException;"
    " lineNumber: {n}; columnNumber: {n}; Content is not allowed in prolog.",
    "ERROR mapred.TaskTracker: attempt_200811092030_{n}_r_{n}_0: Map output copy failure :"
    " java.lang.OutOfMemoryError: GC overhead limit exceeded",
]
FRAMES = [
    "org.apache.hadoop.dfs.DataNode$DataXceiver.writeBlock(DataNode.java:1129)",
    "org.apache.hadoop.dfs.DataNode$DataXceiver.run(DataNode.java:1003)",
    "org.apache.hadoop.dfs.DataNode$BlockReceiver.receiveBlock(DataNode.java:2458)",
    "org.apache.hadoop.dfs.DataNode$BlockReceiver.receivePacket(DataNode.java:2344)",
    "org.apache.hadoop.dfs.DataNode$BlockSender.sendBlock(DataNode.java:1841)",
    "org.apache.hadoop.net.SocketIOWithTimeout.waitForIO(SocketIOWithTimeout.java:185)",
    "org.apache.hadoop.net.SocketOutputStream.transferToFully(SocketOutputStream.java:198)",
    "org.apache.hadoop.ipc.Server$Handler.run(Server.java:890)",
    "org.apache.hadoop.ipc.Client.call(Client.java:1351)",
    "org.apache.hadoop.dfs.FSNamesystem.getAdditionalBlock(FSNamesystem.java:1081)",
    "org.apache.hadoop.mapred.TaskTracker$Child.main(TaskTracker.java:2209)",
    "org.apache.hadoop.mapred.MapTask.run(MapTask.java:321)",
    "java.io.DataInputStream.readFully(DataInputStream.java:180)",
    "java.lang.Thread.run(Thread.java:619)",
]


def hadoop_log(errors: int = 158, seed: int = 22) -> str:
    """The real HDFS log with ``errors`` ERROR/FATAL lines of a Hadoop job (numbers, hosts and
    block ids varying), each exception followed by part of its stack trace."""
    if not HDFS.is_file():
        pytest.skip(f"shared tool output not found: {HDFS}")
    r = random.Random(seed)
    lines = HDFS.read_text(encoding="utf-8").replace("\r\n", "\n").splitlines()
    at = set(r.sample(range(len(lines)), errors))
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i not in at:
            continue
        ip = f"10.251.{r.randint(1, 254)}.{r.randint(1, 254)}"
        error = ERRORS[len(out) % len(ERRORS)].format(
            ip=ip,
            n=r.randint(1, 99999),
            ts=r.randint(10**12, 10**13),
            blk=r.randint(-(10**18), 10**18),
            port=r.randint(30000, 60000),
        )
        out.append(" ".join(line.split()[:3]) + " " + error)
        if "Exception" in error:
            k = r.randint(4, 8)
            first = r.randrange(len(FRAMES) - k)
            out += [f"\tat {frame}" for frame in FRAMES[first : first + k]]
    return "\n".join(out) + "\n"


def fact_lines(text: str) -> list[dict[str, set[str]]]:
    """The facts of each line of ``text`` that carries any."""
    out = []
    for line in text.splitlines():
        found = {k: v for k, v in critical.extract(line).items() if v}
        if found:
            out.append(found)
    return out


def kept_share(original: str, seen: str) -> float:
    """The share of ``original``'s fact lines whose every fact is in ``seen``."""
    lines = fact_lines(original)
    s = critical.Summary(seen)
    kept = sum(all(s.has(k, f) for k, v in found.items() for f in v) for found in lines)
    return kept / len(lines)


def hook_context_text(body: dict, event: str) -> str:
    """The text a hook of ``event`` added (2.1.332 sends it as a system message starting
    "<Event>:<tool> hook additional context: ")."""
    pattern = re.compile(rf"\A{event}(?::\w+)? hook additional context: ")
    found = []
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            t = block.get("text") if isinstance(block, dict) else None
            if isinstance(t, str) and pattern.match(t):
                found.append(pattern.sub("", t))
    return "\n".join(found)


@dataclass
class Outputs:
    api: FakeAnthropic
    events: list[dict]
    repo: Path
    log: str
    npm: str
    build: str
    tools: dict[str, str]  # what the replacement's first line named: id, expand, recall

    def entry(self, command: str):
        rows = [r for r in store_entries(self.repo) if r["command"] == command]
        assert len(rows) == 1, [(r["id"], r["command"]) for r in store_entries(self.repo)]
        return rows[0]


@pytest.fixture(scope="module")
def outputs(claude_cli, tmp_path_factory) -> Outputs:  # noqa: F811
    plugin = gardener_plugin()
    for need in (NPM_DEBUG, BUILD_LOG):
        if not need.is_file():
            pytest.skip(f"shared tool output not found: {need}")
    base = tmp_path_factory.mktemp("claude-outputs")
    repo, home = base / "work", base / "home"
    repo.mkdir()
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    log, npm = hadoop_log(), NPM_DEBUG.read_text(encoding="utf-8")
    build = BUILD_LOG.read_text(encoding="utf-8")
    (repo / "hadoop.log").write_text(log, encoding="utf-8")
    (repo / "npm-debug.log").write_text(npm, encoding="utf-8")
    (repo / "build.log").write_text(build, encoding="utf-8")
    unzip = "Archive:  magisk.apk\n" + "".join(f"  inflating: {f}  \n" for f in UNZIP_FILES)
    (repo / "unzip.log").write_text(unzip, encoding="utf-8")
    tools: dict[str, str] = {}

    def first_line(body: dict) -> str:
        """The first line of the first replaced result: the log's (turn 1)."""
        for tr in tool_results(body):
            t = result_text(tr)
            if HEAD.match(t):
                return t.split("\n", 1)[0]
        return ""

    def load_expand(body, api):
        line = first_line(body)
        m = HEAD.match(line)
        named = re.findall(r"(mcp__\S+?__(?:expand|recall))\b", line)
        if not m or len(named) < 2:
            return [text("the replacement named no id or tools")]
        tools.update(id=m.group(1), expand=named[0], recall=named[1])
        if tools["expand"] in all_text(body) or tools["expand"] in json.dumps(body["tools"]):
            return [
                tool_use("ToolSearch", {"query": f"select:{tools['expand']},{tools['recall']}"})
            ]
        if api.turns_served < MCP_WAIT_TURNS:  # -p mode does not wait for MCP servers
            api.script.insert(api.turns_served, load_expand)
            return [tool_use("Bash", {"command": "sleep 1", "description": "wait"})]
        return [text("the gardener's tools were never offered")]

    script = [
        [tool_use("Bash", {"command": HADOOP_CMD, "description": "show the job log"})],
        [tool_use("Bash", {"command": FAIL_CMD, "description": "publish"})],
        [tool_use("Read", {"file_path": str(repo / "build.log")})],
        load_expand,
        lambda body, api: [tool_use(tools["expand"], {"id": tools["id"]})],
        lambda body, api: [
            tool_use(tools["recall"], {"query": "cannot publish over the previously published"})
        ],
        [tool_use("Bash", {"command": UNZIP_CMD, "description": "what was unpacked"})],
        [text("Done.")],
    ]
    allowed = ["--allowedTools", "Bash", "Read", "ToolSearch", *plugin_mcp_servers(plugin)]
    env = {"PATH": gardener_env_path()}
    with FakeAnthropic(script) as api:
        events = run_claude(
            claude_cli,
            api,
            repo,
            home,
            "look at the logs",
            "--plugin-dir",
            str(plugin),
            *allowed,
            env=env,
        )
    return Outputs(api, events, repo, log, npm, build, tools)


def _request_after(o: Outputs, command_or_path: str) -> tuple[dict, dict]:
    """(the first request carrying the result of the call naming ``command_or_path``, that
    tool_result)."""
    for req in o.api.main_requests:
        uses = {}
        for m in req.body.get("messages") or []:
            for b in m.get("content") if isinstance(m.get("content"), list) else []:
                if b.get("type") == "tool_use":
                    uses[b["id"]] = json.dumps(b["input"])
        for tr in tool_results(req.body):
            if command_or_path in uses.get(tr["tool_use_id"], ""):
                return req.body, tr
    raise AssertionError(f"no tool_result for {command_or_path!r}")


def test_a_100k_token_log_reaches_the_model_within_the_limit_with_its_facts_and_id(outputs):
    o = outputs
    assert count_tokens(o.log) > 100_000
    _, tr = _request_after(o, HADOOP_CMD)
    seen = result_text(tr)
    entry = o.entry(HADOOP_CMD)
    assert entry["original"] == o.log.rstrip("\n")  # stored whole (the CLI cut it at 30,000)
    assert "<persisted-output>" not in seen and "Output too large" not in seen, seen[:300]
    assert fit.js_length(seen) <= fit.room(fit.BASH_LIMIT)
    assert count_tokens(seen) <= fit.SUMMARY_TOKENS
    first = seen.split("\n", 1)[0]
    assert HEAD.match(first).group(1) == entry["id"]
    assert f"{GARDENER_TOOL}expand" in first and f"{GARDENER_TOOL}recall" in first
    assert kept_share(o.log, seen) >= 0.95


def test_the_first_lines_tools_expand_the_log_and_find_the_failure(outputs):
    """The model can do what the first line says: the tools it names are the ones Claude Code
    offers, expand of its id returns the log, recall finds the failed command's output."""
    o = outputs
    assert o.tools.get("id") == o.entry(HADOOP_CMD)["id"], o.tools
    *_, after_expand, after_recall, _ = o.api.main_requests  # the last: after the unzip listing
    expanded = strings_in(result_text(tool_results(after_expand.body)[-1]))
    assert o.log.splitlines()[0] in expanded
    recalled = strings_in(result_text(tool_results(after_recall.body)[-1]))
    assert o.entry(FAIL_CMD)["id"] in recalled


def test_a_failing_command_is_stored_and_shown_compressed(outputs):
    o = outputs
    body, tr = _request_after(o, FAIL_CMD)
    assert tr.get("is_error")  # Claude Code's own result: "Exit code 1" and the output
    entry = o.entry(FAIL_CMD)
    assert entry["original"] == o.npm.rstrip("\n")  # without the "Exit code 1" line
    context = hook_context_text(body, "PostToolUseFailure")
    assert context.startswith(f"[full output stored: id={entry['id']}] "), context[:300]
    assert count_tokens(context) <= count_tokens(o.npm) / 2
    assert critical.missing(o.npm, context) == {}  # E403 and its frames, compressed


def test_names_the_summary_folded_reach_the_model_by_folder(outputs):
    """700 ``inflating:`` lines (35 KB, over Bash's limit, so Claude Code saves them to a file):
    the log summary folds them to one template; the model gets the names back by folder as far
    as the budget holds, the count of the rest, and the file Claude Code saved them to."""
    _, tr = _request_after(outputs, UNZIP_CMD)
    seen = result_text(tr)
    first = seen.split("\n", 1)[0]
    assert HEAD.match(first), first[:200]
    assert fit.js_length(seen) <= fit.room(fit.BASH_LIMIT)
    assert count_tokens(seen) <= fit.SUMMARY_TOKENS
    shown = [f for f in UNZIP_FILES if f.rsplit("/", 1)[1] in seen]
    assert len(shown) >= 100, seen[:1500]
    assert "  magisk_work/assets/part0/: file_000.sh, file_009.sh" in seen
    more = re.search(r"^  … ([\d,]+) more \(([^)]*)\) \(all: ", seen, re.M)
    assert more and int(more.group(1).replace(",", "")) == len(UNZIP_FILES) - len(shown)
    assert all(f"magisk_work/assets/part{d}/" in seen for d in range(9))  # every folder named
    saved = re.search(r"\(Claude Code saved it too: ([^)]+)\)", first)
    assert saved, first
    assert f"inflating: {UNZIP_FILES[-1]}" in Path(saved.group(1)).read_text()


def test_a_big_read_of_a_log_is_replaced(outputs):
    o = outputs
    _, tr = _request_after(o, str(o.repo / "build.log"))
    seen = result_text(tr)
    entry = [r for r in store_entries(o.repo) if r["path"] == str(o.repo / "build.log")]
    assert [r["original"] for r in entry] == [o.build]
    assert seen.startswith(f"1\t[full output stored: id={entry[0]['id']}] ")  # Read numbers
    assert count_tokens(seen) <= count_tokens(o.build) / 2
    assert critical.missing(o.build, seen) == {}


def test_the_interactive_tui_runs_a_turn_with_the_plugin(claude_cli, tmp_path):  # noqa: F811
    """The full-screen CLI (a pseudo-terminal, as a user runs it), with a ``~/.claude.json`` that
    has onboarding done, the project trusted and the API key approved: the prompt typed goes to
    the fake API, the plugin's hooks replace the log's output, the reply is drawn, and the
    transcript view (ctrl+o) shows an unzip listing as the model got it: names by folder."""
    pexpect = pytest.importorskip("pexpect")
    plugin = gardener_plugin()
    repo, home = tmp_path / "work", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    log = hadoop_log(errors=40, seed=5)
    (repo / "hadoop.log").write_text(log, encoding="utf-8")
    unzip = "Archive:  magisk.apk\n" + "".join(f"  inflating: {f}  \n" for f in UNZIP_FILES)
    (repo / "unzip.log").write_text(unzip, encoding="utf-8")
    key = "sk-ant-api03-" + "gardenertest" * 7
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "lastOnboardingVersion": "2.1.332",
                "theme": "dark",
                "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
                "projects": {
                    str(repo): {
                        "hasTrustDialogAccepted": True,
                        "hasCompletedProjectOnboarding": True,
                    }
                },
            }
        )
    )
    script = [
        [tool_use("Bash", {"command": HADOOP_CMD, "description": "show the log"})],
        [tool_use("Bash", {"command": UNZIP_CMD, "description": "what was unpacked"})],
        [text("The TUI turn is done.")],
    ]
    with FakeAnthropic(script) as api:
        env = cli_env(api, home)
        env.update(ANTHROPIC_API_KEY=key, TERM="xterm-256color", PATH=gardener_env_path())
        args = ["--plugin-dir", str(plugin), "--allowedTools", "Bash"]
        child = pexpect.spawn(
            claude_cli,
            args,
            cwd=str(repo),
            env=env,
            encoding="utf-8",
            timeout=120,
            dimensions=(50, 160),
        )
        screen: list[str] = []

        def read_until(word: str, seconds: float) -> None:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and word not in _flat(screen):
                try:
                    screen.append(child.read_nonblocking(65536, timeout=2))
                except pexpect.TIMEOUT:
                    pass

        try:
            read_until("/effort", 120)  # the prompt box is drawn
            child.send("show me the job log")
            time.sleep(1)
            child.send("\r")
            read_until("TUIturnisdone", 180)
            done = len(screen)
            child.sendcontrol(
                "o"
            )  # the transcript view: what the tools returned, as the model got it
            read_until("magisk_work/assets/part8/", 30)
        finally:
            _stop(child)
    assert "TUIturnisdone" in _flat(screen), _flat(screen)[-2000:]
    # the unzip listing as replaced: names by folder, and a closing line naming the folders left
    transcript = _flat(screen[done:])
    assert "magisk_work/assets/part0/:file_000.sh,file_009.sh" in transcript, transcript[-3000:]
    assert re.search(r"…[\d,]+more\(magisk_work/assets/part\d/\d+;", transcript), transcript[-3000:]
    assert len(api.main_requests) == 3
    seen = result_text(tool_results(api.main_requests[1].body)[-1])
    [row] = [r for r in store_entries(repo) if r["command"] == HADOOP_CMD]
    assert seen.startswith(f"[full output stored: id={row['id']}] "), seen[:300]


def _flat(screen: list[str]) -> str:
    """The screen's text without escape sequences or whitespace (the TUI moves the cursor
    between words)."""
    raw = "".join(screen)
    raw = re.sub(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b.", "", raw)
    return re.sub(r"\s+", "", raw)


def _stop(child) -> None:
    """End the CLI this test started: Ctrl-C twice (its way out), then its process by pid."""
    try:
        child.sendcontrol("c")
        time.sleep(0.5)
        child.sendcontrol("c")
        time.sleep(1)
    except OSError:
        pass
    if child.isalive():
        try:
            os.kill(child.pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        child.close(force=True)
    except Exception:  # noqa: BLE001 - pexpect cannot always reap a killed child at once
        pass
