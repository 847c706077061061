"""``python -m bench import KIND SRC -o DIR`` and ``python -m bench run PATH...``.

``run`` takes replay files or folders (every ``*.jsonl`` in them; ``*.probes.jsonl`` files there
are probe files and add their probes to the replays they name).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

PROBE_SUFFIX = ".probes.jsonl"


def _replay_paths(paths: list[str]) -> tuple[list[Path], list[Path]]:
    replays, probes = [], []
    for raw in paths:
        path = Path(raw)
        found = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for p in found:
            (probes if p.name.endswith(PROBE_SUFFIX) else replays).append(p)
    return replays, probes


def cmd_import(args: argparse.Namespace) -> int:
    from bench.replay.format import ReplayFormatError, save
    from bench.replay.importers import IMPORTERS

    src = Path(args.src)
    if not src.exists():
        print(f"bench import: {src} does not exist", file=sys.stderr)
        return 2
    try:
        replays = IMPORTERS[args.kind](src)
    except ReplayFormatError as err:  # a malformed source: one line, not a traceback
        print(f"bench import: {err}", file=sys.stderr)
        return 2
    out = Path(args.output)
    for replay in replays:
        path = save(replay, out / f"{replay.name}.jsonl")
        print(f"{path}: {replay.turns()} turns, {len(replay.probes())} probes")
    if not replays:
        print(f"bench import: no sessions found in {src}", file=sys.stderr)
        return 1
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from bench.replay.format import ReplayFormatError, add_probes, load, load_probe_file
    from bench.replay.metrics import report_json
    from bench.replay.report import plot, print_report
    from bench.replay.runner import MODES, run_all

    modes = args.modes or list(MODES)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        print(
            f"bench run: unknown modes {unknown} (choose from {', '.join(MODES)})", file=sys.stderr
        )
        return 2
    paths, probe_paths = _replay_paths(args.paths)
    probe_paths += [Path(p) for p in args.probes or []]
    if not paths:
        print("bench run: no replay files found", file=sys.stderr)
        return 2
    try:
        probes = [row for p in probe_paths for row in load_probe_file(p)]
        replays = [add_probes(load(p), probes) for p in paths]
    except ReplayFormatError as err:
        print(f"bench run: {err}", file=sys.stderr)
        return 2
    if args.window:
        for replay in replays:
            replay.meta["max_input_tokens"] = args.window  # what if the window were smaller?
    if args.gardener_budget:
        for replay in replays:
            replay.meta["gardener_budget"] = args.gardener_budget  # the trade-off, measured
    start = time.perf_counter()

    def progress(text: str) -> None:
        if not args.quiet:
            print(f"  replaying {text} …", file=sys.stderr, flush=True)

    runs = run_all(replays, modes, vectors=args.vectors, progress=progress)
    report = report_json(runs)
    report["wall_s_total"] = round(time.perf_counter() - start, 2)
    print_report(report)
    print(f"whole bench: {report['wall_s_total']:.1f} s", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        print(plot(report, args.plot))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Replay recorded sessions through Aider with and without the gardener.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    from bench.replay.importers import IMPORTERS

    imp = sub.add_parser("import", help="convert a recorded session into replay files")
    imp.add_argument("kind", choices=sorted(IMPORTERS))
    imp.add_argument("src", help="the file to import")
    imp.add_argument("-o", "--output", required=True, help="folder for the replay files")
    imp.set_defaults(fn=cmd_import)

    run = sub.add_parser("run", help="replay sessions in each mode and compare")
    run.add_argument("paths", nargs="+", help="replay files or folders of them")
    run.add_argument("--modes", nargs="+", metavar="MODE", help="default: all five")
    run.add_argument("--probes", action="append", metavar="FILE", help="extra probe file")
    run.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    run.add_argument("--plot", metavar="OUT.png", help="plot prompt tokens per turn (matplotlib)")
    run.add_argument(
        "--vectors",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="gardener semantic recall with local embeddings (default: on)",
    )
    run.add_argument(
        "--window",
        type=int,
        metavar="TOKENS",
        help="replay every file as if the model's input window were this size",
    )
    run.add_argument(
        "--gardener-budget",
        type=int,
        metavar="TOKENS",
        help="the gardener modes' history budget (default: theirs, Aider's history budget)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    run.set_defaults(fn=cmd_run)

    from bench import claude_code

    cc = sub.add_parser("claude-code", help="real Claude Code transcripts vs the gardener")
    claude_code.add_arguments(cc)
    cc.set_defaults(fn=claude_code.run)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
