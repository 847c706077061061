"""Write the bundled replays: ``python replays/generate.py [OUT_DIR]`` (default: this folder).

Everything here is made up by the project (a fictional inventory service and its tool output),
seeded, so the files are identical on every run; nothing is copied from third-party data.

* ``coding-session-50``: 50 turns of coding in diff mode: files added, SEARCH/REPLACE edits that
  apply, ``/test`` runs failing and passing, a traceback, a large JSON response, build logs, prose
  decisions; probes at distances 5, 20 and 40 turns from where each fact was said.
* ``ask-research``: ask-mode research (questions, long prose answers, ``/run`` of greps and
  docs), where Aider's ``cur_messages`` grow between summaries.
* ``small-window-overflow``: an 8k-token window meeting large logs; plain Aider overflows.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from bench.replay.format import Replay, save  # noqa: E402

WORDS = (
    "inventory reservation warehouse restock ledger batch quantity supplier shipment audit"
    " threshold cache index snapshot queue worker schema migration tenant region pallet"
    " barcode carrier manifest forecast demand backorder allocation picker route dock"
).split()


class Script:
    """Builds a replay turn by turn, tracking the turn number probes refer to."""

    def __init__(self, meta: dict):
        self.meta = meta
        self.events: list[dict] = []
        self.turn = 0
        self.pending: list[tuple[int, dict]] = []  # (at_turn, probe event)

    def _flush_probes(self) -> None:
        due = [p for p in self.pending if p[0] <= self.turn]
        self.pending = [p for p in self.pending if p[0] > self.turn]
        self.events += [p[1] for p in due]

    def user(self, text: str, *replies: str) -> int:
        self._flush_probes()
        self.turn += 1
        self.events.append({"type": "user", "content": text})
        self.events += [{"type": "assistant", "content": r} for r in replies]
        return self.turn

    def run(self, command: str, output: str, exit_code: int = 0, via: str = "run", *replies):
        self._flush_probes()
        self.turn += 1
        event = {"type": "run", "command": command, "output": output, "exit_code": exit_code}
        if via != "run":
            event["via"] = via
        self.events.append(event)
        self.events += [{"type": "assistant", "content": r} for r in replies]
        return self.turn

    def add(self, path: str, content: str) -> None:
        self.events.append({"type": "add", "path": path, "content": content})

    def drop(self, path: str) -> None:
        self.events.append({"type": "drop", "path": path})

    def probe(self, source_turn: int, distance: int, question: str, *answers: str) -> None:
        event = {
            "type": "probe",
            "question": question,
            "answers": list(answers),
            "source_turn": source_turn,
        }
        self.pending.append((source_turn + distance, event))

    def replay(self) -> Replay:
        self.turn += 1  # probes due after the last turn
        self._flush_probes()
        self.turn -= 1
        assert not self.pending, f"probes past the end: {self.pending}"
        return Replay(meta=dict(self.meta), events=self.events)


def prose(rng: random.Random, sentences: int) -> str:
    out = []
    for _ in range(sentences):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def module_source(rng: random.Random, name: str, functions: int) -> str:
    lines = [f'"""The {name} module of the inventory service."""', "", "import logging", ""]
    lines.append("log = logging.getLogger(__name__)")
    for i in range(functions):
        a, b = rng.sample(WORDS, 2)
        lines += [
            "",
            "",
            f"def {a}_{b}_{i}(items, limit=10):",
            f'    """Return the {a} entries for {b}."""',
            "    out = []",
            "    for item in items:",
            f"        if item.get('{a}') and len(out) < limit:",
            f"            out.append(item['{a}'])",
            f"    log.debug('{a}_{b}_{i}: %d', len(out))",
            "    return out",
        ]
    return "\n".join(lines) + "\n"


def edit_reply(rng: random.Random, path: str, files: dict, intro: str) -> str:
    """A reply with one SEARCH/REPLACE block that applies to the tracked file content."""
    text = files[path]
    lines = text.splitlines()
    idx = [i for i, line in enumerate(lines) if line.strip() == "return out"]
    i = rng.choice(idx) if idx else len(lines) - 1
    search = "\n".join(lines[i - 1 : i + 1])
    tag = rng.choice(WORDS)
    replace = "\n".join(
        [lines[i - 1], f"    out.sort(key=lambda v: str(v))  # stable {tag} order", lines[i]]
    )
    files[path] = text.replace(search, replace, 1)
    return (
        f"{intro}\n\n{prose(rng, 3)}\n\n{path}\n```python\n<<<<<<< SEARCH\n{search}\n=======\n"
        f"{replace}\n>>>>>>> REPLACE\n```\n"
    )


def pytest_output(rng: random.Random, failures: list[tuple[str, str, str]], passed: int) -> str:
    out = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0",
        "rootdir: /home/dev/inventory",
        f"collected {passed + len(failures)} items",
        "",
    ]
    for mod in ("tests/test_store.py", "tests/test_api.py", "tests/test_restock.py"):
        out.append(f"{mod} " + "." * rng.randint(8, 20) + ("F" if failures else "") + " [ 33%]")
    if failures:
        out += [
            "",
            "=================================== FAILURES ===================================",
        ]
    for test_id, err, where in failures:
        name = test_id.split("::")[-1]
        out += [f"_________________________________ {name} _________________________________", ""]
        for k in range(rng.randint(6, 14)):
            out.append(f"    {rng.choice(WORDS)} = build_{rng.choice(WORDS)}({k})")
        out += [f">       {err.split(':')[0].lower()}_check()", f"E       {err}", "", where]
    out += ["", "=========================== short test summary info ============================"]
    out += [f"FAILED {t} - {e}" for t, e, _ in failures]
    tail = f"{len(failures)} failed, {passed} passed" if failures else f"{passed} passed"
    out.append(
        f"========================= {tail} in {rng.uniform(1, 9):.2f}s ========================="
    )
    return "\n".join(out) + "\n"


def build_log(rng: random.Random, lines: int, error: str | None) -> str:
    out = ["Step 1/9 : FROM python:3.11-slim", " ---> 4c2e1f0b8a7d"]
    for i in range(lines):
        pkg = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}"
        out.append(
            f"  Downloading {pkg}-{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
            f"-py3-none-any.whl ({rng.randint(10, 900)} kB)"
        )
        if i % 7 == 0:
            out.append(f"Collecting {pkg}>={rng.randint(1, 4)}.0")
    if error:
        out += [error, "The command '/bin/sh -c pip install -r requirements.txt' returned 1"]
    else:
        out += ["Successfully built 9e8d7c6b5a4f", "Successfully tagged inventory:dev"]
    return "\n".join(out) + "\n"


def traceback_text(rng: random.Random, error: str, path: str, line: int) -> str:
    out = ["Traceback (most recent call last):"]
    for k in range(rng.randint(8, 14)):
        lib = rng.choice(["starlette", "fastapi", "anyio", "uvicorn"])
        out.append(
            f'  File "/usr/lib/python3.11/site-packages/{lib}/{rng.choice(WORDS)}.py",'
            f" line {rng.randint(20, 900)}, in {rng.choice(WORDS)}"
        )
        out.append(f"    await self.{rng.choice(WORDS)}(scope, receive, send)")
    out += [f'  File "{path}", line {line}, in import_batch', "    sku = index[row['sku']]", error]
    return "\n".join(out) + "\n"


def coding_session(seed: int = 5) -> Replay:
    rng = random.Random(seed)
    s = Script(
        {
            "name": "coding-session-50",
            "source": "generated by replays/generate.py (fictional inventory service)",
            "model": "gpt-4o",
            "max_input_tokens": 128000,
            "edit_format": "diff",
            "description": "50 turns of coding with edits, tests, a traceback, JSON and builds",
        }
    )
    files = {
        "inventory/store.py": module_source(rng, "store", 12),
        "inventory/api.py": module_source(rng, "api", 10),
        "inventory/restock.py": module_source(rng, "restock", 8),
    }
    s.add("inventory/store.py", files["inventory/store.py"])
    s.add("inventory/api.py", files["inventory/api.py"])

    t = s.user(
        "We need reservations: an order holds stock for a while before it is released. How long"
        " should a hold last?",
        "Let's decide this now so the tests can pin it. Decision: the reservation window is 17"
        " minutes (RESERVATION_TTL_MIN = 17); shorter windows caused checkout timeouts in the"
        f" load test, longer ones starve the picker queue. {prose(rng, 6)}",
    )
    s.probe(t, 40, "How long is the reservation window (RESERVATION_TTL_MIN)?", "17 minutes")
    t = s.user(
        "Name the queue that restock events go to.",
        "I suggest the queue name `restock-heron`: it is unique in the cluster and easy to grep."
        f" {prose(rng, 5)}",
    )
    s.probe(t, 40, "What is the restock queue called?", "restock-heron")
    t = s.user(
        "Add a stable ordering to the store helpers.",
        edit_reply(rng, "inventory/store.py", files, "Here is the change to store.py."),
    )
    fail1 = (
        "tests/test_store.py::test_reserve_expired",
        "AssertionError: expected status 'expired', got 'held'",
        "tests/test_store.py:88: AssertionError",
    )
    t = s.run(
        "pytest -q",
        pytest_output(rng, [fail1], 41),
        1,
        "test",
        edit_reply(rng, "inventory/store.py", files, "The expiry check compares in seconds."),
    )
    s.probe(t, 5, "Which test failed after the reservation change?", "test_reserve_expired")
    s.probe(t, 20, "Which test failed after the reservation change?", "test_reserve_expired")
    err = "KeyError: 'sku-88412'"
    t = s.run(
        "python -m inventory.import data/batch-0412.csv",
        traceback_text(rng, err, "/home/dev/inventory/inventory/api.py", 57),
        1,
    )
    s.probe(t, 20, "What KeyError did the batch import raise?", "sku-88412")
    t = s.user(
        "Why did the import crash?",
        "The import looks SKUs up in an index built before the batch is read, so a SKU that"
        " first appears in this batch (sku-88412) is missing. Build the index lazily."
        f" {prose(rng, 4)}\n\n"
        + edit_reply(rng, "inventory/api.py", files, "Here is the fix in api.py."),
    )
    items = []
    special = rng.randrange(40, 160)
    for k in range(180):
        items.append(
            {
                "id": 10000 + k,
                "sku": f"sku-{rng.randint(10000, 99999)}",
                "name": f"{rng.choice(WORDS)} {rng.choice(WORDS)}",
                "quantity": rng.randint(0, 500),
                "warehouse_code": "WH-KESTREL-7" if k == special else f"WH-{rng.randint(1, 40)}",
                "updated_at": f"2025-01-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z",
            }
        )
    t = s.run(
        "curl -s localhost:8080/api/items?page=3",
        json.dumps({"page": 3, "per_page": 180, "items": items}, indent=2) + "\n",
    )
    s.probe(
        t, 5, "Which warehouse code appeared once in the page-3 items response?", "WH-KESTREL-7"
    )
    s.probe(
        t, 40, "Which warehouse code appeared once in the page-3 items response?", "WH-KESTREL-7"
    )
    t = s.user(
        "One item in that response has an odd warehouse code. Note it for the migration.",
        "Noted: item ids are consecutive and one warehouse code is unlike the others; the"
        f" migration must map legacy codes explicitly. {prose(rng, 5)}",
    )
    build_err = (
        "ERROR: Could not find a version that satisfies the requirement fastjsonschema==9.9.1"
    )
    t = s.run("docker build -t inventory:dev .", build_log(rng, 220, build_err), 1)
    s.probe(t, 20, "Which requirement could the docker build not satisfy?", "fastjsonschema==9.9.1")
    s.probe(t, 40, "Which requirement could the docker build not satisfy?", "fastjsonschema==9.9.1")
    t = s.user(
        "Fix the requirement pin.",
        "Pin `fastjsonschema>=2.19,<3` instead; 9.9.1 was a typo. "
        + prose(rng, 3)
        + "\n\nrequirements.txt\n```\n<<<<<<< SEARCH\n=======\nfastjsonschema>=2.19,<3\n"
        ">>>>>>> REPLACE\n```\n",
    )
    s.run("docker build -t inventory:dev .", build_log(rng, 220, None), 0)
    t = s.run(
        "git log --oneline -5",
        "c41d9e07 Pin fastjsonschema to 2.x\n8b2f6a13 Build the SKU index lazily\n"
        "a3f9c2e1 Add reservation expiry sweeper\n5e0d7b44 Store helpers sort their output\n"
        "19c0ffee Initial inventory service\n",
    )
    s.probe(t, 5, "What is the hash of the commit that added the reservation sweeper?", "a3f9c2e1")
    s.probe(t, 20, "What is the hash of the commit that added the reservation sweeper?", "a3f9c2e1")
    s.add("inventory/restock.py", files["inventory/restock.py"])
    # the long middle: edits, tests and decisions, each turn with its own output
    n = 0
    while s.turn < 50:
        n += 1
        step = n % 5
        if step == 1:
            path = rng.choice(sorted(files))
            s.user(
                f"In {path}, keep the {rng.choice(WORDS)} results in a stable order too.",
                edit_reply(rng, path, files, f"Here is the change to {path}."),
            )
        elif step == 2:
            failing = rng.random() < 0.5
            fails = (
                [
                    (
                        f"tests/test_{rng.choice(['store', 'api', 'restock'])}.py::test_{n}_"
                        f"{rng.choice(WORDS)}",
                        f"AssertionError: {rng.choice(WORDS)} mismatch at row {n}",
                        f"tests/test_api.py:{rng.randint(10, 200)}: AssertionError",
                    )
                ]
                if failing
                else []
            )
            replies = (
                (edit_reply(rng, rng.choice(sorted(files)), files, "The assertion is right."),)
                if failing
                else ()
            )
            s.run(
                "pytest -q",
                pytest_output(rng, fails, 40 + n),
                1 if failing else 0,
                "test",
                *replies,
            )
        elif step == 3:
            s.user(
                f"What do you think about moving {rng.choice(WORDS)} handling into a worker?",
                prose(rng, rng.randint(8, 14)),
            )
        elif step == 4:
            s.run("make lint", build_log(rng, rng.randint(40, 90), None), 0)
        else:
            s.user(f"Summarize where we are with the {rng.choice(WORDS)} work.", prose(rng, 10))
    return s.replay()


def ask_research(seed: int = 7) -> Replay:
    rng = random.Random(seed)
    s = Script(
        {
            "name": "ask-research",
            "source": "generated by replays/generate.py (fictional inventory service)",
            "model": "gpt-4o",
            "max_input_tokens": 128000,
            "edit_format": "ask",
            "description": "ask-mode research: questions, long answers, greps and docs",
        }
    )
    s.add("inventory/store.py", module_source(rng, "store", 10))
    t = s.user(
        "Which consistency model should the ledger use?",
        "For the ledger I recommend snapshot isolation with a nightly audit job called"
        f" `ledger-osprey-audit`; serializable is not worth its cost here. {prose(rng, 12)}",
    )
    s.probe(t, 20, "What is the nightly audit job called?", "ledger-osprey-audit")
    for k in range(24):
        if k % 4 == 1:
            hits = "\n".join(
                f"inventory/{rng.choice(WORDS)}.py:{rng.randint(1, 400)}:    {prose(rng, 1)}"
                for _ in range(rng.randint(40, 80))
            )
            t = s.run(f"grep -rn {rng.choice(WORDS)} inventory/", hits + "\n")
        elif k == 6:
            t = s.run(
                "cat docs/retention.md",
                "# Retention\n\nLedger rows are kept for 2190 days (six years) by regulation"
                f" FIN-RET-44.\n\n{prose(rng, 30)}\n",
            )
            s.probe(t, 5, "How many days are ledger rows kept?", "2190 days")
            s.probe(t, 15, "Which regulation sets ledger retention?", "FIN-RET-44")
        else:
            t = s.user(
                f"How does {rng.choice(WORDS)} interact with {rng.choice(WORDS)} in our design?",
                prose(rng, rng.randint(12, 24)),
            )
    return s.replay()


def overflow_session(seed: int = 11) -> Replay:
    rng = random.Random(seed)
    s = Script(
        {
            "name": "small-window-overflow",
            "source": "generated by replays/generate.py (fictional inventory service)",
            "model": "gpt-4o",
            "max_input_tokens": 8192,
            "edit_format": "diff",
            "description": "an 8k window meeting large logs",
        }
    )
    s.add("inventory/restock.py", module_source(rng, "restock", 4))
    first = None
    for k in range(8):
        log = []
        for i in range(rng.randint(500, 700)):
            level = "INFO"
            msg = f"worker-{rng.randint(1, 8)} processed {rng.choice(WORDS)} batch {i}"
            if i == 123:
                level, msg = "ERROR", f"restock job {k} failed: ConnectionResetError by peer db-{k}"
            log.append(f"2025-01-15 12:{i // 60 % 60:02d}:{i % 60:02d} {level} {msg}")
        t = s.run(f"kubectl logs job/restock-{k}", "\n".join(log) + "\n", 1)
        if first is None:
            first = t
        s.user(
            f"Why did restock job {k} fail?",
            f"Job {k} lost its database connection (ConnectionResetError from db-{k}); the retry"
            f" policy gave up after one attempt. {prose(rng, 4)}",
        )
    s.probe(first, 12, "Which database host reset the connection for restock job 0?", "db-0")
    return s.replay()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else HERE
    for replay in (coding_session(), ask_research(), overflow_session()):
        path = save(replay, out / f"{replay.name}.jsonl")
        print(f"{path}: {replay.turns()} turns, {len(replay.probes())} probes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
