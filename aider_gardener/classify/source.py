"""What the provenance of a text says about its class: file extensions and shell commands.

Known provenance beats content cues: ``cat config.json`` prints structured data even when it is
malformed, and ``/read notes.md`` is prose whatever it contains. Only decisive hints are returned;
anything else (``pytest``, ``make``, ``python x.py``) is command *output* and left to the content.
"""

from __future__ import annotations

import os
import re
import shlex

from ..types import ContentClass

CODE_EXT = {
    "py", "pyi", "js", "jsx", "mjs", "cjs", "ts", "tsx", "java", "kt", "kts", "scala", "go", "rs",
    "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "cs", "fs", "rb", "php", "swift", "m", "mm", "lua",
    "pl", "pm", "r", "jl", "dart", "ex", "exs", "erl", "hs", "ml", "clj", "elm", "sol", "vue",
    "svelte", "sh", "bash", "zsh", "fish", "ps1", "bat", "cmd", "sql", "html", "htm", "css",
    "scss", "sass", "less", "gradle", "cmake", "mk", "proto", "graphql", "gql", "tf", "hcl",
    "nix", "zig", "v", "vhd", "asm", "s", "dockerfile", "makefile",
}  # fmt: skip
STRUCTURED_EXT = {
    "json", "jsonc", "json5", "jsonl", "ndjson", "geojson", "yaml", "yml", "toml", "xml", "csv",
    "tsv", "lock", "ini", "cfg", "conf", "properties", "plist", "ipynb", "har",
}  # fmt: skip
# ``.txt`` is not here: a text file is as often a saved test run or build log (``pytest >
# out.txt``; ``cat pytest-output.txt`` in a Claude Code session entered a 1,200-line pytest log
# uncompressed as prose) as it is prose, so its content decides.
PROSE_EXT = {"md", "markdown", "rst", "adoc", "org", "tex", "rtf"}
LOG_EXT = {"log", "out", "err"}

# fence info strings / language names
STRUCTURED_LANGS = {
    "json", "jsonc", "json5", "jsonl", "ndjson", "yaml", "yml", "toml", "xml", "csv", "tsv",
    "ini", "properties", "plist",
}  # fmt: skip
DIFF_LANGS = {"diff", "patch", "udiff"}
SHELL_LANGS = {
    "bash", "sh", "shell", "zsh", "fish", "console", "cmd", "bat", "batch", "powershell", "ps",
    "ps1", "pwsh", "shellsession",
}  # fmt: skip
LOOSE_LANGS = {"", "text", "txt", "plain", "plaintext", "markdown", "md", "output", "log", "none"}

_VIEWERS = {"cat", "bat", "batcat", "less", "more", "head", "tail", "type", "get-content", "gc"}
_DIFF_CMDS = re.compile(
    r"^(?:git\s+(?:diff|show|log\s.*-p|format-patch|stash\s+show)|diff\s|hg\s+diff)"
)
_JSON_CMDS = re.compile(r"(?:^|\s)(?:jq|gh\s+api|-o\s*json|--output[ =]json|--json)\b")


def ext_of(path: str) -> str:
    base = os.path.basename(path.strip().strip("'\"`"))
    if base.lower() in ("dockerfile", "makefile", "gemfile", "rakefile", "procfile"):
        return base.lower()
    _, ext = os.path.splitext(base)
    return ext[1:].lower()


def class_for_path(path: str) -> ContentClass | None:
    ext = ext_of(path)
    if ext in CODE_EXT:
        return ContentClass.CODE
    if ext in STRUCTURED_EXT:
        return ContentClass.STRUCTURED
    if ext in PROSE_EXT:
        return ContentClass.PROSE
    if ext in LOG_EXT:
        return ContentClass.LOG
    return None


def class_for_lang(lang: str) -> ContentClass | None:
    """Class a fence's info string decides on its own (None: look at the content)."""
    lang = lang.lower().lstrip(".")
    if lang in LOOSE_LANGS:
        return None
    if lang in DIFF_LANGS:
        return ContentClass.EDIT
    if lang in STRUCTURED_LANGS:
        return ContentClass.STRUCTURED
    if lang in SHELL_LANGS:
        return ContentClass.CODE
    return ContentClass.CODE


def viewed_file(command: str) -> str | None:
    """``cat src/app.py`` -> ``src/app.py``: a command that prints one file verbatim."""
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        words = command.split()
    if len(words) < 2 or "|" in words or ">" in words:
        return None
    if os.path.basename(words[0]).lower() not in _VIEWERS:
        return None
    files = [w for w in words[1:] if not w.startswith("-") and not w.isdigit()]
    return files[-1] if len(files) == 1 else None


def command_class(command: str | None) -> ContentClass | None:
    """The class a command's output has by construction, when the command says so."""
    if not command:
        return None
    command = command.strip()
    target = viewed_file(command)
    if target:
        return class_for_path(target)
    if _DIFF_CMDS.match(command):
        return ContentClass.EDIT
    return None


def expects_json(command: str | None) -> bool:
    return bool(command and _JSON_CMDS.search(command))


def runner(command: str | None) -> str | None:
    """Name of the test runner or build tool behind a command, for the log compressor."""
    if not command:
        return None
    c = command.lower()
    for name, pat in _RUNNERS:
        if pat.search(c):
            return name
    return None


_RUNNERS = [
    ("pytest", re.compile(r"\bpytest\b|-m pytest")),
    ("unittest", re.compile(r"-m unittest\b")),
    ("jest", re.compile(r"\bjest\b|\b(?:npm|yarn|pnpm)\s+(?:run\s+)?test\b")),
    ("vitest", re.compile(r"\bvitest\b")),
    ("go test", re.compile(r"\bgo\s+test\b")),
    ("cargo", re.compile(r"\bcargo\s+(?:test|build|check|run|clippy)\b")),
    ("maven", re.compile(r"\bmvnw?\b")),
    ("gradle", re.compile(r"\bgradlew?\b")),
    ("tsc", re.compile(r"\btsc\b")),
    ("cypress", re.compile(r"\bcypress\b")),
    ("bun", re.compile(r"\bbun\s+test\b")),
]
