"""The structured compressor: shape plus samples, on synthetic edge cases and real documents."""

from __future__ import annotations

import json
import re
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.compress import structured
from aider_gardener.compress.structured import MARKER_RE, compress_structured
from aider_gardener.tokens import count_tokens
from aider_gardener.types import CompressOptions, Source

SITE = Path(sysconfig.get_paths()["purelib"])


def _opts(path: str | None = None, keep: tuple[str, ...] = ()) -> CompressOptions:
    return CompressOptions(source=Source(path=path), keep_keys=frozenset(keep))


def _run(text: str, opts: CompressOptions | None = None) -> str:
    """Compress, and check the guarantees every input must meet."""
    opts = opts or _opts()
    out = compress_structured(text, opts).text
    assert len(out) <= len(text)
    assert compress_structured(out, opts).text == out, "re-compressing changed the output"
    return out


def _records(n: int) -> list[dict]:
    return [
        {"id": i, "name": f"record-{i}", "tags": ["red", "green"], "meta": {"score": i * 7}}
        for i in range(n)
    ]


# --- arrays, depth, strings ------------------------------------------------------------------


def test_arrays_keep_two_samples_and_count_the_rest():
    out = _run(json.dumps(_records(50), indent=2))
    assert "record-0" in out and "record-1" in out
    assert "score: 14" not in out and "score: 343" not in out  # the rest: only their ids
    assert "… 48 more items of the same shape" in out
    assert "[2] 2 | record-2" in out and "[49] 49 | record-49" in out
    assert MARKER_RE.search(out)


def test_differing_shapes_are_reported():
    items = [{"a": 1, "b": "x" * 30}] * 10 + ["plain string " * 5] * 5
    out = _run(json.dumps(items, indent=2))
    assert "shapes differ" in out
    assert re.search(r"10 object", out) and re.search(r"5 string", out)


def test_records_with_differing_keys_list_their_keys():
    items = [{"name": f"m{i}", "extra" if i % 2 else "other": i, "pad": "p" * 40} for i in range(9)]
    out = _run(json.dumps(items, indent=2))
    assert "different key sets" in out
    assert "name 9" in out and "pad 9" in out


def test_deep_nesting_folds_to_key_counts():
    leaf = {f"k{i}": "value that is long enough to stop inlining" for i in range(5)}
    doc = {"a": {"b": {"c": {"d": {"e": leaf}}}}}
    out = _run(json.dumps(doc, indent=2))
    assert "{… 1 keys …}" in out or "{… 5 keys …}" in out
    assert "value that is long enough" not in out


def test_long_strings_are_clipped():
    doc = {"body": "lorem ipsum " * 500, "title": "short"}
    out = _run(json.dumps(doc))
    assert len(out) < 600
    assert re.search(r"\(\+[\d,]+ chars\)", out)
    assert '"short"' in out


def test_keep_keys_survive_in_full_everywhere():
    recs = _records(40)
    recs[33]["meta"]["secret"] = "s" * 300  # inside a skipped item, longer than the clip limit
    doc = {"outer": {"inner": {"deeper": {"deepest": {"secret": "found-deep"}}}}, "recs": recs}
    out = _run(json.dumps(doc, indent=2), _opts(keep=("secret",)))
    assert "found-deep" in out
    assert "s" * 300 in out
    assert "↳ [33].meta.secret:" in out  # path relative to the array it was skipped in


def test_failure_looking_items_are_shown_besides_the_samples():
    rows = [{"test": f"t{i}", "status": "passed"} for i in range(100)]
    rows[71]["status"] = "failed"
    out = _run("\n".join(json.dumps(r) for r in rows))
    assert "t71" in out and "[71]" in out
    assert "1 failure-looking items shown" in out


def test_facts_in_skipped_parts_survive():
    rows = [{"file": "src/app.ts", "line": i, "msg": "ok"} for i in range(60)]
    rows[40]["msg"] = "error TS2339: Property 'x' does not exist at src/app.ts:41"
    out = _run(json.dumps(rows, indent=2))
    assert "TS2339" in out
    assert "src/app.ts:41" in out


# --- formats ---------------------------------------------------------------------------------


def test_csv_keeps_header_two_rows_and_column_types():
    rows = [f"{i},item {i},{i * 0.5}" for i in range(1, 301)]
    text = "qty,label,price\n" + "\n".join(rows) + "\n"
    out = _run(text, _opts("prices.csv"))
    lines = out.splitlines()
    assert lines[:3] == ["qty,label,price", rows[0], rows[1]]
    assert "… 298 more rows" in out
    assert "qty int 1..300" in out
    assert "price float 0.5..150" in out
    assert "label text, 300 distinct" in out


