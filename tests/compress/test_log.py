"""The log compressor: templates collapse, facts survive, output never grows, junk never crashes.

Real outputs are read from the shared data at run time (never copied here); tests that need them
skip when the data is absent.
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.compress.log import compress_log
from aider_gardener.pipeline import compress
from aider_gardener.tokens import count_tokens
from aider_gardener.types import CompressOptions, ContentClass, Source
from tests.conftest import HISTORIES, tool_output_files
from tests.critical_facts import missing_facts

OPTS = CompressOptions(source=Source(role="tool"))
SUMMARY = re.compile(r"^\[log: ([\d,]+) lines, ([\d,]+) errors, ([\d,]+) warnings(.*)\]$")


def run(text: str, **kw) -> str:
    opts = CompressOptions(source=Source(role="tool", command=kw.pop("command", None)), **kw)
    return compress_log(text, opts).text


def summary_of(out: str) -> re.Match:
    m = SUMMARY.match(out.rstrip().rsplit("\n", 1)[-1])
    assert m, out[-300:]
    return m


def app_log(n: int = 400, seed: int = 1) -> list[str]:
    rnd = random.Random(seed)
    lines = []
    for i in range(n):
        ts = f"2024-05-01 12:{i // 60 % 60:02d}:{i % 60:02d}"
        kind = rnd.random()
        if kind < 0.5:
            lines.append(
                f"{ts} INFO worker-{rnd.randint(1, 8)} handled request {rnd.randint(1, 99999)}"
            )
        elif kind < 0.8:
            ip = ".".join(str(rnd.randint(1, 254)) for _ in range(4))
            lines.append(f"{ts} INFO accepted connection from {ip}:{rnd.randint(1024, 65535)}")
        else:
            lines.append(
                f"{ts} DEBUG cache hit ratio {rnd.random():.4f} after {rnd.randint(1, 900)}ms"
            )
    return lines


# --------------------------------------------------------------------------- synthetic logs


def test_repeated_lines_collapse_with_a_count():
    text = "\n".join(["starting"] + ["heartbeat ok"] * 300 + ["stopped"]) + "\n"
    out = run(text)
    assert "[×300] heartbeat ok" in out
    assert out.count("heartbeat ok") == 1
    assert summary_of(out).group(1) == "302"


def test_templates_mask_only_what_varies():
    lines = app_log()
    out = run("\n".join(lines))
    handled = sum(" handled request " in x for x in lines)
    assert f"[×{handled}] " in out
    line = next(x for x in out.splitlines() if "handled request" in x)
    assert "INFO worker-<n> handled request <n>" in line
    assert "<ts>" in line or "<date> <time>" in line or "<n>-<n>-<n>" not in line
    conn = next(x for x in out.splitlines() if "accepted connection" in x)
    assert "from <ip>" in conn  # an address with a port is still one placeholder
    assert len(out) < len("\n".join(lines)) / 10


def test_lines_differing_in_one_word_merge():
    rnd = random.Random(3)
    users = ["admin", "oracle", "test", "guest", "support", "ubuntu"]
    lines = [
        f"sshd[{rnd.randint(1000, 9999)}]: Invalid user {rnd.choice(users)} "
        f"from 10.0.{i % 250}.{i % 7}"
        for i in range(120)
    ]
    out = run("\n".join(lines))
    assert "[×120] sshd[<n>]: Invalid user <*> from <ip>" in out


def test_distinct_error_lines_stay_verbatim():
    lines = ["running checks"] * 50
    lines[10] = "E       assert 1 == 0"
    lines[30] = "E       assert 2 == 0"
    out = run("\n".join(lines))
    assert "E       assert 1 == 0" in out and "E       assert 2 == 0" in out
    assert summary_of(out).group(2) == "2"


def test_repeats_of_one_error_collapse_with_ids_masked():
    lines = []
    for i in range(200):
        lines.append(
            f"081109 2140{i % 60:02d} {2500 + i} INFO dfs.DataNode: served block blk_{7 * i}"
        )
        if i % 5 == 0:
            blk = -4_000_000_000_000 - i * 977
            lines.append(
                f"081109 2140{i % 60:02d} {2500 + i} WARN dfs.DataNode: 10.1.{i % 9}.7:50010:Got "
                f"exception while serving blk_{blk} to /10.2.{i % 5}.3:"
            )
    out = run("\n".join(lines))
    warn = [x for x in out.splitlines() if "Got exception" in x]
    assert len(warn) == 1
    assert warn[0].startswith("[×40] ")
    assert "blk_<n>" in warn[0] and "<ip>" in warn[0]
    assert summary_of(out).group(3) == "40"


def test_same_error_at_different_lines_keeps_every_location():
    lines = []
    for n in (12, 40, 77):
        lines += ["collecting"] * 20 + [f"src/app/models.py:{n}: TypeError", "E   TypeError: bad"]
    out = run("\n".join(lines))
    for n in (12, 40, 77):
        assert f"src/app/models.py:{n}: TypeError" in out
    assert "[×3] E   TypeError: bad" in out


def test_summary_counts_and_timespan():
    lines = app_log(120)
    lines.insert(50, "2024-05-01 12:00:50 ERROR db: connection refused")
    lines.insert(70, "2024-05-01 12:01:09 WARN db: slow query 812ms")
    out = run("\n".join(lines))
    m = summary_of(out)
    assert (m.group(1), m.group(2), m.group(3)) == ("122", "1", "1")
    first = lines[0][:19]
    last = lines[-1][:19]
    assert f"timespan {first}..{last}" in m.group(4)
    assert "ERROR db: connection refused" in out and "WARN db: slow query 812ms" in out


def test_head_and_tail_lines_are_kept():
    lines = ["Build started: target=arm64"] + app_log(600) + ["Build finished: 0 artifacts"]
    out = run("\n".join(lines))
    assert "Build started: target=arm64" in out
    assert "Build finished: 0 artifacts" in out
    assert "lines omitted" in out or "[×" in out


def test_hot_lines_are_never_collapsed():
    lines = [f"loading module mod_{i} from cache slot {i}" for i in range(80)]
    out = run("\n".join(lines), hot=frozenset({"mod_42"}))
    assert "loading module mod_42 from cache slot 42" in out


def test_paths_outside_the_project_root_are_not_facts():
    lines = [f'  File "/opt/tools/lib/helper.py", line {100 + i}, in step' for i in range(40)]
    lines += ["ok"] * 40
    with_root = run("\n".join(lines), project_root="/home/u/proj")
    without = run("\n".join(lines))
    assert 'File "/opt/tools/lib/helper.py", line 139' in without  # the project's own: kept
    # outside the root the lines are library frames: folded into one template, but every frame
    # location stays (issue 14: a frame is a fact whatever its origin)
    assert with_root.count("in step") == 1
    assert all(f'helper.py", line {100 + i}' in with_root for i in range(40))
    assert len(with_root) < len(without)


def test_every_frame_survives_library_ones_too():
    """Issue 14: a library frame is a critical fact as well (an npm ``request.js:264`` frame is
    where the failure is): no distinct frame may fold into a template or an omitted block."""
    frames = []
    for i in range(30):
        frames.append(f"    at handler (/srv/app/node_modules/express/lib/router.js:{200 + i}:7)")
        frames.append(f"    at Object.<anonymous> (src/routes/user.ts:{10 + i}:3)")
    out = run("Error: boom\n" + "\n".join(frames))
    for i in range(30):
        assert f"src/routes/user.ts:{10 + i}" in out
        assert f"router.js:{200 + i}" in out


def test_carriage_return_progress_collapses():
    text = "".join(f"\rDownloading model {i}%" for i in range(101)) + "\nDone.\n"
    out = run(text)
    assert "Downloading model <n>%" in out
    assert out.count("Downloading") == 1


def test_small_input_is_returned_unchanged():
    text = "compiling foo\nlinking foo\ndone\n"
    assert run(text) == text


def test_blank_input():
    for text in ("", "\n\n", "   "):
        assert run(text) == text


# --------------------------------------------------------------------------- test runners

PYTEST_LOG = (
    "============================= test session starts ==============================\n"
    "platform linux -- Python 3.11.7, pytest-8.0.0, pluggy-1.4.0\n"
    "collected 40 items\n\n"
    + "".join(f"tests/test_m.py::test_case_{i} PASSED{' ' * 30}[{i * 2:3d}%]\n" for i in range(39))
    + "tests/test_m.py::test_parse FAILED                                  [100%]\n\n"
    "=================================== FAILURES ===================================\n"
    "__________________________________ test_parse __________________________________\n\n"
    "    def test_parse():\n"
    "        data = load()\n"
    ">       assert parse(data) == {'a': 1}\n"
    "E       KeyError: 'a'\n\n"
    "tests/test_m.py:31: KeyError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_m.py::test_parse - KeyError: 'a'\n"
    "========================= 1 failed, 39 passed in 1.52s =========================\n"
)


def test_pytest_run_keeps_failures_and_counts():
    out = run(PYTEST_LOG, command="pytest -v")
    assert "FAILED tests/test_m.py::test_parse - KeyError: 'a'" in out
    assert "E       KeyError: 'a'" in out
    assert "tests/test_m.py:31: KeyError" in out
    assert "pytest: 1 failed, 39 passed" in summary_of(out).group(4)
    assert "test_case_7 PASSED" not in out  # passing progress lines are noise
    assert "        data = load()" not in out  # so is the source listing
    assert len(out) < len(PYTEST_LOG) / 3


def test_go_run_keeps_the_failure_message():
    lines = []
    for i in range(60):
        lines += [f"=== RUN   TestCase{i}", f"--- PASS: TestCase{i} (0.0{i % 10}s)"]
    lines += [
        "=== RUN   TestLogin",
        "    auth_test.go:88: expected status 200, got 401",
        "--- FAIL: TestLogin (0.12s)",
        "FAIL",
        "FAIL\texample.com/app/auth\t0.301s",
    ]
    out = run("\n".join(lines), command="go test ./...")
    assert "    auth_test.go:88: expected status 200, got 401" in out
    assert "--- FAIL: TestLogin (0.12s)" in out
    assert "=== RUN" not in out
    assert "go: 1 failed, 60 passed" in out


def test_failing_ids_are_restored_if_every_line_naming_them_was_cut():
    # a verbose-mode failure whose only mention is a hidden progress line would be lost;
    # the compressor must still name it
    body = "".join(f"t.py::test_{i} PASSED [ {i}%]\n" for i in range(200))
    text = body + "t.py::test_x FAILED [100%]\n=== 1 failed, 200 passed in 3.0s ===\n"
    out = run(text, command="pytest -v")
    assert "t.py::test_x" in out


def test_progress_markers_differing_in_percentage_collapse_but_test_ids_stay():
    lines = ["============================= test session starts =============================="]
    for k in range(12):
        lines += [
            f"tests/test_m.py::test_model[algorithms{k}] ",
            "WARNING  root:test_m.py:63 Running Modelling Phase",
            f"FAILED{' ' * 67}[{40 + k * 3:3d}%]",
        ]
    lines += [
        f"tests/test_m.py::test_setup FAILED{' ' * 30}[ 93%]",
        f"tests/test_m.py::test_stub FAILED{' ' * 31}[ 96%]",
    ]
    out = run("\n".join(lines) + "\n", command="pytest -v")
    out_lines = out.splitlines()
    assert "[×12] FAILED [<n>%]" in out_lines
    assert not any(re.match(r"^FAILED\s+\[\s*\d+%\]$", x) for x in out_lines)
    for test_id in ("test_setup FAILED", "test_stub FAILED"):
        assert sum(test_id in x for x in out_lines) == 1  # not merged into the masked group


def test_failing_test_lines_keep_the_digits_of_their_ids():
    ids = [f"tests/test_io.py::test_load[case{k}]" for k in range(6)]
    text = (
        "".join(f"tests/test_io.py::test_ok_{k} PASSED{' ' * 20}[{k:3d}%]\n" for k in range(60))
        + "=========================== short test summary info ============================\n"
        + "".join(f"FAILED {t} - ValueError: header row missing\n" for t in ids)
        + "========================= 6 failed, 60 passed in 1.23s =========================\n"
    )
    out_lines = run(text, command="pytest").splitlines()
    for test_id in ids:
        assert f"FAILED {test_id} - ValueError: header row missing" in out_lines
    assert not any("failing (not shown above)" in x for x in out_lines)


def test_many_failing_ids_are_still_kept_apart():
    ids = [f"tests/test_io.py::test_load[case{k}]" for k in range(300)]
    text = (
        "".join(f"FAILED {t} - ValueError: header row missing\n" for t in ids)
        + "========================= 300 failed, 60 passed in 1.23s =========================\n"
    )
    out = run(text, command="pytest")
    assert all(f"FAILED {t} - ValueError" in out for t in ids)
    assert "failing (not shown above)" not in out


def test_a_slice_of_a_split_run_leaves_the_run_summary_to_the_pipeline():
    """The head of a test log has no counts; parsed alone it would report "no counts found"."""
    head = PYTEST_LOG.split("=================================== FAILURES")[0]
    alone = summary_of(run(head, command="pytest")).group(4)
    assert "pytest: no counts found" in alone
    sliced = run(head, command="pytest", test_runner="pytest")
    assert summary_of(sliced).group(4) == ""  # lines, errors, warnings; nothing about the run
    assert "test_case_7 PASSED" not in sliced  # still parsed as pytest: passing lines are noise
    assert run(sliced, test_runner="pytest") == sliced


def test_a_slice_is_parsed_with_the_runner_found_on_the_whole_output():
    """A slice of progress dots has no cue naming pytest; the whole output had them."""
    dots = "".join(f"tests/test_{k}.py {'.' * 40} [{k * 3:3d}%]\n" for k in range(30))
    text = "collected 1200 items\n" + dots + "some closing line\n"
    assert "." * 40 in run(text)  # on its own it is just a log
    sliced = run(text, test_runner="pytest")
    assert "." * 40 not in sliced and "some closing line" in sliced


def test_a_slice_gets_no_timespan_either():
    text = "\n".join(app_log(200)) + "\n"
    assert "timespan" in summary_of(run(text)).group(4)
    assert "timespan" not in summary_of(run(text, test_runner="jest")).group(4)


# --------------------------------------------------------------------------- guarantees


def test_output_of_the_compressor_is_left_alone():
    text = "\n".join(app_log(500))
    once = run(text)
    assert once != text
    assert run(once) == once


def test_pipeline_round_trip_is_idempotent():
    text = "\n".join(app_log(500))
    first = compress(text, Source(role="tool"), cls=ContentClass.LOG)
    assert first.tokens_summary < first.tokens_original
    again = compress(first.summary, Source(role="tool"), cls=ContentClass.LOG)
    assert again.summary == first.summary


def test_one_megabyte_single_line():
    text = ("ab12 " * 200_000) + "\n"
    out = run(text)
    assert len(out) <= len(text)
    assert run(out) == out


def test_very_long_lines_are_clipped_but_keep_their_facts():
    long_err = "error[E0599]: " + "x" * 3000 + " at src/deep/mod.rs:77:5 " + "y" * 3000
    text = "\n".join(["compiling"] * 30 + [long_err] + ["done"] * 30)
    out = run(text)
    assert "E0599" in out and "src/deep/mod.rs:77" in out
    assert max(len(x) for x in out.splitlines()) < 600


def test_ansi_binary_and_replacement_characters_do_not_crash():
    junk = "\x1b[31mERROR\x1b[0m \x00\x01\x02 \ufffd\ufffd bad bytes\n" * 50
    junk += bytes(range(256)).decode("latin-1") * 20
    out = run(junk)
    assert len(out) <= len(junk)
    assert run(out) == out


LOG_LINE = st.one_of(
    st.builds(
        lambda n, ip, w: f"2024-01-01 10:00:{n % 60:02d} INFO {w} from {ip} took {n}ms",
        st.integers(0, 10**6),
        st.ip_addresses(v=4).map(str),
        st.sampled_from(["GET", "POST", "open", "close"]),
    ),
    st.builds(lambda n: f"E   ValueError: bad value {n}", st.integers(0, 50)),
    st.builds(
        lambda n, c: f"src/mod_{c}.py:{n}: error: broken",
        st.integers(1, 500),
        st.sampled_from("abc"),
    ),
    st.text(max_size=120).map(lambda s: s.replace("\n", " ")),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LOG_LINE, max_size=300))
def test_property_log_like_input(lines):
    text = "\n".join(lines)
    out = run(text)
    assert len(out) <= len(text)
    assert run(out) == out
    for line in lines:
        m = re.match(r"src/mod_(\w)\.py:(\d+): error", line)
        if m:
            assert f"src/mod_{m.group(1)}.py:{m.group(2)}" in out
        if line.startswith("E   ValueError"):
            assert "ValueError: bad value" in out


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000))
def test_property_arbitrary_text(text):
    out = run(text)
    assert len(out) <= len(text)
    assert run(out) == out


# --------------------------------------------------------------------------- real outputs

FILES = tool_output_files()
BIG_LOGS = [
    "loghub_HDFS_2k.log",
    "loghub_OpenSSH_2k.log",
    "c_build_log__minix.log",
    "pytest_long_warnings__STREAMLINE.log",
    "yarn_error__wonka.log",
    "minecraft_fabric_server__latest.log",
]


def _read(path):
    return path.read_text(encoding="utf-8", errors="replace")


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_real_output_guarantees(path):
    text = _read(path)
    result = compress_log(text, OPTS)
    out = result.text
    assert not result.fallback
    assert len(out) <= len(text)
    assert count_tokens(out) <= count_tokens(text)
    assert compress_log(out, OPTS).text == out
    missing = missing_facts(text, out)
    assert not missing, {k: sorted(v)[:5] for k, v in missing.items()}


@pytest.mark.parametrize("name", BIG_LOGS)
def test_big_logs_compress_tenfold(tool_outputs_dir, name):
    path = tool_outputs_dir / name
    if not path.is_file():
        pytest.skip(f"{name} not present")
    text = _read(path)
    out = compress_log(text, OPTS).text
    assert count_tokens(out) / count_tokens(text) <= 0.10


def test_real_pytest_windows_paths_and_ids(tool_outputs_dir):
    text = _read(tool_outputs_dir / "pytest_failures_typeerror__X_Ray_LLM.log")
    out = compress_log(text, CompressOptions(source=Source(command="pytest"))).text
    for loc in re.findall(r"^(tests\\\S+:\d+: \w+)$", text, re.M):
        assert loc in out
    for test_id in re.findall(r"^FAILED (\S+)", text, re.M):
        assert test_id in out
    final = re.search(r"(\d+) failed, (\d+) passed", text)
    assert f"pytest: {final[1]} failed, {final[2]} passed" in out


def test_real_cargo_and_tsc_diagnostics(tool_outputs_dir):
    cargo = _read(tool_outputs_dir / "cargo_compile_error__tsql_wasm.txt")
    out = compress_log(cargo, CompressOptions(source=Source(command="cargo test"))).text
    for code in re.findall(r"error\[(E\d+)\]", cargo):
        assert code in out
    for ref in re.findall(r"--> (\S+:\d+:\d+)", cargo):
        assert ref in out
    tsc = _read(tool_outputs_dir / "tsc_errors__wealth-aggregator.txt")
    out = compress_log(tsc, CompressOptions(source=Source(command="tsc --noEmit"))).text
    for path, line, code in re.findall(r"^(\S+)\((\d+),\d+\): error (TS\d+)", tsc, re.M):
        # as printed, or grouped by code and message ("TS2339 ×19 — msg — in a.tsx: lines 3,7")
        grouped = re.search(rf"{code} ×\d+ — .*in {re.escape(path)}: lines? (?:\d+,)*{line}\b", out)
        assert f"{path}({line}," in out or grouped, (path, line, code)


def test_real_go_failure(tool_outputs_dir):
    text = _read(tool_outputs_dir / "go_test_gin__mybatis-generator-gui-go.txt")
    out = compress_log(text, CompressOptions(source=Source(command="go test -v ./..."))).text
    for name in re.findall(r"--- FAIL: (\S+)", text):
        assert f"--- FAIL: {name}" in out
    assert "api_test.go:540" in out
    assert "Error:      \tShould be true" in out


def test_real_hdfs_timespan(tool_outputs_dir):
    lines = _read(tool_outputs_dir / "loghub_HDFS_2k.log").splitlines()
    out = compress_log("\n".join(lines), OPTS).text
    first = " ".join(lines[0].split()[:2])
    last = " ".join(lines[-1].split()[:2])
    assert f"timespan {first}..{last}" in summary_of(out).group(4)


SOURCE_REF = re.compile(
    r"\.(?:py|pyi|js|ts|tsx|jsx|go|rs|java|c|h|cc|cpp|rb|md|toml|ya?ml|json):\d+$"
)


def _aider_test_runs(limit: int = 12) -> list[tuple[str, str]]:
    """Cut real ``/test`` outputs out of Aider's own chat history: the first line follows
    ``> `` right after the ``#### /test <cmd>`` line, the rest run unprefixed to pytest's
    final ``=== ... in 1.23s ===`` line."""
    path = HISTORIES / "Aider-AI__aider.md"
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    runs = []
    for i, line in enumerate(lines):
        if not line.startswith("#### /test ") or i + 1 >= len(lines):
            continue
        first = lines[i + 1]
        if not first.startswith("> "):
            continue
        body = [first[2:].rstrip()]
        for nxt in lines[i + 2 : i + 5000]:
            body.append(nxt.rstrip())
            if re.match(r"^=+ .* in [\d.]+s.*=+$", nxt.rstrip()):
                runs.append((line[len("#### /test ") :].strip(), "\n".join(body)))
                break
        if len(runs) >= limit:
            break
    return runs


def test_real_aider_test_outputs(histories_dir):
    runs = _aider_test_runs()
    if not runs:
        pytest.skip("no /test output found in Aider-AI__aider.md")
    for command, text in runs:
        out = compress_log(text, CompressOptions(source=Source(command=command))).text
        assert len(out) <= len(text)
        missing = missing_facts(text, out)
        # the shared extractor reads method calls in source listings (``parts.pop(0)``) as
        # ``path(line)`` refs; only refs to real source files count here
        refs = {f for f in missing.pop("path_lines", set()) if SOURCE_REF.search(f)}
        if refs:
            missing["path_lines"] = refs
        assert not missing, (command, {k: sorted(v)[:5] for k, v in missing.items()})
        final = re.findall(r"^=+ (.*) in [\d.]+s", text, re.M)[-1]
        for num, word in re.findall(r"(\d+) (failed|passed)", final):
            assert f"{num} {word}" in out
