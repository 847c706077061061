"""The shared definition of critical facts (``aider_gardener/critical.py``): each kind found where a
reader would look for it, the issue 14 losses reproduced and kept, and ``compress --facts``."""

from __future__ import annotations

import pytest

from aider_gardener import critical
from aider_gardener.compress_cli import main
from aider_gardener.pipeline import compress
from aider_gardener.types import Source
from tests.conftest import TOOL_OUTPUTS_MORE
from tests.hang import finishes


def _more(name: str) -> str:
    path = TOOL_OUTPUTS_MORE / name
    if not path.is_file():
        pytest.skip(f"{path} not present")
    return path.read_text(encoding="utf-8", errors="replace")


@pytest.mark.parametrize(
    "name, kind, fact",
    [
        ("npm_debug_publish_E403_node_stack__mineral-loader.log", "error_codes", "E403"),
        ("npm_debug_publish_E403_node_stack__mineral-loader.log", "frames", "request.js:302"),
        ("npm_eresolve_report__Arpav-PPCV.txt", "error_codes", "ERESOLVE"),
        (
            "terraform_plan_eks__Terraform-EKS-Cluster-Project.txt",
            "terraform",
            "aws_security_group.all_worker_mgmt will be created",
        ),
        (
            "kubectl_get_pods_all_namespaces__kmcolli-satellite.txt",
            "pods",
            "calico-node-68p49 CrashLoopBackOff",
        ),
        (
            "spring_boot_log_caused_by__IV1201-Project.log",
            "exceptions",
            "java.lang.NullPointerException: null",
        ),
        ("go_test_panic_timeout__slam-ui-proxy.txt", "panics", "test timed out after #m#s"),
        ("mypy_strict__google-auth-library-python.txt", "error_codes", "no-untyped-def"),
        ("flake8__NSLS-II-SST-profile_collection.txt", "error_codes", "E402"),
        (
            "eslint_stylish__tucsenberg-web-frontier.txt",
            "error_codes",
            "@typescript-eslint/no-unused-vars",
        ),
        ("tsc_errors__AstralDraftv2.txt", "path_lines", "components/auth/UserSettings.tsx:344"),
        ("ruff_check_full__automatic-tribble.txt", "error_codes", "F841"),
        ("clippy__google-zerocopy.txt", "error_codes", "index.html#multiple_unsafe_ops_per_block"),
    ],
)
def test_each_kind_is_found_in_real_outputs(name, kind, fact):
    assert fact in critical.extract(_more(name))[kind]


def test_lint_flags_of_a_command_line_are_not_facts():
    """``rustc … -W clippy::all`` configures lints; only a lint a diagnostic names is a fact."""
    line = "Running `rustc --crate-name x -W clippy::all -W clippy::pedantic`"
    assert not critical.extract(line)["error_codes"]
    assert (
        "clippy::needless_return"
        in critical.extract("= note: `#[warn(clippy::needless_return)]`")["error_codes"]
    )


def test_kubectl_running_pods_are_not_facts():
    pods = critical.extract(_more("kubectl_get_pods_all_namespaces__kmcolli-satellite.txt"))["pods"]
    assert pods and not any(p.endswith(" Running") for p in pods)


def test_missing_names_what_a_summary_lost():
    text = (
        "52 error code E403\n    at makeError (/usr/lib/node_modules/npm/lib/request.js:264:12)\n"
    )
    assert critical.missing(text, text) == {}
    gone = critical.missing(text, "52 error code <n>")
    assert gone == {"error_codes": {"E403"}, "frames": {"request.js:264"}}


SURFACE = (
    "\n".join(
        f"11-{i:02d} 10:0{i % 10}:00.{i:03d} 1702 {2000 + i} I WindowManager: Destroying surface"
        f" Surface(name=Win{i}) called by com.android.server.wm.WindowStateAnimator.destroySurface:"
        f"{2000 + i} com.android.server.wm.WindowState.removeLocked:{1500 + i} "
        + " ".join(f"com.android.server.wm.Frame{k}.step{k}:{100 + 7 * i + k}" for k in range(6))
        + " android.os.Binder.execTransact:565"
        for i in range(25)
    )
    + "\n"
    + "\n".join(f"11-01 10:00:{k % 60:02d}.000 1702 1702 I Noise: tick {k}" for k in range(400))
)

FATAL = (
    "2015-10-18 18:05:33,570 FATAL [RMCommunicator Allocator] "
    "org.apache.hadoop.mapreduce.v2.app.rm.RMContainerAllocator: ERROR IN CONTACTING RM. "
    + "retrying " * 60
    + "java.net.NoRouteToHostException: No Route to Host from MININT-FNANLI5/127.0.0.1 to "
    "msra-sa-41:8030 failed on socket timeout exception: java.net.NoRouteToHostException: "
    "No route to host: no further information; For more details see: "
    "http://wiki.apache.org/hadoop/NoRouteToHost\n"
)