def test_csv_rows_keep_their_ids():
    rows = [
        f"{i},{i * 0.5},{'in stock' if i % 2 else 'sold out'},warehouse-{i % 7}" for i in range(300)
    ]
    text = "order_id,price,status,site\n" + "\n".join(rows) + "\n"
    out = _run(text, _opts("orders.csv"))
    assert "their order_id:" in out
    assert all(f"[{i + 1}] {i}\n" in out + "\n" for i in range(2, 300))
    assert "warehouse-5" not in out.split("their order_id:")[1]


def test_tsv_is_sniffed_without_a_path():
    text = "a\tb\tc\n" + "\n".join(f"{i}\tx{i}\t{i % 3}" for i in range(200))
    out = _run(text)
    assert out.startswith("a\tb\tc\n0\tx0\t0\n1\tx1\t1\n")
    assert "[structured csv:" in out


def test_yaml_and_toml_by_extension_and_by_content():
    yaml_text = "services:\n" + "".join(
        f"  - name: svc{i}\n    image: repo/svc{i}:latest\n    port: {8000 + i}\n"
        for i in range(40)
    )
    toml_text = "".join(
        f'[server{i}]\nhost = "h{i}.example.org"\nport = {i}\n\n' for i in range(40)
    )
    cases = [(yaml_text, "yaml", "compose.yml"), (toml_text, "toml", "servers.toml")]
    if structured.tomllib is None:  # Python 3.10: no TOML parser in the standard library
        cases.pop()
    for text, fmt, path in cases:
        for p in (path, None):
            out = _run(text, _opts(p))
            assert f"[structured {fmt}:" in out, (fmt, p, out[-200:])
            assert len(out) < len(text) / 2


def test_path_extension_beats_sniffing():
    text = json.dumps([{"a": i} for i in range(100)])
    assert "[structured jsonl:" not in _run(text, _opts("x.json"))
    lines = "\n".join(json.dumps({"a": i, "b": "x" * 20}) for i in range(100))
    assert "[structured jsonl:" in _run(lines, _opts("events.ndjson"))


def test_fenced_json_keeps_its_fence():
    text = "```json\n" + json.dumps(_records(30), indent=2) + "\n```\n"
    out = _run(text)
    assert out.startswith("```json\n")
    assert "\n```\n[structured json:" in out


# --- malformed and hostile input -------------------------------------------------------------


def test_trailing_commas_and_comments_are_repaired():
    text = json.dumps(_records(30), indent=2).replace('"green"\n', '"green",\n')
    text = text.replace("[\n", "[ // a comment\n", 1)
    out = _run(text)
    assert "comments or trailing commas removed" in out
    assert "… 28 more items of the same shape" in out


def test_truncated_json_is_closed():
    full = json.dumps(_records(200), indent=2)
    out = _run(full[: len(full) // 2])
    assert "truncated input closed" in out
    assert "record-0" in out and re.search(r"… \d+ more items", out)


def test_ten_thousand_levels_do_not_crash():
    for text in ("[" * 10_000 + "]" * 10_000, '{"a":' * 10_000 + "1" + "}" * 10_000):
        out = _run(text)
        assert len(out) < 300
        assert "[structured text: not parseable" in out
        assert "… 1 " in out


def test_megabyte_single_line_json():
    text = json.dumps([{"id": i, "text": "x" * 50} for i in range(15_000)])
    assert len(text) > 1_000_000
    out = _run(text)
    assert len(out) < 0.01 * len(text)
    assert "14,998 more items of the same shape" in out


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "\x00\x01\x02garbage\xff" * 300,
        "\ufffd" * 5000,
        '\x1b[31m{"a": 1}\x1b[0m' * 200,
        "a" * 1_000_000,
        "{" * 50_000,
        "]]]]}}}}" * 1000,
        '"unterminated string ' * 500,
        "when: 2024-02-30\nnext: 1\n" * 100,
        "[1, " + "9" * 5000 + "]",
    ],
    ids=[
        "empty",
        "blank",
        "binary",
        "replacement",
        "ansi",
        "1mb-word",
        "opens",
        "closes",
        "quotes",
        "bad-date",
        "huge-int",
    ],
)
def test_hostile_input_never_crashes_or_grows(text):
    _run(text)


def test_indented_text_no_parser_takes_is_folded_by_blocks():
    entries = "".join(
        f'pkg{i}@^1.0.0:\n  version "1.0.{i}"\n  resolved "https://r.example/pkg{i}.tgz"\n'
        for i in range(200)
    )
    text = "# yarn lockfile v1\n\n" + entries
    out = _run(text, _opts("yarn.lock"))
    assert "pkg0@^1.0.0:" in out and 'version "1.0.1"' in out
    assert "… 198 more blocks like these: pkg2@^1.0.0, pkg3@^1.0.0" in out
    assert len(out) < 0.1 * len(text)


# --- properties ------------------------------------------------------------------------------

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=8)
    | st.dictionaries(st.text(max_size=12), children, max_size=8),
    max_leaves=60,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_json_values, indent=st.sampled_from([None, 2]))
