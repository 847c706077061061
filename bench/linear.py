"""``python -m bench.linear [--sizes 1,3,10] [--rounds 3]``: is compression linear in input size?

Times ``compress`` (and ``count_tokens`` alone) on whitespace-heavy, one-line and random inputs of
1, 3 and 10 MB, side by side in one run, and prints the median seconds and seconds per MB: flat
per-MB columns are linear time. The token cache is cleared before every call, so each one counts.
``tests/bench_tokens.py`` runs the same inputs under pytest-benchmark.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import sys
import time

MB = 1_000_000


def _newlines(rng: random.Random, size: int) -> bytes:
    return b"\n" * size


def _spaces(rng: random.Random, size: int) -> bytes:
    return b" " * size


def _whitespace_runs(rng: random.Random, size: int) -> bytes:
    """Words between long runs of spaces, newlines, tabs and their mixtures."""
    out, total = [], 0
    while total < size:
        n = rng.randint(200, 50_000)
        run = rng.choice([b" ", b"\n", b"\t", b"\r\n"]) * (n // 2)
        if rng.random() < 0.3:
            run = bytes(rng.choice(b" \t\n") for _ in range(min(n, 2000)))
        word = f"step {total}: done\n".encode()
        out += [word, run]
        total += len(word) + len(run)
    return b"".join(out)[:size]


def _one_line_json(rng: random.Random, size: int) -> bytes:
    row = {"id": 0, "name": "widget", "tags": ["a", "b"], "ok": True, "score": 0.5}
    items = [dict(row, id=i, score=rng.random()) for i in range(size // 80 + 1)]
    return json.dumps(items, separators=(",", ":")).encode()[:size]


def _one_line_base64(rng: random.Random, size: int) -> bytes:
    return base64.b64encode(rng.randbytes(size * 3 // 4 + 3))[:size]


def _random_bytes(rng: random.Random, size: int) -> bytes:
    return rng.randbytes(size)


def _random_text(rng: random.Random, size: int) -> bytes:
    alphabet = b"abcdefghij KLMNOP 0123456789 .,:;=-_/\\()[]{}\"' \n\t"
    return bytes(rng.choice(alphabet) for _ in range(size))


INPUTS = {
    "newlines": _newlines,
    "spaces": _spaces,
    "whitespace runs": _whitespace_runs,
    "one-line JSON": _one_line_json,
    "one-line base64": _one_line_base64,
    "random bytes": _random_bytes,
    "random text": _random_text,
}


def make(kind: str, mb: float, seed: int = 0) -> bytes:
    return INPUTS[kind](random.Random(seed), int(mb * MB))


def clear_token_caches() -> None:
    from aider_gardener import tokens

    with tokens._lock:
        tokens._cache.clear()
        tokens._run_cache.clear()


def time_compress(data: bytes) -> float:
    from aider_gardener.pipeline import compress

    clear_token_caches()
    start = time.perf_counter()
    compress(data)
    return time.perf_counter() - start


def time_count(data: bytes) -> float:
    from aider_gardener.tokens import count_tokens

    text = data.decode("utf-8", "replace")
    clear_token_caches()
    start = time.perf_counter()
    count_tokens(text)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.linear", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,3,10", help="input sizes in MB, comma-separated")
    ap.add_argument("--rounds", type=int, default=3, help="timed calls per cell (median)")
    ap.add_argument("--kinds", default=",".join(INPUTS), help="comma-separated input kinds")
    args = ap.parse_args(argv)
    from aider_gardener import offline  # noqa: F401

    sizes = [float(s) for s in args.sizes.split(",")]
    kinds = args.kinds.split(",")
    time_compress(b"warm up: tiktoken's tables and the classifiers' patterns load once\n")
    time_count("warm up".encode())
    head = "".join(f" | {s:g} MB: s (s/MB)" for s in sizes)
    print(f"{'input':<16} {'what':<13}{head}")
    for kind in kinds:
        inputs = {mb: make(kind, mb) for mb in sizes}
        for what, timer in (("compress", time_compress), ("count_tokens", time_count)):
            cells = []
            for mb in sizes:
                median = statistics.median(timer(inputs[mb]) for _ in range(args.rounds))
                cells.append(f" | {median:7.2f} ({median / mb:5.2f})")
            print(f"{kind:<16} {what:<13}{''.join(cells)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
