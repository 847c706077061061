import json
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
