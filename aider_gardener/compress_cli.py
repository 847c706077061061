"""``aider-gardener compress|demo`` (``python -m aider_gardener compress|demo`` too): the content
pipeline from the shell, for users and benchmarks.

    compress PATH|- [--class CLASS] [--model MODEL] [--json] [--store [STORE]] [--facts]
    demo            compress sample outputs and print before/after with token counts

A directory given to ``compress`` prints one row per file and the totals by class. Without
``--store`` nothing is kept, so no entry id is printed (an id that ``/recall`` cannot find would
be a lie); with it the originals go into the store and the summaries end with their ids.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .types import CompressionResult, CompressOptions, ContentClass, Source, handle_line

SHARED_OUTPUTS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tool_outputs"


def main(argv: list[str] | None = None, prog: str = "aider-gardener") -> int:
    """``prog``: how usage lines name the command (``aider-gardener compress`` runs this too)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("compress", help="classify and compress a file, a directory or stdin (-)")
    p.add_argument("path")
    p.add_argument("--class", dest="cls", choices=[c.value for c in ContentClass])
    p.add_argument("--model", default="gpt-4o", help="names the tokenizer (default gpt-4o)")
    p.add_argument("--command", help="the shell command that produced the output, if known")
    p.add_argument("--json", action="store_true", help="print one JSON object (a list for a dir)")
    p.add_argument(
        "--facts",
        action="store_true",
        help="also print, per file, the critical facts found in the input and kept in the summary",
    )
    p.add_argument(
        "--store",
        nargs="?",
        const="",
        metavar="STORE",
        help="keep the originals in this store (a folder or .sqlite file; no value:"
        " .aider.gardener/ under the git root) and print their ids; without it nothing is stored",
    )
    d = sub.add_parser("demo", help="compress sample outputs and print before/after")
    d.add_argument("--model", default="gpt-4o")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "demo":
            return demo(args.model)
        return compress_cmd(args)
    except (OSError, ValueError) as err:
        print(f"aider-gardener: {err}", file=sys.stderr)
        return 1


def compress_cmd(args) -> int:
    path = Path(args.path)
    cls = ContentClass(args.cls) if args.cls else None
    store = _open_store(args.store, args.model) if args.store is not None else None
    try:
        if args.path != "-" and path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            results = []
            for f in files:
                data = f.read_bytes()
                result = _compress_bytes(data, str(f), cls, args.model, args.command)
                results.append(
                    (f, _kept(store, result, data, str(f), cls, args.model, args.command))
                )
            if args.json:
                print(json.dumps([_as_json(r, str(f)) for f, r in results], indent=1))
            else:
                print_table(results)
            if args.facts:
                print_facts([(f, r.original, r.summary) for f, r in results])
            if store is not None:
                print(f"# stored {len(results)} entries in {store.path}", file=sys.stderr)
            return 0
        if args.path == "-":
            data = sys.stdin.buffer.read()
            result = _compress_bytes(data, None, cls, args.model, args.command)
            result = _kept(store, result, data, None, cls, args.model, args.command)
        else:
            data = path.read_bytes()
            result = _compress_bytes(data, str(path), cls, args.model, args.command)
            result = _kept(store, result, data, str(path), cls, args.model, args.command)
    finally:
        if store is not None:
            store.close()
    if args.json:
        print(json.dumps(_as_json(result, args.path), indent=1))
        return 0
    sys.stdout.write(result.summary if result.summary.endswith("\n") else result.summary + "\n")
    sys.stdout.flush()  # the summary before the counts when both go to one terminal
    if args.facts:
        print_facts([(Path(args.path), result.original, result.summary)], out=sys.stderr)
    kept = f"stored as id={result.entry_id} in {store.path}" if store else "not stored (--store)"
    print(
        f"# {result.cls}: {result.tokens_original:,} -> {result.tokens_summary:,} tokens"
        f" (ratio {result.ratio:.3f}), {len(result.segments)} segment(s), {kept}",
        file=sys.stderr,
    )
    return 0


