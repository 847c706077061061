"""The wire between ``gardener-hook`` and its warm server (``claude_hooks.serve``): the
socket's place, how long a client waits, one request's round trip, starting the server.

Standard library only, and nothing else of the package: every Claude Code hook runs a fresh
interpreter that imports this, and each module more is paid by every hook: after each tool call,
and three times in each ``claude -p`` turn (docs/decisions/021-claude-code-hooks.md).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

SERVER_ENV = "GARDENER_HOOKD"
SERVER_DIR_ENV = "GARDENER_HOOKD_DIR"
CONNECT_TIMEOUT = 0.5
SPAWN_BACKOFF = 30.0
HOOKS_JSON = Path(__file__).resolve().parent / "claude_plugin" / "hooks" / "hooks.json"
HOOK_TIMEOUT = 30.0  # seconds, should hooks.json not say
WAIT_SHARE = 1 / 3  # of its hook's timeout, what a client waits for the server
ENV_PREFIXES = ("GARDENER_", "AIDER_GARDENER_", "CLAUDE_", "XDG_")
ENV_NAMES = ("HOME",)
MAX_STDIN = 32 << 20  # bytes of hook JSON read at most


def server_enabled() -> bool:
    return os.environ.get(SERVER_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def server_path() -> Path | None:
    """The server's socket for this user, interpreter and code version; None when no private
    folder can be had (the hook then runs in process)."""
    import hashlib

    base = os.environ.get(SERVER_DIR_ENV) or (
        os.path.join(os.environ["XDG_RUNTIME_DIR"], "aider-gardener")
        if os.environ.get("XDG_RUNTIME_DIR")
        else os.path.join("/tmp", f"aider-gardener-{os.getuid()}")
    )
    package = Path(__file__).resolve().parents[1]
    stamp = [sys.executable, str(package), str(_newest_code(str(package)))]
    key = hashlib.blake2b("\0".join(stamp).encode(), digest_size=6).hexdigest()
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        info = os.stat(base)
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None  # someone else's or an open folder: never talk to a socket there
    except OSError:
        return None
    path = Path(base) / f"hookd-{key}.sock"
    return path if len(str(path)) < 100 else None  # AF_UNIX paths are short


def _newest_code(top: str) -> int:
    """The newest modification time of the package's modules (~0.5 ms): the server holds every
    module its children use (``_warm_up``), so any changed one calls for a new server."""
    newest, folders = 0, [top]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.name.endswith(".py"):
                        newest = max(newest, entry.stat(follow_symlinks=False).st_mtime_ns)
                    elif entry.name[0] not in "._" and entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
        except OSError:
            continue
    return newest


def _client_env() -> dict:
    return {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


@functools.lru_cache(maxsize=None)
def _hook_timeouts() -> dict[str, float]:
    """Each event's timeout in the plugin's hooks.json (its smallest, should it list several)."""
    try:
        data = json.loads(HOOKS_JSON.read_text(encoding="utf-8"))
        timeouts: dict[str, float] = {}
        for event, groups in data["hooks"].items():
            for spec in (spec for group in groups for spec in group["hooks"]):
                value = float(spec["timeout"])
                timeouts[event] = min(timeouts.get(event, value), value)
        return timeouts
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def reply_wait(event: str) -> float:
    """How long a hook waits for the server before answering in process: a third of the
    timeout Claude Code gives its hook (the smallest one for an event hooks.json does not
    name), so a stuck server still leaves two thirds of it for the answer in process."""
    timeouts = _hook_timeouts()
    timeout = timeouts.get(event) or min(timeouts.values(), default=HOOK_TIMEOUT)
    return timeout * WAIT_SHARE


def ask_server(path: Path, event: str, raw: bytes) -> str | None:
    """The server's reply, or None when there is none within ``reply_wait(event)`` seconds (no
    server, a dead or a stuck one): the hook then answers in process (ingest is idempotent)."""
    import socket

    deadline = time.monotonic() + reply_wait(event)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        try:
            sock.connect(str(path))
        except OSError:
            return None
        header = {"event": event, "cwd": os.getcwd(), "env": _client_env()}
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        sock.sendall(json.dumps(header).encode() + b"\n" + raw)
        sock.shutdown(socket.SHUT_WR)
        data = read_to_end(sock, 1 << 16, deadline)
        if not data.startswith(b"ok\n"):
            return None  # the request failed or was ended in the server
        return data[3:].decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        sock.close()


def start_server(path: Path) -> str | None:
    """Start the server in the background, at most once per ``SPAWN_BACKOFF`` seconds (a server
    that cannot start must not cost a process per tool call); what went wrong, if anything."""
    import subprocess

    mark = Path(f"{path}.spawned")
    try:
        if time.time() - mark.stat().st_mtime < SPAWN_BACKOFF:
            return None
    except OSError:
        pass
    try:
        mark.touch()
    except OSError:
        return None
    try:
        subprocess.Popen(
            [sys.executable, "-m", "aider_gardener.clients.claude_hooks", "--serve", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not in Claude Code's process group, not on its pipes
            close_fds=True,
        )
    except OSError as err:
        return f"could not start the hook server ({err})"
    return None


def read_stdin(limit: int = MAX_STDIN) -> tuple[bytes, int]:
    """At most ``limit`` bytes of stdin and the total size (the rest is drained, so Claude Code
    never blocks writing to us)."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        return b"", 0
    data = stream.read(limit + 1)
    total = len(data)
    if total > limit:
        while True:
            chunk = stream.read(1 << 20)
            if not chunk:
                break
            total += len(chunk)
        return b"", total
    return data, total


def read_to_end(sock: Any, size: int, deadline: float) -> bytes:
    """Everything the peer sends until it shuts its side (both ends write, then SHUT_WR);
    TimeoutError once ``deadline`` (``time.monotonic``) passes, so a peer that stops sending
    cannot hold the reader."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the peer stopped sending")
        sock.settimeout(left)
        chunk = sock.recv(size)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
