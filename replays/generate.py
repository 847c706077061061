"""Write the bundled replays: ``python replays/generate.py [OUT_DIR]`` (default: this folder).

Everything here is made up by the project (a fictional inventory service and its tool output),
seeded, so the files are identical on every run; nothing is copied from third-party data.

* ``coding-session-50``: 50 turns of coding in diff mode: files added, SEARCH/REPLACE edits that
  apply, ``/test`` runs failing and passing, a traceback, a large JSON response, build logs, prose
  decisions; probes at distances 5, 20 and 40 turns from where each fact was said.
* ``ask-research``: ask-mode research (questions, long prose answers, ``/run`` of greps and
  docs), where Aider's ``cur_messages`` grow between summaries.
* ``small-window-overflow``: an 8k-token window meeting large logs; plain Aider overflows.
* ``continuity-30``: a session with files, edits that apply, failing tests, a failed approach and
  the user's decisions and constraints; then ``/soft-restart`` and probes about the artifact
  trail (files touched, errors seen, decisions made); then a new Aider process (``session``
  event) and the same probes.
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

    def add(self, path: str, content: str, read_only: bool = False) -> None:
        event = {"type": "add", "path": path, "content": content}
        if read_only:
            event["read_only"] = True
        self.events.append(event)

    def drop(self, path: str) -> None:
        self.events.append({"type": "drop", "path": path})

    def probe(
        self, source_turn: int, distance: int, question: str, *answers: str, kind: str = ""
    ) -> None:
        event = {
            "type": "probe",
            "question": question,
            "answers": list(answers),
            "source_turn": source_turn,
        }
        if kind:
            event["kind"] = kind
        self.pending.append((source_turn + distance, event))

    def session(self, resume: bool = True) -> None:
        """The Aider process ends here and a new one starts (probes due now come first)."""
        self.turn += 1
        self._flush_probes()
        self.turn -= 1
        self.events.append({"type": "session", "resume": resume})

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


class Files:
    """File contents as the replay's repo holds them, so every SEARCH/REPLACE block is made
    from the current text and applies exactly once."""

    def __init__(self, files: dict[str, str]):
        self.files = dict(files)

    def block(self, path: str, search: str, replace: str) -> str:
        text = self.files[path]
        assert text.count(search) == 1, f"SEARCH must match {path} exactly once: {search!r}"
        self.files[path] = text.replace(search, replace, 1)
        return (
            f"{path}\n```python\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n"
            ">>>>>>> REPLACE\n```\n"
        )


AMOUNTS = '''"""Amounts in ledger rows: a number and an ISO 4217 currency code."""

from typing import Tuple

DEFAULT_CURRENCY = "EUR"


def parse_amount(text):
    """Not implemented yet."""
    raise NotImplementedError
'''
API = '''"""The public API of ledgerly: load a ledger, total it."""

import csv

from .amounts import parse_amount


def load_ledger(path):
    """Rows of the CSV at ``path`` with their amounts parsed."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        amount = parse_amount(f"{row['amount']} {row['currency']}")
        row["amount"] = amount
    return rows


def total(ledger):
    """The sum of the ledger's amounts (one currency)."""
    return sum(row["amount"] for row in ledger)
'''
CLI = '''"""``python -m ledgerly.cli import FILE``: load a CSV export and print its total."""

import argparse

from .api import load_ledger, total


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ledgerly")
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import")
    imp.add_argument("path")
    args = parser.parse_args(argv)
    ledger = load_ledger(args.path)
    print(f"Imported {len(ledger)} rows from {args.path}: total {total(ledger)}")


if __name__ == "__main__":
    main()
'''
LEGACY_RATES = '''"""Exchange rates of the 2019 importer, by ISO 4217 numeric code. Read only."""

RATES = {978: 1.0, 840: 1.12, 826: 0.86, 756: 1.09, 392: 121.4}


def convert(amount, code):
    return round(amount / RATES[code], 2)
