"""``python -m bench.fuzz --n 20000 [--seed S] [--data ../shared/data]``: hostile and mutated
inputs through ``compress``, checking the promises the rest of the gardener builds on.

Each input is checked for: no exception; a summary never longer than the original (characters
and tokens); ``compress`` of the summary leaving it unchanged (same source, same forced class);
and time linear in the input's size. Time is judged relative to the run itself: the inputs that
took longest per byte are generated again at 2x and 4x their size, and one whose time grows
faster than size**1.5 is reported slow. The machine is noisy, so speed only ever informs.

Inputs: the bad kinds (binary, NULs at every interesting offset, invalid UTF-8, UTF-16 with and
without a BOM, huge lines, long whitespace runs, long runs of one character after a prefix the
patterns key on, deep and malformed JSON, unparsable code, ANSI junk, lone surrogates, empty, a
quoted handle line) and real outputs from ``DATA/tool_outputs*`` mutated (byte flips,
truncation, splicing, duplication, junk insertion; skipped when the folder is absent, read in
place, never copied). Failing inputs are written to a temp dir; ``--replay FILE`` runs one again.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import math
import os
import random
import signal
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("GARDENER_SHARED_DATA", ROOT.parent / "shared" / "data"))
REAL_DIRS = ("tool_outputs", "tool_outputs_more")
REAL_SUFFIXES = (".log", ".txt", ".json", ".diff", ".yaml")

# Inputs below this many bytes are timed but not judged: a call's fixed cost dominates them.
TIMED_FROM = 16_384
RERUNS = 8  # worst inputs (time per byte) generated again at 2x and 4x
SUPERLINEAR = 1.5  # time growing faster than size**this is reported slow
FAR = 20  # an input this many times the median time per byte is timed again too
TIMEOUT = 120  # seconds for one call; a stall counts as slow, and the run goes on

CHECKS = ("crash", "longer", "not_idempotent", "slow")
LABELS = {
    "crash": "crashes",
    "longer": "longer than the input",
    "not_idempotent": "not idempotent",
    "slow": "slow (super-linear or stalled)",
}
# Not a broken promise, but a compressor bug the pipeline hid: it raised, and run_compressor fell
# back to head/tail truncation. Counted and saved; the CI test does not require zero.
FALLBACK = "fallback"


@dataclass
class Case:
    index: int
    kind: str
    seed: int
    size: int
    source: tuple[str | None, str | None, str | None]  # role, command, path
    cls: str | None  # a forced ContentClass value, as the CLI's --class
    data: str | bytes = b""


@dataclass
class Report:
    n: int = 0
    seconds: float = 0.0
    failures: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHECKS, 0))
    fallbacks: int = 0
    kinds: Counter = field(default_factory=Counter)
    timings: list[tuple[float, int, int]] = field(default_factory=list)  # (seconds, bytes, index)
    reruns: list[dict] = field(default_factory=list)
    worst: dict | None = None
    out_dir: Path | None = None
    data_dir: Path | None = None
    real_files: int = 0

    @property
    def ok(self) -> bool:
        return not any(self.failures.values())


class _Fallbacks(logging.Handler):
    """Counts run_compressor's "compressor failed" warnings during one call."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


# ---------------------------------------------------------------------------------------------
# Generators: (rng, size, corpus) -> str | bytes, about ``size`` bytes, deterministic per rng.

_WORDS = (
    "error warning info debug failed passed test build module import value request response "
    "worker item config path file line column token cache index session store recall summary "
    "the a of to in is for on with as by at from"
).split()
_PATHS = ["src/main.rs", "app/models/user.py", "lib/index.ts", "pkg/server.go", "Main.java"]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _log(rng: random.Random, size: int) -> str:
    out, total = [], 0
    while total < size:
        line = (
            f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 12:{rng.randint(10, 59)}:"
            f"{rng.randint(10, 59)} {rng.choice(['INFO', 'WARN', 'ERROR', 'DEBUG'])} "
            f"[{rng.choice(_PATHS)}:{rng.randint(1, 999)}] {_words(rng, rng.randint(2, 12))} "
            f"id={rng.randint(0, 10**6)}"
        )
        out.append(line)
        total += len(line) + 1
    return "\n".join(out) + "\n"


def _as_input(rng: random.Random, text: str) -> str | bytes:
    return text if rng.random() < 0.5 else text.encode("utf-8", "surrogatepass")


