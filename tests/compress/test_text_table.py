"""Query tools' text tables keep every row's ids (issue 22: psql rows reached the model folded as
"2 samples … 33 more items", and the ids the agent queried for next were gone)."""

from __future__ import annotations

from aider_gardener.classify import segment
from aider_gardener.compress.log import compress_log
from aider_gardener.compress.text_table import text_table
from aider_gardener.pipeline import compress
from aider_gardener.types import CompressOptions, ContentClass, Source

PSQL = "psql -c 'select * from orders'"


def psql(n: int = 300) -> str:
    rows = [
        f" {i:4d} | ORD-{1000 + i} | customer {i % 17:<3d} | shipped on a slow boat, row {i}"
        for i in range(n)
    ]
    return (
        "  id  | order_key | customer     | note\n"
        "------+-----------+--------------+------------------------------\n"
        + "\n".join(rows)
        + f"\n({n} rows)\n"
    )


def test_psql_mysql_and_box_tables_are_read_as_rows():
    t = text_table(psql(5))
    assert t.header == ["id", "order_key", "customer", "note"] and len(t.rows) == 5
    assert t.rows[0][:2] == ["0", "ORD-1000"] and t.notes == ["(5 rows)"]
    mysql = (
        "+----+--------+\n| id | sku    |\n+----+--------+\n"
        + "\n".join(f"| {i} | SKU-{i} |" for i in range(6))
        + "\n+----+--------+\n6 rows in set (0.01 sec)\n"
    )
    t = text_table(mysql)
    assert t.header == ["id", "sku"] and t.rows[5] == ["5", "SKU-5"]
    box = (
        "┌────┬──────┐\n│ id │ name │\n├────┼──────┤\n"
        + "\n".join(f"│ {i}  │ n{i}   │" for i in range(4))
        + "\n└────┴──────┘\n"
    )
    assert text_table(box).rows[3] == ["3", "n3"]


def test_logs_and_prose_with_bars_are_not_tables():
    assert text_table("a | b\nc | d\ne | f\ng | h\ni | j") is None  # no rule under a header
    log = "\n".join(f"2026-01-01 INFO worker {i} | done" for i in range(50))
    assert text_table(log) is None
    mixed = "id | x\n---+---\n" + "\n".join(f"line {i} without cells" for i in range(20))
    assert text_table(mixed) is None


def test_every_hidden_rows_ids_reach_the_summary():
    text = psql()
    segs = segment(text, Source(role="tool", command=PSQL))
    assert [(s.cls, s.meta.get("format")) for s in segs] == [(ContentClass.STRUCTURED, "table")]
    out = compress(text, Source(role="tool", command=PSQL))
    keys = [f"ORD-{1000 + i}" for i in range(300)]
    shown = [k for k in keys if k in out.summary]
    assert len(shown) >= 250 and shown == keys[: len(shown)]  # in order, none skipped
    assert "[structured table: 300 rows × 4 columns" in out.summary and "(300 rows)" in out.summary
    assert len(out.summary) < 0.5 * len(text)
    folded = compress_log(text, CompressOptions()).text
    assert sum(k in folded for k in keys) < len(shown)  # what the log compressor kept
    assert compress(out.summary, Source(role="tool", command=PSQL)).summary == out.summary
