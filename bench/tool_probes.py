"""Recall of old tool outputs against embedding cost, per embedding policy.

Embedding every chunk of a big log is most of the gardener's CPU, while logs are mostly found by
their identifiers, which FTS5 indexes in full whatever is embedded. This asks how much recall a
policy that embeds only the head and tail chunks of log/structured outputs (``store/worker.py``,
``EMBED_POLICY``) gives up for the CPU it saves. The session: the 14 real tool outputs of
``../shared/data/tool_outputs`` ingested as ``/run`` outputs, interleaved with the chat of
``replays/coding-session-50.jsonl`` as distractors. ``PROBES`` are hand-written questions a user
could ask much later, each with an answer string from its output; a probe is a hit when one of
``recall(question)``'s top 5 holds the answer, and says whether the answer lies in a skipped
chunk. Wall and CPU time are of ``store.drain()`` (embedding and chromadb upserts).

    .venv/bin/python -m bench.tool_probes [--policies all 8,2]   # ~2-4 min on 2 cores

Method: docs/decisions/060-tool-output-embed-policy.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from aider_gardener.store.recall import recall

ROOT = Path(__file__).resolve().parent.parent
OUTPUTS = ROOT.parent / "shared" / "data" / "tool_outputs"
CHAT = ROOT / "replays" / "coding-session-50.jsonl"

# (file, command it came from)
FILES = [
    ("pytest_importerror__ha-whatsapp.log", "pytest"),
    ("c_build_log__minix.log", "./build.sh tools"),
    ("tsc_errors__wealth-aggregator.txt", "npx tsc --noEmit"),
    ("loghub_OpenSSH_2k.log", "cat /var/log/auth.log"),
    ("cargo_compile_error__tsql_wasm.txt", "cargo test"),
    ("jest_nestjs__neural-ticker-core.txt", "npm test"),
    ("loghub_HDFS_2k.log", "cat hdfs.log"),
    ("maven_cucumber_java__simple-dtu-pay.txt", "mvn test"),
    ("pytest_long_warnings__STREAMLINE.log", "pytest -v"),
    ("github_api_paginate_issues__raw-fixture.json", "cat raw-fixture.json"),
    ("go_test_gin__mybatis-generator-gui-go.txt", "go test -v ./..."),
    ("yarn_error__wonka.log", "cat yarn-error.log"),
    ("minecraft_fabric_server__latest.log", "cat logs/latest.log"),
    ("pytest_failures_typeerror__X_Ray_LLM.log", "pytest"),
]

# (question, answer that occurs in the output, output file)
PROBES = [
    (
        "why could the whatsapp integration tests not be collected?",
        "ModuleNotFoundError",
        "pytest_importerror__ha-whatsapp.log",
    ),
    (
        "what did the compiler warn about pointer subtraction in ldlang.c?",
        "pointer subtraction with a null pointer",
        "c_build_log__minix.log",
    ),
    (
        "which libc function did the build say is deprecated in favour of posix_spawn?",
        "'vfork' is deprecated",
        "c_build_log__minix.log",
    ),
    (
        "how many warnings were generated when compiling the bfd sources?",
        "warnings generated",
        "c_build_log__minix.log",
    ),
    (
        "what type error did tsc report for the MonthlySpendTrendWidget?",
        "Property 'data' does not exist",
        "tsc_errors__wealth-aggregator.txt",
    ),
    (
        "which host kept failing password logins for root over ssh?",
        "187.141.143.180",
        "loghub_OpenSSH_2k.log",
    ),
    (
        "did someone try to log in with an invalid user name like test1?",
        "Invalid user test1",
        "loghub_OpenSSH_2k.log",
    ),
    (
        "which client disconnected saying it was closed due to user request?",
        "Closed due to user request",
        "loghub_OpenSSH_2k.log",
    ),
    (
        "what import could the rust compiler not resolve?",
        "tsql_core::SessionId",
        "cargo_compile_error__tsql_wasm.txt",
    ),
    (
        "which service failed to sync in the nest test run?",
        "Failed to sync",
        "jest_nestjs__neural-ticker-core.txt",
    ),
    (
        "which datanode got an exception while serving a block to a client?",
        "Got exception while serving",
        "loghub_HDFS_2k.log",
    ),
    (
        "where on disk was block blk_8615522912610884162 deleted from?",
        "/mnt/hadoop/dfs/data/current/subdir35",
        "loghub_HDFS_2k.log",
    ),
    (
        "what exception did the cucumber step definitions throw?",
        "PendingException",
        "maven_cucumber_java__simple-dtu-pay.txt",
    ),
    (
        "which jupyter warning showed up in the streamline test run?",
        "Jupyter is migrating its paths",
        "pytest_long_warnings__STREAMLINE.log",
    ),
    (
        "which user account created the issues in the pagination fixture?",
        "octokit-fixture-user-a",
        "github_api_paginate_issues__raw-fixture.json",
    ),
    (
        "which API endpoints answered 404 in the go tests?",
        '"/api/tables"',
        "go_test_gin__mybatis-generator-gui-go.txt",
    ),
    (
        "which yarn and node versions were used for the failed publish?",
        "1.3.2",
        "yarn_error__wonka.log",
    ),
    (
        "what did the minecraft server warn about authentication of usernames?",
        "OFFLINE/INSECURE MODE",
        "minecraft_fabric_server__latest.log",
    ),
    (
        "why did the JSON report tests of x-ray fail?",
        "TypeError",
        "pytest_failures_typeerror__X_Ray_LLM.log",
    ),
    (
        "which test of the JSON report checks that it is serializable?",
        "test_serializable",
        "pytest_failures_typeerror__X_Ray_LLM.log",
    ),
]

POLICIES = ["all", "16,4", "8,2", "4,1", "0,0"]


def _chat() -> list[tuple[str, str]]:
    turns = []
    for line in CHAT.read_text().splitlines():
        event = json.loads(line)
        if event.get("type") in ("user", "assistant") and event.get("content"):
            turns.append(("user" if event["type"] == "user" else "assistant", event["content"]))
    return turns


def _session() -> list[tuple[str, str, str | None]]:
    """(role, text, command) in ingest order: outputs spread through the chat."""
    chat = _chat()
    events: list[tuple[str, str, str | None]] = []
    step = max(1, len(chat) // (len(FILES) + 1))
    for i, (name, command) in enumerate(FILES):
        for role, text in chat[i * step : (i + 1) * step]:
            events.append((role, text, None))
        text = (OUTPUTS / name).read_text(encoding="utf-8", errors="replace")
        events.append(("tool", text, command))
    for role, text in chat[len(FILES) * step :]:
        events.append((role, text, None))
    return events


def run_policy(policy: str, events, folder: Path) -> dict:
    from aider_gardener.store import Store
    from aider_gardener.store.worker import POLICY_ENV, SKIPPED
    from aider_gardener.types import Source

    os.environ[POLICY_ENV] = policy
    ids: dict[str, str] = {}
    with Store(folder) as store:
        store._worker.stop()  # embed in this thread, timed, not in the background
        for role, text, command in events:
            entry = store.ingest(text, Source(role=role, command=command))
            if command:
                ids[command] = entry.id
        store.vectors.warm()
        w0, c0 = time.perf_counter(), time.thread_time()
        store.drain()
        wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
        states = dict(
            store.read(
                lambda c: c.execute("SELECT embedded, count(*) FROM chunks GROUP BY 1").fetchall()
            )
        )
        by_file = {name: ids[cmd] for name, cmd in FILES}
        rows = []
        for question, answer, name in PROBES:
            eid = by_file[name]
            skipped = store.read(
                lambda c, eid=eid, answer=answer: c.execute(
                    "SELECT count(*) FROM chunks WHERE entry_id = ? AND instr(text, ?) > 0"
                    " AND embedded != ?",
                    (eid, answer, SKIPPED),
                ).fetchone()[0]
            )
            row = {"question": question, "answer_embedded": bool(skipped)}
            for mode in ("hybrid", "fts"):
                hits = recall(store, question, limit=5, mode=mode)
                originals = store.get_entries([h.entry_id for h in hits])
                row[mode] = any(
                    answer.lower() in str(originals[h.entry_id].original).lower()
                    for h in hits
                    if h.entry_id in originals
                )
            rows.append(row)
    return {
        "policy": policy,
        "chunks": sum(states.values()),
        "embedded": states.get(1, 0),
        "skipped": states.get(SKIPPED, 0),
        "drain_wall_s": round(wall, 2),
        "drain_cpu_s": round(cpu, 2),
        "recall5_hybrid": sum(r["hybrid"] for r in rows),
        "recall5_fts": sum(r["fts"] for r in rows),
        "probes": len(rows),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tool_probes", description=__doc__)
    parser.add_argument("--policies", nargs="+", default=POLICIES)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)
    if not OUTPUTS.is_dir():
        print(f"tool outputs not found at {OUTPUTS}", file=sys.stderr)
        return 2
    events = _session()
    results = []
    print(
        f"{'policy':>8} {'chunks':>7} {'embedded':>8} {'drain s':>8} {'cpu s':>7}"
        f" {'hybrid@5':>9} {'fts@5':>6}  misses (hybrid)"
    )
    for policy in args.policies:
        with tempfile.TemporaryDirectory() as tmp:
            res = run_policy(policy, events, Path(tmp) / "gs")
        results.append(res)
        misses = [r["question"][:40] for r in res["rows"] if not r["hybrid"]]
        print(
            f"{policy:>8} {res['chunks']:>7} {res['embedded']:>8} {res['drain_wall_s']:>8}"
            f" {res['drain_cpu_s']:>7} {res['recall5_hybrid']:>4}/{res['probes']:<4}"
            f" {res['recall5_fts']:>2}/{res['probes']}  {misses}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