@pytest.mark.parametrize("text", [SURFACE, FATAL * 3 + SURFACE], ids=["called-by", "fatal"])
def test_issue_14_losses_are_kept(text):
    """Template folding of 25 ``called by`` lines, and a long FATAL line, lost facts before."""
    result = compress(text, source=Source(role="tool"))
    assert critical.missing(text, result.summary) == {}
    assert len(result.summary) < len(text)


def test_shorten_cuts_free_text_only():
    line = FATAL.strip()
    short = critical.shorten(line, 200)
    assert len(short) < len(line)
    for fact in critical.line_facts(line):
        assert fact in short


def test_compress_facts_prints_found_and_kept(tmp_path, capsys):
    (tmp_path / "a.log").write_text(SURFACE)
    (tmp_path / "b.log").write_text("src/app.py:12: error: bad  [arg-type]\n" * 3)
    assert main(["compress", str(tmp_path), "--facts"]) == 0
    out = capsys.readouterr().out
    row = next(x for x in out.splitlines() if x.startswith("a.log") and "log" not in x[5:])
    found, kept = (int(v.replace(",", "")) for v in row.split()[1:3])
    assert found == kept == sum(len(v) for v in critical.extract(SURFACE).values())
    assert "fact kind" in out and "arg-type" not in out.split("fact kind")[0].split("b.log")[-1]


def test_diagnostics_grouped_by_code_keep_every_location():
    """49 distinct ``error TS1005`` lines: every code and location survives, in fewer tokens."""
    text = "".join(
        f"src/{'a' if i % 3 else 'b'}.tsx({100 + i},{i % 7 + 1}): error TS1005: ',' expected.\n"
        for i in range(49)
    )
    result = compress(text, source=Source(role="tool"))
    assert critical.missing(text, result.summary) == {}
    assert "TS1005 ×49 — ',' expected. — in src/b.tsx: lines 100,103,106," in result.summary
    assert "; in src/a.tsx: lines 101,102,104," in result.summary
    assert result.tokens_summary < result.tokens_original / 3


def test_template_folding_lists_every_distinct_frame():
    """25 ``Destroying surface … called by <frames>`` lines fold into one template, followed by
    every distinct ``Class.method:line`` of all 25 (none cut, none repeated)."""
    out = compress(SURFACE, source=Source(role="tool")).summary
    assert out.count("Destroying surface") == 1 and "[×25]" in out
    frames = critical.extract(SURFACE)["frames"]
    assert len(frames) > 100 and all(f in out for f in frames)
    assert out.count("Frame0.step0:100 ") == 1


def test_a_repr_with_a_number_is_no_file_position():
    """Odoo's ``ir.ui.view(3715,)`` read as ``ir.ui.view`` line 3715 kept a noise line as a fact
    and put it in Claude Code state blocks; ``file.cpp(12,5)`` (MSVC) still is one."""
    from aider_gardener.critical import PATH_LINE

    assert not PATH_LINE.search("'view': ir.ui.view(3715,), 'arch': ...")
    assert PATH_LINE.search("src/a.cpp(12,5): error C2065").groups() == ("src/a.cpp", "12")


def test_js_frames_are_found_in_linear_time():
    """JS_FRAME's lazy prefix tried every "at " of a line against the rest of it: a line of many
    "at " was quadratic (300 KB: minutes)."""
    assert finishes(critical.frames, "at " * 100_000 + "x.js:1") == {"x.js:1"}
    stack = (
        "TypeError: x is undefined\n    at run (/app/src/main.js:12:5)\n"
        "    at file:///app/src/boot.mjs:3:1\n"
        "44 verbose stack     at Module._load (/app/lib/load.js:9:2)\n"
        "cat (y.js:4) is no frame, nor is what:5\n"
    )
    assert critical.frames(stack) == {"main.js:12", "boot.mjs:3", "load.js:9"}


@pytest.mark.parametrize(
    "text",
    [
        "Apply complete! Resources: " + "a" * 100_000 + "." + " " * 100_000 + "x\n",
        "called by " + "a." * 100_000 + " x\n",
    ],
    ids=["terraform totals", "called-by frame"],
)
def test_long_fact_lines_are_scanned_in_linear_time(text):
    """TF_TOTALS (.+?\\.?\\s*$) retried the trailing blanks after every character, and
    CALLED_BY_FRAME ((?:[a-z][\\w$]*\\.)+) started at every segment of "a.a.a…": both quadratic."""
    assert isinstance(finishes(critical.extract, text), dict)
    assert critical.terraform("Apply complete! Resources: 3 added, 0 changed, 0 destroyed.\n") == {
        "Apply complete! Resources: 3 added, 0 changed, 0 destroyed"
    }
    assert critical.frames("called by org.acme.Foo.bar:12\n") == {"Foo.bar:12"}
