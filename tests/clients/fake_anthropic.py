"""A scripted stand-in for the Anthropic Messages API, on 127.0.0.1, for driving the real Claude
Code CLI offline.

The CLI is the thing under test (its hooks, its MCP client, its plugin loader); only the model is
faked, the same rule as the Aider tests' stubbed LLM. Every request is recorded with its body, so a
test can read what the CLI really sent: the tool list, the tool_result it built from a hook's or an
MCP server's answer, the context a UserPromptSubmit hook added.

Replies are streamed as the real API streams them (``message_start``, ``content_block_start`` /
``content_block_delta`` / ``content_block_stop`` per block, ``message_delta`` with the stop reason
and usage, ``message_stop``), or sent as one JSON message when the request does not ask to stream.

The script answers only the main loop's requests (those that carry ``tools``); the CLI's side
requests (titles, quota probes, summaries) get a plain short text so they never consume a scripted
turn. A script entry is a list of content blocks, or a callable ``(body, server) -> blocks`` for a
turn that must read the request (to find the MCP tool's real name in the tool list, say).

Run it by hand for exploring: ``python tests/clients/fake_anthropic.py`` answers every
main-loop request with text and prints each request's path and a body summary.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

Blocks = list[dict[str, Any]]
Turn = Union[Blocks, Callable[[dict, "FakeAnthropic"], Blocks]]

MODEL_ECHO = "claude-fake-1"
SIDE_REPLY = "ok"
END_REPLY = "Done."


def text(s: str) -> dict:
    return {"type": "text", "text": s}


def tool_use(name: str, input: dict, id: str | None = None) -> dict:
    return {"type": "tool_use", "name": name, "input": input, "id": id}


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON when it parses, else the raw text

    @property
    def tool_names(self) -> list[str]:
        if not isinstance(self.body, dict):
            return []
        return [t.get("name", "") for t in self.body.get("tools") or []]

    @property
    def is_main_loop(self) -> bool:
        return self.path.split("?")[0] == "/v1/messages" and bool(self.tool_names)


@dataclass
class FakeAnthropic:
    """``with FakeAnthropic(script) as api:`` serves on ``api.base_url`` until the block ends."""

    script: list[Turn] = field(default_factory=list)
    input_tokens: int = 1200
    requests: list[Request] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # a script entry that raised, kept for tests

    def __post_init__(self):
        self._lock = threading.Lock()
        self._turn = 0
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> "FakeAnthropic":
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # the test reads api.requests instead
                pass

            def do_GET(self):
                api._handle(self)

            def do_POST(self):
                api._handle(self)

            def do_HEAD(self):
                api._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeAnthropic":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- what the CLI sent -------------------------------------------------------------------

    @property
    def main_requests(self) -> list[Request]:
        return [r for r in self.requests if r.is_main_loop]

    @property
    def turns_served(self) -> int:
        return self._turn

    # -- answering ---------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        req = Request(h.command, h.path, {k.lower(): v for k, v in h.headers.items()}, body)
        with self._lock:
            self.requests.append(req)
        path = h.path.split("?")[0]
        if path == "/v1/messages/count_tokens":
            return _send_json(h, 200, {"input_tokens": self.input_tokens})
        if path == "/v1/messages" and h.command == "POST" and isinstance(body, dict):
            blocks = self._next_blocks(req)
            if body.get("stream"):
                return self._send_stream(h, body, blocks)
            return _send_json(h, 200, self._message(body, blocks))
        if h.command == "HEAD":
            h.send_response(200)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        # Anything else the CLI probes (account, settings, feature flags): an empty success, so a
        # missing endpoint shows up in api.requests rather than as a retry storm.
        return _send_json(h, 200, {})

    def _next_blocks(self, req: Request) -> Blocks:
        if not req.is_main_loop:
            return [text(SIDE_REPLY)]
        with self._lock:
            i = self._turn
            self._turn += 1
        if i >= len(self.script):
            return [text(END_REPLY)]
        turn = self.script[i]
        try:
            blocks = turn(req.body, self) if callable(turn) else turn
        except Exception as e:  # a broken script must fail the test, not hang the CLI
            self.errors.append(f"turn {i + 1}: {type(e).__name__}: {e}")
            blocks = [text(f"script error: {e}")]
        out = []
        for b in blocks:
            b = dict(b)
            if b["type"] == "tool_use" and not b.get("id"):
                b["id"] = f"toolu_fake{next(self._ids):04d}"
            out.append(b)
        return out

    def _usage(self, body: dict) -> dict:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 20,
        }

    def _message(self, body: dict, blocks: Blocks) -> dict:
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        return {
            "id": f"msg_fake{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or MODEL_ECHO,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": self._usage(body),
        }

    def _send_stream(self, h: BaseHTTPRequestHandler, body: dict, blocks: Blocks) -> None:
        msg = self._message(body, blocks)
        events: list[tuple[str, dict]] = []
        start = dict(msg, content=[], stop_reason=None)
        start["usage"] = dict(msg["usage"], output_tokens=1)
        events.append(("message_start", {"type": "message_start", "message": start}))
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                first = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": part} for part in _chunks(b["text"])]
            else:
                first = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
                js = json.dumps(b["input"])
                deltas = [{"type": "input_json_delta", "partial_json": p} for p in _chunks(js)]
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": first},
                )
            )
            for d in deltas:
                events.append(
                    ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
                )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": msg["usage"]["output_tokens"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("request-id", f"req_fake{next(self._ids):04d}")
        h.send_header("Connection", "close")
        h.end_headers()
        for name, data in events:
            h.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            h.wfile.flush()
        h.close_connection = True


def _chunks(s: str, n: int = 40) -> list[str]:
    """Several deltas per block, as the real API sends, so the CLI's accumulation is exercised."""
    return [s[i : i + n] for i in range(0, len(s), n)] or [""]


def _send_json(h: BaseHTTPRequestHandler, status: int, obj: Any) -> None:
    data = json.dumps(obj).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.send_header("request-id", "req_fake")
    h.end_headers()
    h.wfile.write(data)


# -- reading request bodies ------------------------------------------------------------------


def tool_results(body: dict) -> list[dict]:
    """Every tool_result block in a request's messages, oldest first."""
    out = []
    for m in body.get("messages") or []:
        if isinstance(m.get("content"), list):
            out += [c for c in m["content"] if c.get("type") == "tool_result"]
    return out


def result_text(block: dict) -> str:
    """A tool_result's text, whether its content is a string or a list of text blocks."""
    c = block.get("content")
    if isinstance(c, str):
        return c
    return "\n".join(x.get("text", "") for x in c or [] if isinstance(x, dict))


def all_text(body: dict) -> str:
    """Everything textual the request carries (system and messages), for 'does X reach the
    model' assertions that must not depend on where this CLI version puts a hook's context."""
    parts: list[str] = []

    def walk(x):
        if isinstance(x, str):
            parts.append(x)
        elif isinstance(x, list):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for k in ("text", "content"):
                if k in x:
                    walk(x[k])

    walk(body.get("system"))
    walk(body.get("messages"))
    return "\n".join(parts)


def _main(argv: list[str]) -> int:
    api = FakeAnthropic().start()
    print(f"fake Anthropic API on {api.base_url}", flush=True)
    seen = 0
    try:
        while True:
            threading.Event().wait(0.5)
            for r in api.requests[seen:]:
                body = r.body if isinstance(r.body, dict) else {}
                print(r.method, r.path, "tools:", len(r.tool_names), "model:", body.get("model"))
            seen = len(api.requests)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
