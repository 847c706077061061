"""Which Read results the Claude Code hook may stand a summary in for, and the outline it gives
a large source file when asked to.

Read is what the model edits from: a summary in place of a file it is about to change would have
it write ``old_string`` from text that is not there. So only files nobody edits by hand are
replaced like command output: logs (and the outputs Claude Code saved to its tool-results
folder), data, lock files, minified and generated files. A source file is replaced only in the
opt-in outline mode (``GARDENER_HOOK_READ_OUTLINE=1``): the tree-sitter skeleton
``compress/code.py`` builds, each kept line with its line number in the file and each folded
body with its line range, so the model reads the part it needs with ``offset``/``limit``. A Read
that gives ``offset`` or ``limit`` asked for those lines and is never replaced.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from typing import Any

OUTLINE_ENV = "GARDENER_HOOK_READ_OUTLINE"
LOG_EXT = frozenset({".log", ".out", ".err", ".trace", ".output"})
DATA_EXT = frozenset({".csv", ".tsv", ".psv", ".jsonl", ".ndjson", ".geojson", ".har", ".json"})
# JSON a person edits: manifests and tool configuration are not data
CONFIG_JSON = re.compile(
    r"^(?:package|composer|app|angular|project|nx|vercel|firebase|turbo|lerna|deno|renovate|"
    r"biome|manifest|settings|launch|tasks|extensions|devcontainer|\.?eslintrc|\.?babelrc|"
    r"\.?prettierrc|tsconfig[\w.-]*|jsconfig[\w.-]*|appsettings[\w.-]*|[\w.-]+\.config)\.json$",
    re.I,
)
LOCK_NAMES = frozenset(
    {
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lock",
        "deno.lock",
        "cargo.lock",
        "poetry.lock",
        "pipfile.lock",
        "pdm.lock",
        "uv.lock",
        "composer.lock",
        "gemfile.lock",
        "podfile.lock",
        "pubspec.lock",
        "mix.lock",
        "flake.lock",
        "go.sum",
        "packages.lock.json",
        "gradle.lockfile",
        "conda-lock.yml",
    }
)
MINIFIED_NAME = re.compile(r"[.-]min\.(?:js|mjs|cjs|css)$|\.bundle\.js$|\.chunk\.js$|\.map$", re.I)
GENERATED_NAME = re.compile(
    r"(?:_pb2(?:_grpc)?\.pyi?|\.pb\.(?:go|cc|h|swift)|\.g\.dart|\.freezed\.dart|\.designer\.cs"
    r"|[._-]generated\.\w+|_gen\.go)$",
    re.I,
)
GENERATED_DIRS = frozenset(
    {"dist", "node_modules", "vendor", "target", ".next", ".nuxt", "__generated__", "generated"}
)
GENERATED_MARK = re.compile(
    r"@generated|\bdo not edit\b|\bauto-?generated\b"
    r"|\bthis file (?:was|is) (?:automatically )?generated\b",
    re.I,
)
MARK_LINES = 5
MINIFIED_LINE = 5000  # a line this long, with lines this long on average, is not written by hand
MINIFIED_MEAN = 300


def _parts(path: str) -> tuple[str, list[str]]:
    p = PurePosixPath(path.replace("\\", "/"))
    return p.name, [x.lower() for x in p.parts[:-1]]


def read_kind(path: Any, text: str, cls: str | None = None) -> str | None:
    """What kind of file nobody edits by hand ``path`` is ("log", "saved output", "data",
    "lock", "minified", "generated"), or None for a file the model may edit. ``cls``: the
    pipeline's class of the text (a ``.txt`` file that reads as a log is one)."""
    if not isinstance(path, str) or not path:
        return None
    name, dirs = _parts(path)
    lower = name.lower()
    ext = os.path.splitext(lower)[1]
    if "tool-results" in dirs and ".claude" in dirs or "tasks" in dirs and ext == ".output":
        return "saved output"
    if lower in LOCK_NAMES or ext == ".lock":
        return "lock"
    if ext in LOG_EXT or cls == "log" and ext in ("", ".txt"):
        return "log"
    if MINIFIED_NAME.search(lower):
        return "minified"
    if GENERATED_NAME.search(lower) or GENERATED_DIRS.intersection(dirs):
        return "generated"
    if ext in DATA_EXT and not (ext == ".json" and CONFIG_JSON.match(name)):
        return "data"
    head = text[:4000].split("\n", MARK_LINES)[:MARK_LINES]
    if any(GENERATED_MARK.search(line) for line in head):
        return "generated"
    lines = text.count("\n") + 1
    if len(text) / lines >= MINIFIED_MEAN and max(map(len, text.split("\n"))) >= MINIFIED_LINE:
        return "minified"
    return None


def outline_wanted() -> bool:
    return os.environ.get(OUTLINE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def outline(text: str, path: str, start: int = 1) -> tuple[str, int] | None:
    """The file's skeleton as lines ``N| text`` (``N`` its line in the file) and fold markers
    ``… lines A-B …``, and the number of lines folded; None when nothing folds (no grammar fits
    and indentation folding finds nothing, or the file is short)."""
    from ..compress import code

    lines = text.split("\n")
    if len(lines) < code.MIN_LINES:
        return None
    plan = code._plan(lines, path, frozenset())  # the skeleton compress_code renders
    folds = code._spare_facts(lines, plan.folds)
    if not folds:
        return None
    fold_at = {s: e for s, e in folds}
    out, i, folded = [], 0, 0
    while i < len(lines):
        if i in fold_at:
            end = fold_at[i]
            body = next((x for x in lines[i : end + 1] if x.strip()), "")
            indent = body[: len(body) - len(body.lstrip())]
            out.append(f"{indent}… lines {start + i}-{start + end} …")
            folded += end - i + 1
            i = end + 1
            continue
        if lines[i].strip():
            out.append(f"{start + i}| {lines[i]}")
        i += 1
    return "\n".join(out), folded


_NUMBERED = re.compile(r"\A\d+\| ")


def outline_rank(line: str) -> tuple[int, int]:
    """Which outline lines stay when the outline is over the budget: the outer levels first (a
    file's imports and definitions, then their members), a fold marker after the lines of its
    level."""
    code = _NUMBERED.sub("", line, count=1)
    depth = len(code) - len(code.lstrip())
    return depth, 0 if code is not line else 1
