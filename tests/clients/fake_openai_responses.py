"""A scripted stand-in for the OpenAI Responses API, on 127.0.0.1, for driving the real Codex CLI
offline.

The CLI is the thing under test (its MCP client, its tool catalog, what it forwards of an MCP
tool's result); only the model is faked, the same rule as ``fake_anthropic.py`` for Claude Code.
Every request is recorded with its body, so a test can read what the CLI really sent: the tools
it offered the model, and the ``function_call_output`` it built from an MCP server's answer.

Codex (0.169.0) posts ``{base_url}/responses`` with ``"stream": true`` and the whole history in
``input`` (no ``previous_response_id``). Replies are streamed as the real API streams them:
``response.created``, then per output item ``response.output_item.added``, its deltas
(``response.output_text.delta`` or ``response.function_call_arguments.delta``) and
``response.output_item.done``, then ``response.completed`` with the usage; Codex takes the items
from ``output_item.done`` and ends the turn at ``completed``.

A script entry is a list of output items (``text(...)``, ``function_call(...)``), or a callable
``(body, api) -> items`` for a turn that must read the request (to find a tool's name in the tool
list, say). Past the script every request gets ``END_REPLY``.

Run it by hand for exploring: ``python tests/clients/fake_openai_responses.py`` answers every
request with text and prints each request's path and a body summary.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

Items = list[dict[str, Any]]
Turn = Union[Items, Callable[[dict, "FakeResponses"], Items]]

MODEL_ECHO = "gpt-fake-1"
END_REPLY = "Done."


def text(s: str) -> dict:
    return {"type": "message", "text": s}


def function_call(
    name: str, arguments: dict, call_id: str | None = None, namespace: str | None = None
) -> dict:
    """A call of ``name``; an MCP server's tools are a namespace (``mcp__<server>``) in Codex's
    tool list, and a call of one names it."""
    out = {"type": "function_call", "name": name, "arguments": arguments, "call_id": call_id}
    if namespace:
        out["namespace"] = namespace
    return out


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON when it parses, else the raw text
    at: float = 0.0  # time.monotonic() when it arrived

    @property
    def tool_names(self) -> list[str]:
        """Every function the request offers, namespaced ones as ``namespace.name`` too."""
        if not isinstance(self.body, dict):
            return []
        return tool_names(self.body.get("tools") or [])

    @property
    def is_turn(self) -> bool:
        return self.method == "POST" and self.path.split("?")[0].endswith("/responses")


def tool_names(tools: list) -> list[str]:
    out: list[str] = []
    for t in tools:
        if not isinstance(t, dict):
            continue
        name = t.get("name") or (t.get("function") or {}).get("name") or ""
        if name:
            out.append(name)
        for sub in t.get("tools") or []:  # a namespace of tools (an MCP server's)
            if isinstance(sub, dict) and sub.get("name"):
                out.append(f"{name}.{sub['name']}" if name else sub["name"])
    return out


@dataclass
class FakeResponses:
    """``with FakeResponses(script) as api:`` serves on ``api.base_url`` until the block ends."""

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

    def start(self) -> "FakeResponses":
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # the test reads api.requests instead
                pass

            def do_GET(self):
                api._handle(self)

            def do_POST(self):
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

    def __enter__(self) -> "FakeResponses":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """What a Codex model provider's ``base_url`` is set to (Codex appends /responses)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- what the CLI sent -------------------------------------------------------------------

    @property
    def turns(self) -> list[Request]:
        return [r for r in self.requests if r.is_turn]

    @property
    def turns_served(self) -> int:
        return self._turn

    # -- answering ---------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        if h.headers.get("Content-Encoding", "").lower() == "zstd":  # pragma: no cover
            self.errors.append("compressed request body: not supported by the fake")
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        req = Request(
            h.command, h.path, {k.lower(): v for k, v in h.headers.items()}, body, time.monotonic()
        )
        with self._lock:
            self.requests.append(req)
        if req.is_turn and isinstance(body, dict):
            items = self._next_items(req)
            if body.get("stream", True):
                return self._send_stream(h, body, items)
            return _send_json(h, 200, self._response(body, items, "completed"))
        if h.command == "GET" and h.path.split("?")[0].endswith("/models"):
            return _send_json(h, 200, {"object": "list", "data": [], "models": []})
        # Anything else: an empty success, so a new endpoint shows up in api.requests rather
        # than as a retry storm.
        return _send_json(h, 200, {})

    def _next_items(self, req: Request) -> Items:
        with self._lock:
            i = self._turn
            self._turn += 1
        if i >= len(self.script):
            return [text(END_REPLY)]
        turn = self.script[i]
        try:
            items = turn(req.body, self) if callable(turn) else turn
        except Exception as e:  # a broken script must fail the test, not hang the CLI
            self.errors.append(f"turn {i + 1}: {type(e).__name__}: {e}")
            items = [text(f"script error: {e}")]
        return [self._item(it) for it in items]

    def _item(self, it: dict) -> dict:
        n = next(self._ids)
        if it["type"] == "function_call":
            args = it["arguments"]
            out = {
                "type": "function_call",
                "id": f"fc_fake{n:04d}",
                "call_id": it.get("call_id") or f"call_fake{n:04d}",
                "name": it["name"],
                "arguments": args if isinstance(args, str) else json.dumps(args),
                "status": "completed",
            }
            if it.get("namespace"):
                out["namespace"] = it["namespace"]
            return out
        return {
            "type": "message",
            "id": f"msg_fake{n:04d}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": it["text"], "annotations": []}],
        }

    def _usage(self) -> dict:
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.input_tokens + 20,
        }

    def _response(self, body: dict, items: Items, status: str) -> dict:
        return {
            "id": f"resp_fake{next(self._ids):04d}",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": body.get("model") or MODEL_ECHO,
            "output": items if status == "completed" else [],
            "usage": self._usage() if status == "completed" else None,
        }

    def _send_stream(self, h: BaseHTTPRequestHandler, body: dict, items: Items) -> None:
        events: list[dict] = []
        created = self._response(body, items, "in_progress")
        events.append({"type": "response.created", "response": created})
        events.append({"type": "response.in_progress", "response": created})
        for i, it in enumerate(items):
            if it["type"] == "function_call":
                events.append(
                    {
                        "type": "response.output_item.added",
                        "output_index": i,
                        "item": dict(it, arguments="", status="in_progress"),
                    }
                )
                for part in _chunks(it["arguments"]):
                    events.append(
                        {
                            "type": "response.function_call_arguments.delta",
                            "item_id": it["id"],
                            "output_index": i,
                            "delta": part,
                        }
                    )
                events.append(
                    {
                        "type": "response.function_call_arguments.done",
                        "item_id": it["id"],
                        "output_index": i,
                        "arguments": it["arguments"],
                    }
                )
            else:
                whole = it["content"][0]["text"]
                events.append(
                    {
                        "type": "response.output_item.added",
                        "output_index": i,
                        "item": dict(it, content=[], status="in_progress"),
                    }
                )
                part = {"type": "output_text", "text": "", "annotations": []}
                events.append(
                    {
                        "type": "response.content_part.added",
                        "item_id": it["id"],
                        "output_index": i,
                        "content_index": 0,
                        "part": part,
                    }
                )
                for piece in _chunks(whole):
                    events.append(
                        {
                            "type": "response.output_text.delta",
                            "item_id": it["id"],
                            "output_index": i,
                            "content_index": 0,
                            "delta": piece,
                        }
                    )
                events.append(
                    {
                        "type": "response.output_text.done",
                        "item_id": it["id"],
                        "output_index": i,
                        "content_index": 0,
                        "text": whole,
                    }
                )
                events.append(
                    {
                        "type": "response.content_part.done",
                        "item_id": it["id"],
                        "output_index": i,
                        "content_index": 0,
                        "part": dict(part, text=whole),
                    }
                )
            events.append({"type": "response.output_item.done", "output_index": i, "item": it})
        done = dict(created, status="completed", output=items, usage=self._usage())
        events.append({"type": "response.completed", "response": done})
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("x-request-id", f"req_fake{next(self._ids):04d}")
        h.send_header("Connection", "close")
        h.end_headers()
        for seq, event in enumerate(events):
            event = dict(event, sequence_number=seq)
            h.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            h.wfile.flush()
        h.close_connection = True