def _open_store(location: str, model: str):
    """The store ``--store`` names: no vectors here (a one-shot command should not load a
    model); the chunks stay queued and the next gardened session embeds them."""
    from .store.db import Store

    store = Store(location or None, vectors=False, model=model)
    if store.degraded:
        store.close()
        raise OSError(store.degraded)
    return store


def _kept(
    store, result: CompressionResult, data: bytes, path, cls, model, command
) -> CompressionResult:
    """With a store: the result as stored, its summary ending in the id's handle line. Without
    one: the same result with no id, and the handle line taken off the summary."""
    from dataclasses import replace

    from .tokens import count_tokens

    if store is not None:
        source = Source(role="tool", command=command, path=_format_path(path))
        entry = store.ingest(data, source, cls=cls)
        if not entry.stored:
            raise OSError(f"could not store {path or 'stdin'} in {store.path}")
        return replace(result, entry_id=entry.id, summary=entry.summary)
    handle = handle_line(result.entry_id)
    summary = result.summary
    if summary.rstrip("\n").endswith(handle):
        summary = summary.rstrip("\n")[: -len(handle)].rstrip("\n") + "\n"
        tokens = min(result.tokens_summary, count_tokens(summary, model))
        return replace(result, entry_id="", summary=summary, tokens_summary=tokens)
    return replace(result, entry_id="")


def _compress_file(path: Path, cls, model, command) -> CompressionResult:
    return _compress_bytes(path.read_bytes(), str(path), cls, model, command)


def _compress_bytes(data: bytes, path, cls, model, command) -> CompressionResult:
    from .pipeline import compress

    source = Source(role="tool", command=command, path=_format_path(path))
    return compress(data, source=source, opts=CompressOptions(model=model, source=source), cls=cls)


def _format_path(path: str | None) -> str | None:
    """A path tells the classifier the format only for source and data files; for ``.log``/``.txt``
    outputs the content must decide."""
    if path and Path(path).suffix.lower() not in (".log", ".txt", ".out", ""):
        return path
    return None


def _as_json(r: CompressionResult, name: str) -> dict:
    return {
        "path": name,
        "id": r.entry_id or None,
        "class": r.cls.value,
        "tokens_original": r.tokens_original,
        "tokens_summary": r.tokens_summary,
        "ratio": round(r.ratio, 4),
        "summary": r.summary,
        "notes": r.notes,
        "segments": [
            {
                "class": s.segment.cls.value,
                "start": s.segment.start,
                "end": s.segment.end,
                "tokens_original": s.tokens_original,
                "tokens_summary": s.tokens_summary,
                "fallback": s.compressed.fallback,
                "counts": s.compressed.counts,
            }
            for s in r.segments
        ],
    }


def print_table(results: list[tuple[Path, CompressionResult]]) -> None:
    width = max([len(f.name) for f, _ in results] + [4])
    print(f"{'file':<{width}}  {'class':<10} {'tokens in':>10} {'tokens out':>10} {'ratio':>6}")
    by_class: dict[str, list[int]] = {}
    for f, r in results:
        print(
            f"{f.name:<{width}}  {r.cls.value:<10} {r.tokens_original:>10,} {r.tokens_summary:>10,}"
            f" {r.ratio:>6.3f}"
        )
        for s in r.segments:
            tot = by_class.setdefault(s.segment.cls.value, [0, 0, 0])
            tot[0] += 1
            tot[1] += s.tokens_original
            tot[2] += s.tokens_summary
    print("\ntotals by segment class")
    print(f"{'class':<10} {'segments':>8} {'tokens in':>10} {'tokens out':>10} {'ratio':>6}")
    all_in = all_out = 0
    for name, (n, t_in, t_out) in sorted(by_class.items()):
        all_in += t_in
        all_out += t_out
        print(f"{name:<10} {n:>8} {t_in:>10,} {t_out:>10,} {t_out / max(t_in, 1):>6.3f}")
    print(f"{'all':<10} {'':>8} {all_in:>10,} {all_out:>10,} {all_out / max(all_in, 1):>6.3f}")