def test_any_json_document_never_grows_and_is_stable(value, indent):
    _run(json.dumps(value, indent=indent))


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=3000), path=st.sampled_from([None, "a.json", "a.yaml", "a.csv"]))
def test_any_text_never_grows_and_is_stable(text, path):
    _run(text, _opts(path))


@settings(max_examples=60, deadline=None)
@given(
    titles=st.lists(st.text(min_size=1, max_size=40).filter(str.strip), min_size=3, max_size=30),
)
def test_keep_keys_values_always_survive(titles):
    doc = [{"id": i, "title": t, "body": "b" * 200} for i, t in enumerate(titles)]
    out = _run(json.dumps(doc, indent=2), _opts(keep=("title",)))
    for t in titles:
        assert json.dumps(t, ensure_ascii=False) in out


# --- real documents --------------------------------------------------------------------------


def _ratio(text: str, opts: CompressOptions) -> float:
    out = _run(text, opts)
    return count_tokens(out) / count_tokens(text)


def test_github_api_fixture_meets_the_target(tool_outputs_dir):
    path = tool_outputs_dir / "github_api_paginate_issues__raw-fixture.json"
    text = path.read_text(encoding="utf-8")
    assert _ratio(text, _opts(str(path))) <= 0.25
    assert _ratio(text, _opts()) <= 0.25  # by content sniffing alone
    out = _run(text, _opts(keep=("title",)))
    for n in range(1, 14):
        assert f'"Test issue {n}"' in out


def test_yarn_error_log_manifest_and_lockfile(tool_outputs_dir):
    text = (tool_outputs_dir / "yarn_error__wonka.log").read_text(encoding="utf-8")
    start = text.index("npm manifest:")
    manifest, _ = json.JSONDecoder().raw_decode(text, text.index("{", start))
    out = _run(json.dumps(manifest, indent=2), _opts("package.json"))
    assert '"wonka"' in out
    lock_start = text.index("# yarn lockfile v1")
    lock = text[lock_start : text.index("\nTrace:", lock_start)]
    assert _ratio(lock, _opts("yarn.lock")) <= 0.25


def test_json_blocks_in_real_chat_histories(histories_dir):
    blocks = []
    for path in sorted(histories_dir.glob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        blocks += re.findall(r"^```(?:json|ya?ml|toml)\n.*?^```\n", text, re.S | re.M)
    assert blocks, "expected fenced data blocks in the real histories"
    for block in blocks:
        out = _run(block)
        assert out.startswith("```")


_SITE_DOCS = [
    "litellm/model_prices_and_context_window_backup.json",
    "aider/resources/model-metadata.json",  # JSONC: comments and trailing commas
    "aider/resources/model-settings.yml",
    "jsonschema/benchmarks/issue232/issue.json",
]


@pytest.mark.parametrize("rel", _SITE_DOCS)
def test_real_documents_shipped_with_dependencies(rel):
    path = SITE / rel
    if not path.is_file():
        pytest.skip(f"{rel} not installed")
    text = path.read_text(encoding="utf-8")
    assert _ratio(text, _opts(str(path))) <= 0.25


def test_benchmark_github_fixture(benchmark, tool_outputs_dir):
    text = (tool_outputs_dir / "github_api_paginate_issues__raw-fixture.json").read_text()
    out = benchmark(compress_structured, text, _opts())
    assert len(out.text) < len(text)


def test_benchmark_megabyte_json(benchmark):
    path = SITE / _SITE_DOCS[0]
    if not path.is_file():
        pytest.skip("litellm price list not installed")
    text = path.read_text(encoding="utf-8")
    out = benchmark(compress_structured, text, _opts(str(path)))
    assert len(out.text) < len(text)


def test_35_rows_with_ids_keep_every_id_and_path():
    """Issue 22: query rows folded to "2 samples … 33 more items" hid 32 of 33 ids and paths the
    agent used next. Every row's id-like fields stay; the rest of a row is still folded."""
    rows = [
        {
            "id": 7000 + i,
            "run_uuid": f"9f1c{i:04d}-aa",
            "path": f"src/pkg_{i}/handler.py",
            "status": "ok",
            "body": "lorem ipsum dolor sit amet, " * 6,
            "created_at": f"2026-01-{i % 28 + 1:02d}T10:00:00Z",
        }
        for i in range(35)
    ]
    out = _run(json.dumps(rows, indent=2), _opts())
    assert all(str(7000 + i) in out for i in range(35))
    assert all(f"src/pkg_{i}/handler.py" in out for i in range(35))
    assert all(f"9f1c{i:04d}-aa" in out for i in range(35))
    assert out.count("lorem ipsum") == 2  # the two samples only


def test_id_like_keys():
    like = ["id", "uuid", "user_id", "userId", "file-path", "name", "sha", "html_url", "key"]
    unlike = ["paid", "valid", "status", "body", "monkey", "created_at", "Identity"]
    assert all(structured.id_like(k) for k in like)
    assert not any(structured.id_like(k) for k in unlike)
