import json
import re
import subprocess
import sys


def run(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "aider_gardener", *args], input=stdin, capture_output=True
    )


def test_compress_file_json(tmp_path):
    log = tmp_path / "out.log"
    log.write_text("INFO request 1 took 3ms\n" * 400 + "ERROR db timeout after 30s\n")
    out = run("compress", str(log), "--json")
    assert out.returncode == 0, out.stderr
    obj = json.loads(out.stdout)
    for key in ("class", "tokens_original", "tokens_summary", "ratio", "summary", "segments"):
        assert key in obj
    assert obj["tokens_summary"] < obj["tokens_original"]
    assert "db timeout" in obj["summary"]


def test_compress_stdin_forced_class():
    out = run("compress", "-", "--class", "prose", stdin=b"One sentence. Another one here.")
    assert out.returncode == 0
    assert b"prose" in out.stderr


def test_compress_directory_prints_table_and_totals(tmp_path):
    (tmp_path / "a.log").write_text("x ok\n" * 100)
    (tmp_path / "b.json").write_text(json.dumps([{"id": i} for i in range(200)]))
    out = run("compress", str(tmp_path))
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "a.log" in text and "b.json" in text and "totals by segment class" in text


def test_missing_file_is_one_clear_line(tmp_path):
    out = run("compress", str(tmp_path / "nope.log"))
    assert out.returncode == 1
    assert out.stderr.decode().count("\n") == 1 and "nope.log" in out.stderr.decode()


def _log(tmp_path):
    log = tmp_path / "out.log"
    log.write_text("INFO request 1 took 3ms\n" * 400 + "ERROR db timeout after 30s\n")
    return log


def test_compress_without_store_prints_no_id(tmp_path):
    """Nothing is stored, so an id would send the user to /recall for nothing (issue 13.7)."""
    log = _log(tmp_path)
    out = run("compress", str(log))
    assert out.returncode == 0, out.stderr
    assert b"full output stored" not in out.stdout and b"id=" not in out.stdout
    assert b"not stored" in out.stderr
    assert json.loads(run("compress", str(log), "--json").stdout)["id"] is None
    assert not list(tmp_path.rglob("*.sqlite"))


def test_compress_with_store_keeps_the_original_under_the_printed_id(tmp_path):
    from aider_gardener.store.db import Store

    log = _log(tmp_path)
    out = run("compress", str(log), "--store", str(tmp_path / "st"))
    assert out.returncode == 0, out.stderr
    handle = re.search(rb"\[full output stored: id=(\w+)\]", out.stdout)
    assert handle, out.stdout
    entry_id = handle.group(1).decode()
    assert f"stored as id={entry_id}".encode() in out.stderr
    store = Store(tmp_path / "st", vectors=False)
    try:
        entry = store.get(entry_id)
        assert entry is not None and entry.original == log.read_text()
    finally:
        store.close()
    obj = json.loads(run("compress", str(log), "--json", "--store", str(tmp_path / "st")).stdout)
    assert obj["id"] == entry_id