def gen_binary(rng, size, corpus):
    head = rng.choice([b"", b"\x7fELF\x02\x01\x01", b"\x89PNG\r\n\x1a\n", b"PK\x03\x04"])
    body = rng.randbytes(size)
    if rng.random() < 0.3:  # mostly text with binary inside
        text = _log(rng, size).encode()
        at = rng.randrange(len(text) + 1)
        body = text[:at] + body[: max(1, size // 10)] + text[at:]
    return head + body


def gen_nuls(rng, size, corpus):
    text = _log(rng, max(size, 64))
    offsets = [0, 1, 8191, 8192, 8193, 16384, len(text) // 2, len(text) - 1, len(text)]
    for _ in range(rng.randint(1, 4)):
        at = min(len(text), rng.choice(offsets + [rng.randrange(len(text) + 1)]))
        text = text[:at] + "\x00" * rng.choice([1, 1, 2, 8, 200]) + text[at:]
    return _as_input(rng, text)


def gen_invalid_utf8(rng, size, corpus):
    data = bytearray(_log(rng, max(size, 16)).encode())
    bad = [b"\xff", b"\xfe", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80"]
    for _ in range(rng.randint(1, max(1, size // 200))):
        at = rng.randrange(len(data) + 1)
        data[at:at] = rng.choice(bad)
    if rng.random() < 0.3:
        data += "é€😀".encode()[: rng.randint(1, 8)]  # cut inside a character
    return bytes(data)


def gen_utf16(rng, size, corpus):
    text = rng.choice([_log, _code_text])(rng, max(size // 2, 8))
    codec = rng.choice(["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
    data = text.encode(codec, "surrogatepass")
    if rng.random() < 0.2:
        data = data[:-1]  # odd length
    return data


def gen_huge_line(rng, size, corpus):
    size = max(size, TIMED_FROM)
    kind = rng.randrange(5)
    if kind == 0:
        line = base64.b64encode(rng.randbytes(size * 3 // 4)).decode()
    elif kind == 1:
        line = json.dumps([{"id": i, "name": _words(rng, 3)} for i in range(size // 40)])
    elif kind == 2:
        line = "".join(rng.choice("abcdefghij") for _ in range(size))
    elif kind == 3:
        line = ";".join(f"var a{i}=function(b){{return b+{i}}}" for i in range(size // 30))
    else:
        line = rng.choice(["x", "=", "-", "\ufffd", "中"]) * size
    return _as_input(rng, rng.choice(["", "$ cmd\n"]) + line + rng.choice(["", "\n", "\ndone\n"]))


def gen_whitespace(rng, size, corpus):
    parts, total = [], 0
    while total < size:
        run = rng.choice([" ", "\n", "\t", "\r\n", " \n", "\u3000", "\xa0"]) * rng.randint(1, size)
        if rng.random() < 0.3:
            run = "".join(rng.choice(" \t\n\r\x0b\x0c") for _ in range(rng.randint(1, size)))
        parts.append(run[: size - total + 1])
        if rng.random() < 0.6:
            parts.append(rng.choice([_words(rng, 3), "x.", "def f():", "=" * 80, "/path"]))
        total += sum(map(len, parts[-2:]))
    return _as_input(rng, "".join(parts))


_RUN_UNITS = [
    " ",
    "\t",
    "\n",
    " \n",
    "-",
    "=",
    "_",
    ".",
    "/",
    "\\",
    ":",
    "~",
    "^",
    "(",
    "[",
    "<",
    "@",
]
_RUN_UNITS += ["0", "a", "a.", "a/", "at ", "_ ", "- ", "\xa0", "\ufffd", "|", "#", "*", "!", "?"]
_RUN_PREFIXES = ["", "    ", "> ", "E   ", "Error: ", "at ", "    at ", "1 | ", "===", "FAILED "]
_RUN_PREFIXES += ["test_x.py::t ", "tests/a.py ", "Caused by: ", "# ", "x = ", "| ", "Plan: "]


def gen_runs(rng, size, corpus):
    """A line or two made of one character (or pair) repeated, after a prefix a pattern keys on:
    the shape that makes a backtracking regex quadratic. A quarter of them start the output:
    some checks read only its first lines (a text table's header and rule line)."""
    lines = [] if rng.random() < 0.25 else [_log(rng, 200).rstrip("\n")]
    for _ in range(rng.randint(1, 2)):
        unit = rng.choice(_RUN_UNITS)
        run = unit * max(1, size // len(unit) // 2)
        lines.append(rng.choice(_RUN_PREFIXES) + run + rng.choice(["", "!", "x", " x", ")"]))
    lines.append(_log(rng, 100).rstrip("\n"))
    return _as_input(rng, "\n".join(lines) + "\n")


def gen_nested_json(rng, size, corpus):
    depth = max(1, size // 6)
    kind = rng.randrange(4)
    if kind == 0:
        text = "[" * depth + "1" + "]" * depth
    elif kind == 1:
        text = '{"a":' * depth + "null" + "}" * depth
    elif kind == 2:
        text = '[{"k":' * (depth // 2) + '"v"' + "}]" * (depth // 2)
    else:
        text = "[" * depth  # never closed
    if rng.random() < 0.4:
        text = text[: rng.randrange(len(text) + 1)]
    return _as_input(rng, text)


def _json_doc(rng: random.Random, size: int) -> str:
    items = []
    total = 0
    while total < size:
        item = {
            "id": rng.randint(0, 10**6),
            "name": _words(rng, 2),
            "tags": [_words(rng, 1) for _ in range(rng.randint(0, 4))],
            "nested": {"ok": rng.random() < 0.5, "score": rng.random()},
        }
        items.append(item)
        total += 100
    return json.dumps({"items": items, "total": len(items)}, indent=rng.choice([None, 2]))


def gen_malformed_json(rng, size, corpus):
    text = _json_doc(rng, max(size, 50))
    for _ in range(rng.randint(1, 5)):
        at = rng.randrange(len(text) + 1)
        op = rng.randrange(5)
        if op == 0:
            text = text[:at]
        elif op == 1:
            text = text[:at] + text[at + 1 :]
        elif op == 2:
            text = (
                text[:at] + rng.choice([",", "}", "]", '"', "'", "NaN", "\x01", ",,"]) + text[at:]
            )
        elif op == 3:
            text = text.replace('"', "'", rng.randint(1, 50))
        else:
            text = text[:at] + text[at : at + 500] * rng.randint(2, 5) + text[at:]
    return _as_input(rng, text)


def _code_text(rng: random.Random, size: int) -> str:
    lines, total = [], 0
    templates = [
        "def {w}(self, {w}):",
        "    return {w}({w}, {n})",
        "class {W}({W}):",
        "    if {w} == {n}:",
        "function {w}({w}) {{ return {w} + {n}; }}",
        "int {w}(int {w}) {{",
        "}}",
        "    // {w} {w}",
        "import {w}.{w}",
        '    print("{w}")',
    ]
    while total < size:
        line = rng.choice(templates).format(
            w=rng.choice(_WORDS), W=rng.choice(_WORDS).title(), n=rng.randint(0, 99)
        )
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def gen_code(rng, size, corpus):
    text = _code_text(rng, max(size, 20))
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(len(text) + 1)
        junk = rng.choice(["(", ")", "{", '"', "'''", "\t", "    " * 20, "def (", "\\", "@@"])
        text = text[:at] + junk + text[at:]
    return _as_input(rng, text)


_ANSI = [
    "\x1b[31m",
    "\x1b[0m",
    "\x1b[1;32;40m",
    "\x1b[2K",
    "\x1b[1A",
    "\x1b[?25l",
    "\x1b]0;title\x07",
    "\x1b]8;;http://x\x1b\\",
    "\x1b[",
    "\x1b",
    "\x1b]0;never closed",
    "\r",
    "\x9b31m",
    "\x1b[38;5;2",
    "\x08",
]


def gen_ansi(rng, size, corpus):
    base = _log(rng, max(size, 20))
    out = []
    for line in base.splitlines(keepends=True):
        for _ in range(rng.randint(0, 4)):
            at = rng.randrange(len(line) + 1)
            line = line[:at] + rng.choice(_ANSI) + line[at:]
        out.append(line)
    if rng.random() < 0.2:
        out.append("".join(rng.choice(_ANSI) for _ in range(max(1, size // 8))))
    return _as_input(rng, "".join(out))


def gen_surrogates(rng, size, corpus):
    text = _log(rng, max(size, 16))
    for _ in range(rng.randint(1, 10)):
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice(["\ud800", "\udfff", "\udcff", "\udc80\udc81"]) + text[at:]
    return text  # str only: bytes cannot hold a lone surrogate


def gen_empty(rng, size, corpus):
    return rng.choice(
        ["", b"", " ", "\n", "\r\n", "\x00", b"\xff", "\ufeff", b"\xef\xbb\xbf", "\x1b[0m", "\t\n "]
    )


def gen_handle(rng, size, corpus):
    """Text that quotes or ends with the handle marker: the summary check must not be fooled."""
    from aider_gardener.types import handle_line

    text = _log(rng, max(size, 40))
    fake = handle_line("".join(rng.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(10)))
    at = rng.choice([0, len(text) // 2, len(text)])
    return _as_input(rng, text[:at] + fake + text[at:])


def gen_real(rng, size, corpus):
    if not corpus:
        return gen_nuls(rng, size, corpus)
    # every choice drawn before the size is used, so the same seed at 2x size is the same input,
    # only longer (the time check regenerates the slowest inputs that way)
    path, window, align = rng.choice(corpus), rng.random(), rng.random() < 0.7
    mutations = [(rng.choice(_MUTATIONS), rng.getrandbits(64)) for _ in range(rng.randint(1, 3))]
    as_str = rng.random() < 0.3
    data = path.read_bytes()
    if len(data) > size and window < 0.7:  # a window, mostly small
        start = int(window / 0.7 * (len(data) - size))
        start = data.rfind(b"\n", 0, start) + 1 if align else start
        data = data[start : start + size]
    for mutate, seed in mutations:
        data = mutate(random.Random(seed), data, corpus)
    if as_str:
        return data.decode("utf-8", "surrogateescape")  # lone surrogates where bytes were bad
    return data


def _flip(rng, data, corpus):
    data = bytearray(data)
    for _ in range(rng.randint(1, max(1, len(data) // 500))):
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


def _truncate(rng, data, corpus):
    at = rng.randrange(len(data) + 1)
    return data[:at] if rng.random() < 0.6 else data[at:]


def _splice(rng, data, corpus):
    other = rng.choice(corpus).read_bytes() if corpus else data
    a, b = rng.randrange(len(data) + 1), rng.randrange(len(other) + 1)
    piece = other[b : b + rng.randint(1, 4096)]
    return data[:a] + piece + data[a:]


def _duplicate(rng, data, corpus):
    if not data:
        return data
    a = rng.randrange(len(data))
    piece = data[a : a + rng.randint(1, 2048)]
    return data[:a] + piece * rng.randint(2, 20) + data[a:]


def _junk(rng, data, corpus):
    at = rng.randrange(len(data) + 1)
    junk = rng.choice(
        [b"\x00" * 4, b"\xff\xfe", "\x1b[31m".encode(), b"\r" * 3, b" " * 5000, b"\n" * 3000]
    )
    return data[:at] + junk + data[at:]


def _lines(rng, data, corpus):
    lines = data.splitlines(keepends=True)
    if len(lines) > 2:
        op = rng.randrange(3)
        i = rng.randrange(len(lines))
        if op == 0:
            del lines[i : i + rng.randint(1, 50)]
        elif op == 1:
            lines[i:i] = lines[i : i + rng.randint(1, 20)] * rng.randint(2, 10)
        else:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
    return b"".join(lines)


_MUTATIONS = [_flip, _truncate, _splice, _duplicate, _junk, _lines]


def gen_mixed(rng, size, corpus):
    names = [name for name in GENERATORS if name not in ("mixed", "empty")]
    picks = [(rng.choice(names), rng.getrandbits(64)) for _ in range(rng.randint(2, 4))]
    parts = []
    for name, seed in picks:
        part = GENERATORS[name](random.Random(seed), max(1, size // 3), corpus)
        parts.append(part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part)
    return b"".join(parts)


GENERATORS: dict[str, Callable] = {
    "binary": gen_binary,
    "nuls": gen_nuls,
    "invalid_utf8": gen_invalid_utf8,
    "utf16": gen_utf16,
    "huge_line": gen_huge_line,
    "whitespace": gen_whitespace,
    "runs": gen_runs,
    "nested_json": gen_nested_json,
    "malformed_json": gen_malformed_json,
    "code": gen_code,
    "ansi": gen_ansi,
    "surrogates": gen_surrogates,
    "empty": gen_empty,
    "handle": gen_handle,
    "real": gen_real,
    "mixed": gen_mixed,
}
# Real outputs weigh most: they are what the compressors meet; every bad kind still gets hundreds.
WEIGHTS = {name: 1.0 for name in GENERATORS} | {"real": 6.0, "mixed": 2.0, "empty": 0.2}

_SOURCES = [
    (None, None, None),
    ("tool", None, None),
    ("tool", "pytest -q", None),
    ("tool", "cargo build", None),
    ("tool", "npm test", None),
    ("tool", "git diff", None),
    ("tool", "cat", "src/app.py"),
    ("tool", "cat", "config.json"),
    ("user", None, None),
    ("assistant", None, None),
]
_CLASSES = ["log", "code", "structured", "prose", "error", "edit"]


def _size(rng: random.Random, max_size: int | None) -> int:
    roll = rng.random()
    if roll < 0.75:
        size = rng.randint(0, 4096)
    elif roll < 0.95:
        size = rng.randint(4096, 32_768)
    elif roll < 0.997:
        size = rng.randint(32_768, 262_144)
    else:
        size = rng.randint(500_000, 2_000_000)
    return min(size, max_size) if max_size else size


def real_files(data_dir: Path | None) -> list[Path]:
    if data_dir is None:
        return []
    found = []
    for name in REAL_DIRS:
        folder = data_dir / name
        if folder.is_dir():
            found += sorted(
                p
                for p in folder.iterdir()
                if p.is_file()
                and p.suffix in REAL_SUFFIXES
                and not p.name.startswith(("LICENSE", "SOURCES"))
            )
    return found


def cases(n: int, seed: int, corpus: list[Path], max_size: int | None = None):
    rng = random.Random(seed)
    names = list(GENERATORS)
    weights = [WEIGHTS[name] for name in names]
    for index in range(n):
        kind = rng.choices(names, weights)[0]
        case = Case(
            index=index,
            kind=kind,
            seed=rng.getrandbits(64),
            size=_size(rng, max_size),
            source=rng.choice(_SOURCES),
            cls=rng.choice(_CLASSES) if rng.random() < 0.1 else None,
        )
        case.data = make(case, corpus)
        yield case


def make(case: Case, corpus: list[Path], scale: int = 1) -> str | bytes:
    return GENERATORS[case.kind](random.Random(case.seed), case.size * scale, corpus)


# ---------------------------------------------------------------------------------------------
# Checks


class _Timeout(BaseException):  # not Exception: run_compressor must not swallow it
    pass


def _on_alarm(signum, frame):
    raise _Timeout()


def _call(compress_fn, case: Case, data):
    from aider_gardener.types import ContentClass, Source

    role, command, path = case.source
    cls = ContentClass(case.cls) if case.cls else None
    return compress_fn(data, source=Source(role=role, command=command, path=path), cls=cls)


def check(case: Case, compress_fn=None) -> tuple[dict[str, str], float]:
    """The failed checks of one case (check -> message) and the first call's seconds."""
    from aider_gardener.pipeline import compress
    from aider_gardener.tokens import count_tokens

    compress_fn = compress_fn or compress
    failed: dict[str, str] = {}
    fallbacks = _Fallbacks()
    base_log = logging.getLogger("aider_gardener.compress.base")
    base_log.addHandler(fallbacks)
    alarm = hasattr(signal, "SIGALRM")
    if alarm:
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(TIMEOUT)
    start = time.perf_counter()
    seconds = 0.0
    try:
        result = _call(compress_fn, case, case.data)
        seconds = time.perf_counter() - start
        summary, original = result.summary, result.original
        if len(summary) > len(original):
            failed["longer"] = f"{len(summary)} > {len(original)} characters"
        else:
            t_sum, t_orig = count_tokens(summary), count_tokens(original)
            if t_sum > t_orig or result.tokens_summary > result.tokens_original:
                failed["longer"] = (
                    f"tokens {t_sum} > {t_orig} (reported {result.tokens_summary} vs "
                    f"{result.tokens_original})"
                )
        again = _call(compress_fn, case, summary)
        if again.summary != summary:
            failed["not_idempotent"] = _first_difference(summary, again.summary)
    except _Timeout:
        seconds = time.perf_counter() - start
        failed["slow"] = f"no answer in {TIMEOUT} s"
    except Exception as err:  # noqa: BLE001 - every exception is a finding
        seconds = seconds or time.perf_counter() - start
        failed["crash"] = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    finally:
        if alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        base_log.removeHandler(fallbacks)
    if fallbacks.messages:
        failed[FALLBACK] = "\n".join(fallbacks.messages)
    return failed, seconds


def _first_difference(a: str, b: str) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"differs at {at}: {a[at:at + 80]!r} -> {b[at:at + 80]!r}"


def _nbytes(data: str | bytes) -> int:
    return len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))


def _timed(compress_fn, case: Case, data) -> float:
    """The best of two calls: another job on the machine only ever adds time."""
    best = math.inf
    for _ in range(2):
        start = time.perf_counter()
        _call(compress_fn, case, data)
        best = min(best, time.perf_counter() - start)
    return best


def rerun(case: Case, corpus: list[Path], compress_fn) -> dict:
    """Time one case at 1x, 2x and 4x its size: the exponent of time in size."""
    from aider_gardener.pipeline import compress

    compress_fn = compress_fn or compress
    row = {"index": case.index, "kind": case.kind, "sizes": [], "seconds": []}
    for scale in (1, 2, 4):
        data = make(case, corpus, scale)
        if scale > 1 and _nbytes(data) < 0.75 * scale * row["sizes"][0]:
            # the kind does not grow (a real output smaller than asked): the input k times over
            first = make(case, corpus)
            data = first * scale
        row["sizes"].append(_nbytes(data))
        row["seconds"].append(_timed(compress_fn, case, data))
    (s1, _, s4), (t1, _, t4) = row["sizes"], row["seconds"]
    row["exponent"] = None
    if s4 > s1 and t1 > 0:  # a generator may not grow (empty input, fixed-size kinds)
        row["exponent"] = round(math.log(max(t4, 1e-6) / t1) / math.log(s4 / s1), 2)
    # only a grown input that takes a noticeable time can show a real trend
    row["slow"] = bool(row["exponent"] and row["exponent"] > SUPERLINEAR and t4 > 0.5)
    return row


# ---------------------------------------------------------------------------------------------
# The run


def run(
    n: int,
    seed: int = 0,
    data_dir: Path | None = DEFAULT_DATA,
    max_size: int | None = None,
    out_dir: Path | None = None,
    compress_fn=None,
    reruns: int = RERUNS,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Fuzz ``n`` inputs; failing ones are written under ``out_dir`` (a new temp dir if None,
    created only when something fails)."""
    corpus = real_files(data_dir)
    report = Report(data_dir=data_dir if corpus else None, real_files=len(corpus))
    warm = Case(-1, "warm up", 0, 0, (None, None, None), None, "tiktoken and the patterns load\n")
    check(warm, compress_fn)  # loading once is no input's time
    start = time.perf_counter()
    kept: dict[int, Case] = {}
    for case in cases(n, seed, corpus, max_size):
        failed, seconds = check(case, compress_fn)
        report.n += 1
        report.kinds[case.kind] += 1
        size = _nbytes(case.data)
        report.timings.append((seconds, size, case.index))
        if size >= TIMED_FROM:
            kept[case.index] = Case(
                case.index, case.kind, case.seed, case.size, case.source, case.cls
            )
        for name, message in failed.items():
            if name == FALLBACK:
                report.fallbacks += 1
            else:
                report.failures[name] += 1
            report.out_dir = _save(case, name, message, report.out_dir or out_dir)
        if progress and report.n % 1000 == 0:
            progress(f"{report.n:,} inputs, {time.perf_counter() - start:.0f} s, {_counts(report)}")
    _judge_time(report, kept, corpus, compress_fn, reruns, out_dir)
    report.seconds = time.perf_counter() - start
    return report


def _judge_time(report: Report, kept: dict[int, Case], corpus, compress_fn, reruns: int, out_dir):
    timed = [(s / b, s, b, i) for s, b, i in report.timings if b >= TIMED_FROM]
    if not timed:
        return
    median = statistics.median(r[0] for r in timed)
    timed.sort(reverse=True)
    per_byte, seconds, size, index = timed[0]
    report.worst = {
        "ratio": per_byte / median if median else math.inf,
        "median_us_per_kb": median * 1e6 * 1024,
        "seconds": seconds,
        "bytes": size,
        "kind": kept[index].kind,
        "index": index,
    }
    # the worst few, and any other far off the median (several super-linear spots may show)
    chosen = timed[:reruns] + [t for t in timed[reruns:] if t[0] >= FAR * median][: 4 * reruns]
    for per_byte, seconds, size, index in chosen:
        row = rerun(kept[index], corpus, compress_fn)
        row["ratio"] = per_byte / median if median else math.inf
        report.reruns.append(row)
        if row["slow"]:
            report.failures["slow"] += 1
            case = kept[index]
            case.data = make(case, corpus, 4)
            report.out_dir = _save(case, "slow", json.dumps(row), report.out_dir or out_dir)


def _save(case: Case, check_name: str, message: str, out_dir: Path | None) -> Path:
    out_dir = Path(out_dir or tempfile.mkdtemp(prefix="gardener-fuzz-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "str" if isinstance(case.data, str) else "bin"
    path = out_dir / f"{case.index:05d}-{case.kind}-{check_name}.{suffix}"
    data = case.data
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    record = {
        "file": path.name,
        "check": check_name,
        "kind": case.kind,
        "seed": case.seed,
        "size": case.size,
        "source": case.source,
        "cls": case.cls,
        "message": message[-4000:],
    }
    with open(out_dir / "failures.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    return out_dir


def _counts(report: Report) -> str:
    return ", ".join(f"{name} {report.failures[name]}" for name in CHECKS)


def summary(report: Report) -> str:
    data = f"{report.data_dir} ({report.real_files} real outputs)" if report.data_dir else "absent"
    lines = [
        f"fuzz: {report.n:,} inputs in {report.seconds:.0f} s; real outputs: {data}",
        *(f"  {LABELS[name]}: {report.failures[name]}" for name in CHECKS),
        f"  (a compressor raised and fell back to head/tail: {report.fallbacks})",
        "  kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(report.kinds.items())),
    ]
    if report.worst:
        w = report.worst
        lines.append(
            f"  time per byte (inputs >= {TIMED_FROM // 1024} KB): median "
            f"{w['median_us_per_kb']:.0f} us/KB; worst {w['ratio']:.1f}x the median "
            f"(#{w['index']} {w['kind']}, {w['bytes']:,} bytes, {w['seconds']:.2f} s)"
        )
        lines.append("  worst inputs again at 1x/2x/4x size (best of 2):")
        for r in report.reruns:
            secs = "/".join(f"{s:.3f}" for s in r["seconds"])
            sizes = "/".join(f"{s:,}" for s in r["sizes"])
            lines.append(
                f"    #{r['index']} {r['kind']}: {r['ratio']:.1f}x median; {sizes} bytes -> "
                f"{secs} s; time ~ size^{r['exponent']}{'  SLOW' if r['slow'] else ''}"
            )
    lines.append(f"failing inputs: {report.out_dir}" if report.out_dir else "failing inputs: none")
    return "\n".join(lines)


def replay(path: Path) -> int:
    """Run the checks on one saved input (its record in failures.jsonl gives source and class)."""
    record = {}
    log = path.parent / "failures.jsonl"
    if log.is_file():
        for line in log.read_text(encoding="utf-8").splitlines():
            if json.loads(line)["file"] == path.name:
                record = json.loads(line)
    raw = path.read_bytes()
    data = raw.decode("utf-8", "surrogatepass") if path.suffix == ".str" else raw
    case = Case(
        index=0,
        kind=record.get("kind", "replay"),
        seed=record.get("seed", 0),
        size=len(raw),
        source=tuple(record.get("source") or (None, None, None)),
        cls=record.get("cls"),
        data=data,
    )
    failed, seconds = check(case)
    print(f"{path.name}: {len(raw):,} bytes, {seconds:.3f} s")
    for name, message in failed.items():
        print(f"{name}: {message}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20_000, help="inputs to generate")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="holds tool_outputs*/")
    ap.add_argument("--max-size", type=int, default=None, help="cap on one input's bytes")
    ap.add_argument("--out", type=Path, default=None, help="where failing inputs go")
    ap.add_argument("--reruns", type=int, default=RERUNS, help="worst inputs timed at 2x, 4x")
    ap.add_argument("--replay", type=Path, default=None, help="check one saved failing input")
    args = ap.parse_args(argv)
    from aider_gardener import offline  # noqa: F401  (no network, as in a session)

    if args.replay:
        return replay(args.replay)
    if not real_files(args.data):
        print(f"bench.fuzz: no real outputs under {args.data}: bad kinds only", file=sys.stderr)
    report = run(
        args.n,
        args.seed,
        args.data,
        args.max_size,
        args.out,
        reruns=args.reruns,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    print(summary(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