'''
AMOUNT_TESTS = (
    "test_parse_amount_plain",
    "test_parse_amount_currency",
    "test_parse_amount_default_currency",
    "test_parse_amount_thousands",
    "test_parse_amount_parentheses",
    "test_parse_amount_rejects_text",
    "test_parse_amount_whitespace",
)


def amounts_test_output(rng: random.Random, failure: tuple[str, list[str], str] | None) -> str:
    """A pytest run of tests/test_amounts.py; ``failure`` = (test name, body lines, error)."""
    failed = failure[0] if failure else None
    dots = "".join("F" if n == failed else "." for n in AMOUNT_TESTS)
    out = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0",
        "rootdir: /home/dev/ledgerly",
        f"collected {len(AMOUNT_TESTS)} items",
        "",
        f"tests/test_amounts.py {dots}{' ' * (50 - len(dots))}[100%]",
    ]
    seconds = f"{rng.uniform(0.1, 0.4):.2f}s"
    if failure is None:
        out.append(f"============================== {len(AMOUNT_TESTS)} passed in {seconds} ====")
        return "\n".join(out) + "\n"
    name, body, error = failure
    out += [
        "",
        "=================================== FAILURES ===================================",
        f"_________________________ {name} __________________________",
        "",
        f"    def {name}():",
        *body,
        "",
        f"ledgerly/amounts.py:{rng.randint(12, 18)}: {error.split(':')[0]}",
        "=========================== short test summary info ============================",
        f"FAILED tests/test_amounts.py::{name} - {error}",
        f"========================= 1 failed, {len(AMOUNT_TESTS) - 1} passed in {seconds} ====",
    ]
    return "\n".join(out) + "\n"


def docs_log(rng: random.Random, lines: int) -> str:
    out = ["sphinx-build -b html docs docs/_build/html", "Running Sphinx v7.2.6"]
    for i in range(lines):
        step = "writing output" if i % 3 == 0 else "reading sources"
        page = f"{rng.choice(WORDS)}/{rng.choice(WORDS)}"
        out.append(f"{step}... [{100 * (i + 1) // lines:3d}%] {page}")
    out.append("build succeeded.")
    return "\n".join(out) + "\n"


def import_log(rng: random.Random, lines: int, folder: str) -> str:
    out = []
    for i in range(lines):
        out.append(
            f"2025-01-15 10:{i // 60 % 60:02d}:{i % 60:02d} INFO import row {i + 1}:"
            f" {rng.choice(WORDS)} {rng.randint(1, 9999)}.{rng.randint(0, 99):02d}"
            f" {rng.choice(['EUR', 'USD', 'GBP', 'CHF'])}"
        )
    out.append(f"Imported {lines} rows from {folder} (4 files)")
    return "\n".join(out) + "\n"


def continuity_session(seed: int = 13) -> Replay:
    """The continuity replay. Every probe answer is a string a continuity mechanism must keep
    verbatim (a path, a test id, an exception line, a library's name, the user's constraint);
    the same probes are asked after ``/soft-restart`` and again after a new Aider process
    started (``session`` event). Replies after the restart never repeat an answer."""
    rng = random.Random(seed)
    s = Script(
        {
            "name": "continuity-30",
            "source": "generated by replays/generate.py (fictional ledgerly library)",
            "model": "gpt-4o",
            "max_input_tokens": 128000,
            "edit_format": "diff",
            "description": "files, edits, failing tests, a failed approach and decisions; then"
            " /soft-restart and artifact probes; then a new session and the same probes",
        }
    )
    amounts, api, cli = "ledgerly/amounts.py", "ledgerly/api.py", "ledgerly/cli.py"
    f = Files({amounts: AMOUNTS, api: API, cli: CLI})
    for path in (amounts, api, cli):
        s.add(path, f.files[path])
    facts: list[tuple[int, str, str]] = []  # (source turn, question, answer)

    t = s.user(
        "We're adding multi-currency amounts to ledgerly. Ground rules: the package must support"
        " Python 3.9 (no match statements, no `X | Y` unions), and don't touch the public API in"
        " ledgerly/api.py: load_ledger(path) and total(ledger) keep their signatures.",
        "Understood. I'll keep to 3.9 syntax and leave those two signatures as they are; the"
        f" parsing goes into the amounts module. {prose(rng, 3)}",
    )
    facts.append((t, "Which Python version must the package support?", "Python 3.9"))
    facts.append((t, "What must we not touch?", "don't touch the public API"))
    first = (
        "def parse_amount(text: str) -> Tuple[float, str]:\n"
        '    """\'1,234.50 EUR\' -> (1234.5, \'EUR\'); a bare number gets DEFAULT_CURRENCY."""\n'
        "    parts = text.split()\n"
        "    number = parts[0]\n"
        "    currency = parts[1] if len(parts) > 1 else DEFAULT_CURRENCY\n"
    )
    t = s.user(
        "Add parse_amount(text) to the amounts module: '1,234.50 EUR' should give the amount and"
        " the currency.",
        "Here is a first version.\n\n"
        + f.block(
            amounts,
            'def parse_amount(text):\n    """Not implemented yet."""\n'
            "    raise NotImplementedError",
            first + "    return float(number), currency",
        ),
    )
    facts.append((t, "Which file did we add parse_amount to?", amounts))
    value_error = "ValueError: could not convert string to float: '1,234.50'"
    thousands = (
        "test_parse_amount_thousands",
        [
            '>       assert parse_amount("1,234.50 EUR") == (1234.5, "EUR")',
            "",
            "tests/test_amounts.py:14: ",
            "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
            "text = '1,234.50 EUR'",
            "",
            "    def parse_amount(text: str) -> Tuple[float, str]:",
            "        parts = text.split()",
            "        number = parts[0]",
            ">       return float(number), currency",
            f"E       {value_error}",
        ],
        value_error,
    )
    t = s.run(
        "pytest -q tests/test_amounts.py",
        amounts_test_output(rng, thousands),
        1,
        "test",
        "The number probably carries stray whitespace from the CSV; strip it first.\n\n"
        + f.block(
            amounts,
            "    return float(number), currency",
            "    return float(number.strip()), currency",
        ),
    )
    facts.append(
        (t, "Which test failed first?", "tests/test_amounts.py::test_parse_amount_thousands")
    )
    facts.append((t, "What exception did parse_amount raise on '1,234.50 EUR'?", value_error))
    s.run(  # the failed approach: the same failure after the edit
        "pytest -q tests/test_amounts.py",
        amounts_test_output(rng, thousands),
        1,
        "test",
        "Stripping did not help: the comma is a thousands separator, and float() rejects it."
        f" {prose(rng, 2)}",
    )
    t = s.user(
        "That didn't work. Use Decimal instead of float for amounts, and use py-moneyed instead"
        " of forex-python for the currency objects.",
        "Agreed: Decimal for the number, Money objects for amount and currency, and the comma"
        " removed before parsing.\n\n"
        + f.block(
            amounts,
            "from typing import Tuple",
            "from decimal import Decimal\n\n" "from moneyed import Money",
        )
        + "\n"
        + f.block(
            amounts,
            first + "    return float(number.strip()), currency",
            "def parse_amount(text: str) -> Money:\n"
            "    \"\"\"'1,234.50 EUR' -> Money('1234.50', 'EUR'); a bare number gets"
            ' DEFAULT_CURRENCY."""\n'
            "    parts = text.split()\n"
            '    number = parts[0].replace(",", "")\n'
            "    currency = parts[1] if len(parts) > 1 else DEFAULT_CURRENCY\n"
            "    return Money(Decimal(number), currency)",
        ),
    )
    facts.append((t, "Which library did we choose for the currency objects?", "py-moneyed"))
    invalid = "decimal.InvalidOperation: [<class 'decimal.ConversionSyntax'>]"
    parentheses = (
        "test_parse_amount_parentheses",
        [
            '>       assert parse_amount("(12.00) USD") == Money("-12.00", "USD")',
            "",
            "tests/test_amounts.py:31: ",
            ">       return Money(Decimal(number), currency)",
            f"E       {invalid}",
        ],
        invalid,
    )
    t = s.run(
        "pytest -q tests/test_amounts.py",
        amounts_test_output(rng, parentheses),
        1,
        "test",
        "Accounting exports write negatives in parentheses; turn them into a minus sign.\n\n"
        + f.block(
            amounts,
            '    number = parts[0].replace(",", "")\n',
            '    number = parts[0].replace(",", "")\n'
            '    if number.startswith("(") and number.endswith(")"):\n'
            '        number = "-" + number[1:-1]  # accounting notation for negatives\n',
        ),
    )
    facts.append(
        (
            t,
            "Which test failed after the switch to Decimal?",
            "tests/test_amounts.py::test_parse_amount_parentheses",
        )
    )
    s.run("pytest -q tests/test_amounts.py", amounts_test_output(rng, None), 0, "test")
    s.add("ledgerly/legacy_rates.py", LEGACY_RATES, read_only=True)
    t = s.user(
        "Can we reuse the rate table in the legacy rates module?",
        "No: it is keyed by numeric currency codes and rounds every conversion to two places,"
        f" which Decimal amounts must not do. Better leave it out. {prose(rng, 3)}",
    )
    facts.append((t, "Which read-only file did we look at and then drop?", "legacy_rates.py"))
    s.drop("ledgerly/legacy_rates.py")
    key_error = "KeyError: 'currency'"
    t = s.run(
        "python -m ledgerly.cli import samples/march.csv",
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/runpy.py", line 197, in _run_module_as_main\n'
        "    return _run_code(code, main_globals, None,\n"
        '  File "/usr/lib/python3.11/runpy.py", line 87, in _run_code\n'
        "    exec(code, run_globals)\n"
        '  File "/home/dev/ledgerly/ledgerly/cli.py", line 19, in <module>\n'
        "    main()\n"
        '  File "/home/dev/ledgerly/ledgerly/cli.py", line 14, in main\n'
        "    ledger = load_ledger(args.path)\n"
        '  File "/home/dev/ledgerly/ledgerly/api.py", line 13, in load_ledger\n'
        "    amount = parse_amount(f\"{row['amount']} {row['currency']}\")\n"
        f"{key_error}\n",
        1,
    )
    facts.append((t, "What error did the CLI import of the March export raise?", key_error))
    t = s.user(
        "The March export has no currency column. Fix load_ledger without changing its"
        " signature.",
        "Rows without a currency get the default one; the signature stays.\n\n"
        + f.block(
            api,
            "from .amounts import parse_amount",
            "from .amounts import DEFAULT_CURRENCY, parse_amount",
        )
        + "\n"
        + f.block(
            api,
            "        amount = parse_amount(f\"{row['amount']} {row['currency']}\")",
            '        currency = row.get("currency") or DEFAULT_CURRENCY\n'
            "        amount = parse_amount(f\"{row['amount']} {currency}\")",
        ),
    )
    facts.append((t, "Which file did the fix for the CLI crash change?", api))
    s.run(
        "python -m ledgerly.cli import samples/march.csv",
        "Imported 412 rows from samples/march.csv: total 18204.17 EUR\n",
    )
    s.user("/checkpoint parser and import work")
    t = s.user(
        "Use ruff instead of flake8 for linting from now on.",
        f"Fine: one linter, configured in pyproject.toml. {prose(rng, 2)}",
    )
    facts.append((t, "Which linter did we decide to use?", "ruff"))
    # the bloat that makes a soft restart worth it: long outputs and long answers
    s.run("make docs", docs_log(rng, 260))
    s.user("How should total() handle ledgers with mixed currencies?", prose(rng, 18))
    s.run("python -m ledgerly.cli import samples/q1/ --verbose", import_log(rng, 320, "q1"))
    s.user("And rounding: where should it happen?", prose(rng, 16))
    s.run("make docs", docs_log(rng, 220))
    s.user("What else could go wrong with real bank exports?", prose(rng, 20))
    s.run("python -m ledgerly.cli import samples/q2/ --verbose", import_log(rng, 300, "q2"))
    s.user("Give me a short plan for the release notes.", prose(rng, 14))
    s.user("/soft-restart parser and import are done; next, CLI flags")
    s.user(
        "Add a --currency option to the import command so users can set the default.",
        "Here is the option; it only affects what is printed for now.\n\n"
        + f.block(
            cli,
            '    imp.add_argument("path")\n',
            '    imp.add_argument("path")\n'
            '    imp.add_argument("--currency", default=None, help="default currency code")\n',
        ),
    )
    s.user("Anything else to check before the release?", prose(rng, 6))
    for source, question, answer in facts:
        s.probe(source, s.turn - source, question, answer, kind="artifact")
    s.user("Thanks, that's all for this morning.", "You're welcome.")
    s.session(resume=True)
    s.user("Picking this up again after lunch. What's left to do?", prose(rng, 4))
    for source, question, answer in facts:
        s.probe(source, s.turn - source, question, answer, kind="artifact")
    s.user("Ok, let's start with the CLI help text.", prose(rng, 3))
    return s.replay()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else HERE
    for replay in (coding_session(), ask_research(), overflow_session(), continuity_session()):
        path = save(replay, out / f"{replay.name}.jsonl")
        print(f"{path}: {replay.turns()} turns, {len(replay.probes())} probes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
