"""The facts a compressed output must never lose, extracted from the original independently of
the compressors (plain regexes over the raw text), so the check cannot share a compressor's bugs.

Facts: failing test ids, exception type + message lines, ``path:line`` references into the
project's own code (library paths excluded), and compiler/type-checker error codes.

Two definitions on purpose: the regexes below (failing tests, exceptions, own ``path:line``,
error codes) are the original, independent ones; ``aider_gardener.critical`` is the widened shared
definition the compressors use to protect lines. ``all_missing_facts`` applies both, so a bug in
the shared extractor that hides a fact from the compressors still fails here.
"""

from __future__ import annotations

import re

from aider_gardener import critical as shared

LIBRARY_PATH = re.compile(
    r"site-packages|dist-packages|node_modules|[\\/]lib[\\/]python\d|<frozen|[\\/]\.cargo[\\/]|"
    r"[\\/]rustc[\\/]|[\\/]go[\\/]src[\\/]|[\\/]jdk|[\\/]Program Files[\\/]Python|importlib",
    re.I,
)
FAILED_TEST = [
    re.compile(r"^FAILED\s+(\S+::\S+)", re.M),  # pytest short summary
    re.compile(r"^ERROR\s+(\S+::\S+)", re.M),
    re.compile(r"^\s*--- FAIL: (\S+)", re.M),  # go test
    re.compile(r"^test (\S+) \.\.\. FAILED", re.M),  # cargo test
    re.compile(r"^FAIL (\S+\.(?:spec|test)\.[jt]sx?)", re.M),  # jest suite
    re.compile(r"^\[ERROR\]\s+(\w[\w.$]*\.\w+:\d+\s)", re.M),  # surefire "Class.method:42 msg"
]
EXCEPTION_LINE = re.compile(
    r"^(?:E\s+)?((?:[A-Za-z_][\w$]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure))"
    r"(?::\s*(\S.{0,80}))?\s*$",
    re.M,
)
PATH_LINE = re.compile(
    r"(?<![\w.])((?:[A-Za-z]:)?[\w.\\/-]*[\w-]\.[A-Za-z]{1,5})(?::|\((?=\d+(?:,\d+)?\)))(\d+)\b"
)
ERROR_CODE = re.compile(r"\b(E\d{4}|TS\d{4,5}|CS\d{4})\b")


def failing_tests(text: str) -> set[str]:
    return {m.group(1).strip() for rx in FAILED_TEST for m in rx.finditer(text)}


def exception_lines(text: str) -> set[str]:
    """(type, first 60 chars of the message) for every exception-looking line."""
    found = set()
    for m in EXCEPTION_LINE.finditer(text):
        msg = (m.group(2) or "").strip()[:60]
        found.add(f"{m.group(1)}: {msg}" if msg else m.group(1))
    return found


def project_path_lines(text: str) -> set[str]:
    found = set()
    for m in PATH_LINE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        line = text[line_start : text.find("\n", m.end()) if "\n" in text[m.end() :] else len(text)]
        path = m.group(1)
        if LIBRARY_PATH.search(line) or path.startswith(("//", "http", "www.")):
            continue
        if _node_core_frame(path, line):
            continue
        found.add(f"{m.group(1)}:{m.group(2)}")
    return found


def _node_core_frame(path: str, line: str) -> bool:
    """``at emitNone (events.js:86:13)``: Node's own modules carry no directory."""
    bare = "/" not in path.replace("internal/", "", 1) and "\\" not in path
    return bare and path.endswith(".js") and line.lstrip().startswith("at ")


def error_codes(text: str) -> set[str]:
    return set(ERROR_CODE.findall(text))


def missing_facts(original: str, summary: str) -> dict[str, set[str]]:
    """Facts of ``original`` absent from ``summary`` (whitespace-normalised comparison)."""
    flat = " ".join(summary.split())
    flat_nosep = flat.replace("\\", "/")
    missing: dict[str, set[str]] = {}
    checks = {
        "failing_tests": failing_tests(original),
        "exceptions": exception_lines(original),
        "path_lines": project_path_lines(original),
        "error_codes": error_codes(original),
    }
    for kind, facts in checks.items():
        gone = set()
        for fact in facts:
            if kind == "exceptions":
                etype, _, msg = fact.partition(": ")
                ok = etype in flat and " ".join(msg.split())[:40] in flat
            elif kind == "path_lines":
                path, _, line = fact.rpartition(":")
                ok = _path_line_present(flat_nosep, path.replace("\\", "/"), line)
            else:
                ok = " ".join(fact.split()) in flat
            if not ok:
                gone.add(fact)
        if gone:
            missing[kind] = gone
    return missing


def _path_line_present(flat: str, path: str, line: str) -> bool:
    """``path:line`` or ``path(line,col)``, or the file name with the line when the compressor
    shortened a long absolute prefix."""
    name = path.rsplit("/", 1)[-1]
    for cand in (path, name):
        if re.search(re.escape(cand) + r"[:(]" + re.escape(line) + r"\b", flat):
            return True
        # grouped diagnostics: "TS1005 ×12 — msg — in a.tsx: lines 120,121; in b.tsx: line 7"
        if re.search(
            r"in (?:\S*/)?"
            + re.escape(cand.lstrip("/"))
            + r": lines? (?:\d+,)*"
            + re.escape(line)
            + r"\b",
            flat,
        ):
            return True
    return False


def all_missing_facts(original: str, summary: str) -> dict[str, set[str]]:
    """The independent checks above plus every kind of the shared definition (frames, codes of
    every tool, panics, terraform actions, pods, FATAL/ERROR lines)."""
    found = dict(missing_facts(shared.strip_ansi(original), summary))
    for kind, gone in shared.missing(original, summary).items():
        found[f"shared.{kind}"] = gone
    return found