def print_facts(items: list[tuple[Path, str, str]], out=None) -> None:
    """Per file, the critical facts (``aider_gardener/critical.py``) found in the original and kept
    in the summary, the missing ones named, then the totals by kind: anyone can check the
    promise on their own outputs."""
    from . import critical

    out = out or sys.stdout
    width = max([len(f.name) for f, _, _ in items] + [4])
    print(f"\n{'file':<{width}}  {'facts':>7} {'kept':>7}  missing", file=out)
    by_kind: dict[str, list[int]] = {k: [0, 0] for k in critical.KINDS}
    for f, original, summary in items:
        found = critical.extract(original)
        gone = critical.missing(original, summary, found)
        total, kept = critical.counts(found, gone)
        for kind in critical.KINDS:
            by_kind[kind][0] += len(found[kind])
            by_kind[kind][1] += len(found[kind]) - len(gone.get(kind, ()))
        lost = "; ".join(f"{k}: {', '.join(sorted(v)[:3])}" for k, v in gone.items())
        print(f"{f.name:<{width}}  {total:>7,} {kept:>7,}  {lost[:300]}", file=out)
    print(f"\n{'fact kind':<14} {'found':>7} {'kept':>7}", file=out)
    for kind, (n, k) in by_kind.items():
        print(f"{kind:<14} {n:>7,} {k:>7,}", file=out)
    n_all = sum(v[0] for v in by_kind.values())
    k_all = sum(v[1] for v in by_kind.values())
    print(f"{'all':<14} {n_all:>7,} {k_all:>7,}", file=out)


def demo(model: str) -> int:
    """The main job until the replay benchmark lands: before/after on real or generated outputs."""
    if SHARED_OUTPUTS.is_dir():
        files = sorted(
            p
            for p in SHARED_OUTPUTS.iterdir()
            if p.is_file()
            and p.suffix in (".log", ".txt", ".json")
            and not p.name.startswith("LICENSE")
        )
        samples: list[tuple[str, bytes, str | None]] = [
            (p.name, p.read_bytes(), None) for p in files
        ]
    else:
        print(f"(shared data not found at {SHARED_OUTPUTS}; using a generated sample)")
        samples = [("generated-pytest.log", _generated_log().encode(), "pytest")]
    results = []
    for name, data, command in samples:
        t0 = time.perf_counter()
        r = _compress_bytes(data, None, None, model, command)
        results.append((Path(name), r, (time.perf_counter() - t0) * 1000))
    shown, r, _ = max(results, key=lambda x: x[1].tokens_original - x[1].tokens_summary)
    bar = "=" * 100
    print(f"{bar}\nBEFORE: {shown} ({r.tokens_original:,} tokens), first 15 lines\n{bar}")
    print("\n".join(r.original.splitlines()[:15]))
    print(f"{bar}\nAFTER: {r.tokens_summary:,} tokens (ratio {r.ratio:.3f})\n{bar}")
    print(r.summary)
    print(bar)
    print_table([(f, res) for f, res, _ in results])
    print(
        "\ncompress wall time per file (ms): "
        + ", ".join(f"{f.name.split('__')[0]}={ms:.0f}" for f, _, ms in results)
    )
    return 0


def _generated_log() -> str:
    lines = ["============================= test session starts =============================="]
    lines += [f"tests/test_mod{i % 7}.py::test_case_{i} PASSED [{i % 100:3d}%]" for i in range(400)]
    lines += [
        "=================================== FAILURES ===================================",
        "_________________________________ test_parse __________________________________",
        "    def test_parse():",
        ">       assert parse('x') == 1",
        "E       AssertionError: assert 2 == 1",
        "tests/test_parse.py:12: AssertionError",
        "FAILED tests/test_parse.py::test_parse - AssertionError: assert 2 == 1",
        "========================= 1 failed, 400 passed in 3.21s =========================",
    ]
    return "\n".join(lines) + "\n"