def _chunks(s: str, n: int = 40) -> list[str]:
    """Several deltas per item, as the real API sends, so the CLI's accumulation is exercised."""
    return [s[i : i + n] for i in range(0, len(s), n)] or [""]


def _send_json(h: BaseHTTPRequestHandler, status: int, obj: Any) -> None:
    data = json.dumps(obj).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


# -- reading request bodies ------------------------------------------------------------------


def function_calls(body: dict) -> list[dict]:
    """Every ``function_call`` item in a request's input, oldest first."""
    return [i for i in body.get("input") or [] if i.get("type") == "function_call"]


def call_outputs(body: dict) -> dict[str, Any]:
    """call_id -> the ``output`` of its ``function_call_output`` item, as the CLI sent it."""
    return {
        i.get("call_id"): i.get("output")
        for i in body.get("input") or []
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    }


def output_text(output: Any) -> str:
    """A function_call_output's text, whether the CLI sent a string or a list of content items."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):  # {"content": ..., "success": ...} in some versions
        return output_text(output.get("content") or output.get("text") or "")
    parts = []
    for x in output or []:
        if isinstance(x, dict):
            parts.append(x.get("text") or "")
        elif isinstance(x, str):
            parts.append(x)
    return "\n".join(parts)


def _main(argv: list[str]) -> int:
    api = FakeResponses().start()
    print(f"fake Responses API at {api.base_url}", flush=True)
    seen = 0
    try:
        while True:
            threading.Event().wait(0.5)
            for r in api.requests[seen:]:
                body = r.body if isinstance(r.body, dict) else {}
                print(r.method, r.path, "tools:", r.tool_names, "model:", body.get("model"))
            seen = len(api.requests)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
