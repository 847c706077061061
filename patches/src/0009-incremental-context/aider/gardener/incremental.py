"""IncrementalContext: a compiled summary of old turns plus the last turns in full.

Eviction lets the prompt grow up to the budget and then cuts; this view keeps it about constant
from the first turn on. Everything before the last ``recent_turns`` turns is sent as one message
with a line per message (the user's words, the first line of each reply and of each output's
compressed summary, with its store id), capped at ``share`` of the context window, oldest lines
first to go. Lines are compiled once per message, so the compiled text changes only at its end
and stays a stable prefix for prompt caching.

It is a view (``Coder(history_view=...)``): ``done_messages`` keeps every message, so turning
the mode off, or recalling an id, loses nothing.
"""

from .ingest import RUN_OUTPUT
from .tokens import count_tokens
from .types import HANDLE_PREFIX

LINE_CHARS = 240
LOW_WATER = 0.5

HEADER = "Summary of our earlier conversation (each [id=...] is stored in full):"
REPLY = "Ok."


class IncrementalView:
    def __init__(self, ingest_hook, recent_turns=3, share=0.25):
        self.hook = ingest_hook
        self.recent_turns = recent_turns
        self.share = share
        self.lines = {}  # id(msg) -> (msg, line)
        self.floor = 0  # lines before this position were cut earlier

    def __call__(self, coder, done):
        starts = [i for i, msg in enumerate(done) if is_prompt(msg)]
        if len(starts) <= self.recent_turns:
            return done
        boundary = starts[-self.recent_turns]
        model = coder.main_model.name
        window = coder.main_model.info.get("max_input_tokens") or 8192
        summary = self.compile(done[:boundary], int(window * self.share), model)
        return [dict(role="user", content=summary), dict(role="assistant", content=REPLY)] + list(
            done[boundary:]
        )

    def compile(self, old, cap, model):
        lines = [line for line in (self.line(msg) for msg in old) if line]
        costs = [count_tokens(line, model) + 1 for line in lines]
        start = min(self.floor, len(lines))
        total = sum(costs[start:])
        if total > cap:
            # Cut to LOW_WATER of the cap in one step: the prefix changes once per batch.
            while total > LOW_WATER * cap and start < len(lines):
                total -= costs[start]
                start += 1
            self.floor = start
        head = HEADER
        if start:
            head += f"\n({start} older lines omitted.)"
        return head + "\n" + "\n".join(lines[start:])

    def line(self, msg):
        known = self.lines.get(id(msg))
        if known is not None and known[0] is msg:
            return known[1]
        line = self.compile_line(msg)
        self.lines[id(msg)] = (msg, line)
        return line

    def compile_line(self, msg):
        content = msg.get("content")
        if not isinstance(content, str) or content.strip() in ("", "Ok."):
            return ""
        entry = self.hook.entry(msg) if self.hook is not None else None
        match = RUN_OUTPUT.match(content)
        if entry is not None and entry.stored:
            text = entry.summary
        else:
            text = match.group("output") if match else content
        first = next(
            (
                line.strip()
                for line in text.splitlines()
                if line.strip() and not line.startswith(HANDLE_PREFIX)
            ),
            "",
        )
        if len(first) > LINE_CHARS:
            first = first[: LINE_CHARS - 3] + "..."
        handle = f" [id={entry.id}]" if entry is not None and entry.stored else ""
        if msg.get("role") == "user" and match:
            return f"  Output of `{match.group('command')}`: {first}{handle}"
        if msg.get("role") == "user":
            return f"- You said: {first}{handle}"
        return f"  I replied: {first}{handle}"


def is_prompt(msg):
    content = msg.get("content")
    return msg.get("role") == "user" and isinstance(content, str) and not RUN_OUTPUT.match(content)
