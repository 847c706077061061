"""A context hook that stores every chat message, compressed, so any of it can be recalled.

Install with ``coder.context_hooks.append(StoreIngestHook(store))``. Hooks run before each
request, so a message is stored whichever of aider's many paths appended it (the prompt, the
reply, /run and /test output, /web pages, reflections). Only text messages are stored; images
and function calls are left alone.
"""

import re

from .types import Source

# aider.prompts.run_output: the shape /run and /test output enters the chat in.
RUN_OUTPUT = re.compile(
    r"\AI ran this command:\n\n(?P<command>.*?)\n\nAnd got this output:\n\n(?P<output>.*)\Z",
    re.DOTALL,
)


def message_source(msg):
    """Where a message came from, as far as its text tells: command output counts as a tool."""
    content = msg["content"]
    match = RUN_OUTPUT.match(content)
    if msg.get("role") == "user" and match:
        return match.group("output"), Source(role="tool", command=match.group("command"))
    return content, Source(role=msg.get("role"))


class StoreIngestHook:
    """Ingest each message once. Messages are tracked by identity (aider appends new dicts and
    never edits old ones); the dicts are kept referenced so an id is never reused."""

    __name__ = "StoreIngestHook"

    def __init__(self, store):
        self.store = store
        self.entries = {}  # id(msg) -> (msg, Entry)

    def __call__(self, coder):
        for messages in (coder.done_messages, coder.cur_messages):
            for msg in messages:
                if id(msg) in self.entries:
                    continue
                if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
                    continue
                text, source = message_source(msg)
                self.entries[id(msg)] = (msg, self.store.ingest(text, source))

    def entry(self, msg):
        """The store entry of one message, or None if it was not stored."""
        found = self.entries.get(id(msg))
        return found[1] if found and found[0] is msg else None
