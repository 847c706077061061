"""Are the ids and paths an agent used next still in the replaced result it read them from?

The Claude Code replay's measure: a summary can keep every fact and still hide the one thing the
agent read a result for, the id or path it passes to its next call (query rows folded to "2 samples
… 33 more items": 32 of 33 missing). So for each tool result the hooks replaced, the next tool
call's input is cut into id- and path-like tokens; those found in the original result are what the
agent used from it, and each counts as kept when the replaced text still names it, as one string or,
for a path, as its directory line and its name under it (a tree). A path the call gives absolute is
matched by its longest tail that the result shows (a Glob lists paths relative to the project).
Linear: one character-class scan per input string, substring tests per token.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

_TOKEN = re.compile(r"[\w./@:#~+-]{4,300}")
_MARKS = frozenset("0123456789/._-")


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif value is not None and not isinstance(value, bool):
        yield json.dumps(value)


def used(tool_input: Any, output: str) -> list[str]:
    """The id- and path-like tokens of ``tool_input`` that ``output`` shows, each as it shows it
    (an absolute path cut to the tail the output has)."""
    found: dict[str, None] = {}
    for s in _strings(tool_input):
        for m in _TOKEN.finditer(s):
            tok = m.group(0).strip(".:-")
            if len(tok) < 4 or not _MARKS.intersection(tok) or not any(c.isalpha() for c in tok):
                continue
            ref = _in_output(tok, output)
            if ref is not None:
                found[ref] = None
    return list(found)


def _in_output(tok: str, output: str) -> str | None:
    if tok in output:
        return tok
    at = tok.find("/")
    while at >= 0:
        tail = tok[at + 1 :]
        if "/" in tail and tail in output:
            return tail
        at = tok.find("/", at + 1)
    return None


def kept(ref: str, seen: str) -> bool:
    """``ref`` is named by ``seen``: whole, or as a tree's directory line and a name under it
    (after its git status letters, ``  M core.sh``, or in a list of names, ``dir/: a, b``)."""
    if ref in seen:
        return True
    cut = ref.rfind("/")
    if cut <= 0:
        return False
    folder, name = re.escape(ref[: cut + 1]), re.escape(ref[cut + 1 :])
    tree = rf"(?m)^  (?:[MADRCTU?!+]{{1,3}} )?{name}(?:\s|$)"
    listed = rf"(?m)^  {folder}: (?:.*, )?{name}(?:,|$)"
    if ref[: cut + 1] in seen and re.search(tree, seen):
        return True
    return re.search(listed, seen) is not None
