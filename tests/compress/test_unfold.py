"""Names the log compressor folded into ``[×N] … <*>`` come back within a token room.

Each summary here is the real log compressor's, of an output made the way the tools print it.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.compress.log import compress_log
from aider_gardener.compress.unfold import unfold
from aider_gardener.tokens import count_tokens
from aider_gardener.types import CompressOptions, Source

OPTS = CompressOptions(source=Source(role="tool"))


def count(text: str) -> int:
    return count_tokens(text, "gpt-4o")


def odoo_rows(conflict_last: bool = False) -> tuple[str, list[str]]:
    """An Odoo module install that failed on 12 access rows, as ``odoo -i`` prints it."""
    names = [f"access_daily_search_{w}_user" for w in "abcdefghijkl"]
    values = ", ".join(
        f"('search_leads','{n}','ir.model.access',{2204 + i},false)"
        for i, n in enumerate(names * 4)
    )
    lines = [
        "2026-05-05 23:09:16,886 1214 INFO odoo18 odoo.modules.loading: Loading module"
        " search_leads (227/227)",
        f'2026-05-05 23:09:20,504 1214 ERROR odoo18 odoo.sql_db: bad query: b"INSERT INTO'
        f' ir_model_data (module,name,model,res_id,noupdate) VALUES {values}"',
        *([] if conflict_last else [CONFLICT]),
        "2026-05-05 23:09:20,504 1214 ERROR odoo18 odoo.addons.base.models.ir_model: Failed to"
        " insert ir_model_data",
    ]
    lines += [
        f"('search_leads', '{n}', 'ir.model.access', {2204 + i}, False)"
        for i, n in enumerate(names)
    ]
    return "\n".join(lines + ([CONFLICT] if conflict_last else [])), names


CONFLICT = "ERROR: ON CONFLICT DO UPDATE command cannot affect row a second time"


def unzip(n: int = 400) -> tuple[str, list[str]]:
    files = [f"work/assets/dir{i % 7}/file_{i:03d}.so" for i in range(n)]
    lines = ["Archive:  magisk.apk", *(f"  inflating: {f}  " for f in files), "done"]
    return "\n".join(lines), files


def test_folded_rows_come_back_whole_when_they_fit():
    text, names = odoo_rows()
    summary = compress_log(text, OPTS).text
    assert "[×12]" in summary and not all(n in summary for n in names)
    more = unfold(summary, text, 1000, count)
    assert all(n in more for n in names)
    assert "[×12]" not in more
    assert "ON CONFLICT DO UPDATE" in more  # the rest of the summary stays
    assert count(more) - count(summary) <= 1000


def test_omitted_lines_between_two_kept_ones_come_back_when_they_fit():
    text, names = odoo_rows(conflict_last=True)
    summary = compress_log(text, OPTS).text
    assert "… 12 lines omitted …" in summary
    assert unfold(summary, text, 50, count) == summary  # not enough room for all twelve
    more = unfold(summary, text, 1000, count)
    assert "omitted" not in more and all(n in more for n in names)
    assert more.split("\n")[-2] == CONFLICT


def test_names_that_do_not_fit_are_listed_by_folder_with_the_rest_counted():
    text, files = unzip()
    summary = compress_log(text, OPTS).text
    assert "[×400]" in summary
    more = unfold(summary, text, 300, count, " (all: expand x)")
    added = count(more) - count(summary)
    assert 0 < added <= 300
    assert "[×400]" in more  # the template stays: the lines did not fit whole
    shown = [f for f in files if f.rsplit("/", 1)[1] in more]
    assert len(shown) >= 20
    assert "  work/assets/dir0/: file_000.so, file_007.so" in more
    left = next(x for x in more.split("\n") if x.startswith("  … "))
    assert left.startswith(f"  … {400 - len(shown):,} more (") and left.endswith(" (all: expand x)")
    # every folder is named, those whose names did not all fit with how many are left
    assert all(f"work/assets/dir{d}/" in more for d in range(7))
    assert "; work/assets/dir6/ 57)" in left


def test_no_room_or_no_names_leaves_the_summary_as_it_is():
    text, _ = unzip()
    summary = compress_log(text, OPTS).text
    assert unfold(summary, text, 0, count) == summary
    assert unfold(summary, text, 10, count) == summary  # less than a useful list
    numbers = "\n".join(f"worker {i} finished in {i * 3} ms" for i in range(200))
    folded = compress_log(numbers, OPTS).text
    assert unfold(folded, numbers, 2000, count) == folded  # <n> only: nothing to name


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=3000), st.integers(0, 3000))
def test_junk_never_raises_and_never_passes_its_room(text, room):
    summary = compress_log(text, OPTS).text
    more = unfold(summary, text, room, count)
    assert more == summary or count(more) - count(summary) <= room


def test_lines_left_out_without_a_marker_come_back_last_where_room_is_left():
    """Three INFO lines a log summary dropped silently, between a kept line and one it clipped:
    they come back after what was folded, in the room that is left."""
    loaded = ["security/security.xml", "security/ir.model.access.csv", "data/cron.xml"]
    lines = ["2026-05-05 23:09:16,886 1214 INFO loading: Loading module search_leads (227/227)"]
    lines += [
        f"2026-05-05 23:09:{17 + i},000 1214 INFO loading: loading search_leads/{f}"
        for i, f in enumerate(loaded)
    ]
    lines += ["2026-05-05 23:09:20,504 1214 ERROR sql_db: bad query: INSERT INTO " + "x" * 3000]
    lines += ["ERROR: ON CONFLICT DO UPDATE command cannot affect row a second time"]
    text = "\n".join(lines)
    summary = compress_log(text, OPTS).text
    assert not any(f in summary for f in loaded) and "omitted" not in summary
    more = unfold(summary, text, 200, count)
    rows = more.split("\n")
    assert rows[1:4] == lines[1:4]  # in place, between the lines the summary kept
    assert rows[4].startswith("2026-05-05 23:09:20,504 1214 ERROR sql_db: bad query")
    assert unfold(summary, text, 20, count) == summary  # not all three fit: none is added


def test_folder_names_are_listed_under_their_parent():
    """``unzip``'s ``creating: dir/`` lines: a name ending in a separator is a folder, listed
    under its parent with its separator (``paths.split_path``), never as an empty name."""
    dirs = [f"w/part{i % 5}/d{i:03d}/" for i in range(300)]
    text = "Archive:  a.zip\n" + "".join(f"   creating: {d}\n" for d in dirs) + "done"
    summary = compress_log(text, OPTS).text
    more = unfold(summary, text, 120, count, " (x)")
    assert "  w/part0/: d000/, d005/, d010/" in more
    assert ": ," not in more and not more.rstrip().endswith(":")
