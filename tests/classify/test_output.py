"""Command output: log by default, traces / JSON / lockfiles / diffs cut out; real outputs."""

from __future__ import annotations

import pytest

from aider_gardener.classify import classify, segment
from aider_gardener.classify.output import output_spans
from aider_gardener.types import ContentClass, Source
from tests.conftest import tool_output_files

C = ContentClass
TOOL = Source(role="tool")


def test_log_with_a_traceback_is_log_error_log():
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app.py", line 12, in handler\n    return db.get(key)\n'
        "KeyError: 'user:42'\n"
    )
    text = "2024-01-01 10:00:00 INFO request\n" + tb + "2024-01-01 10:00:01 INFO next\n"
    segs = segment(text, TOOL)
    assert [s.cls for s in segs] == [C.LOG, C.ERROR, C.LOG]
    assert segs[1].text == tb and segs[1].meta == {"lang": "python"}


def test_a_few_error_lines_keep_a_log_one_segment():
    text = "".join(f"2024-01-01 10:00:{i:02d} INFO step {i}\n" for i in range(20))
    text += "2024-01-01 10:01:00 ERROR step 21 failed: timeout\n"
    assert [s.cls for s in segment(text, TOOL)] == [C.LOG]


def test_whole_json_output_is_structured_even_without_a_command():
    assert [s.cls for s in segment('[{"id": 1}, {"id": 2}]\n', TOOL)] == [C.STRUCTURED]


def test_git_diff_output_keeps_commit_header_as_log():
    text = (
        "commit 1234567\nAuthor: A <a@b>\n\n    fix\n\n"
        "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    )
    segs = segment(text, Source(role="tool", command="git show HEAD"))
    assert [s.cls for s in segs] == [C.LOG, C.EDIT]
    assert segs[1].text.startswith("diff --git")


def test_markdown_document_output_is_prose_with_its_code_blocks():
    doc = (
        "# Setup\n\nThis project needs a recent Python and a running database server.\n\n"
        "## Install\n\nInstall the dependencies first, then run the migrations once.\n\n"
        "```bash\npip install -e .\nalembic upgrade head\n```\n\n"
        "- Configure the environment variables described below.\n"
        "- Start the server and open the dashboard in your browser.\n"
    )
    segs = segment(doc, Source(role="tool", command="cat INSTALL"))
    assert [s.cls for s in segs] == [C.PROSE, C.CODE, C.PROSE]


def test_output_spans_of_blank_output_is_empty():
    assert output_spans("   \n\n") == []


# Real outputs: what a person calls each whole file (see bench/labels/classification.tsv).
EXPECTED = {
    "c_build_log": C.LOG,
    "cargo_compile_error": C.LOG,
    "github_api_paginate_issues": C.STRUCTURED,
    "go_test_gin": C.LOG,
    "jest_nestjs": C.LOG,
    "loghub_HDFS_2k.log": C.LOG,
    "loghub_OpenSSH_2k.log": C.LOG,
    "maven_cucumber_java": C.LOG,
    "minecraft_fabric_server": C.LOG,
    "pytest_failures_typeerror": C.ERROR,
    "pytest_importerror": C.LOG,
    "pytest_long_warnings": C.ERROR,
    "tsc_errors": C.LOG,
    "yarn_error": C.STRUCTURED,
}
FILES = tool_output_files()


@pytest.mark.parametrize("path", FILES, ids=[p.name.split("__")[0] for p in FILES])
def test_real_tool_outputs(path, tool_outputs_dir):
    text = path.read_text(encoding="utf-8", errors="replace")
    segs = segment(text, TOOL)
    assert "".join(s.text for s in segs) == text
    key = next(k for k in EXPECTED if path.name.startswith(k))
    assert classify(text, TOOL) is EXPECTED[key]


def test_real_pytest_failures_each_failure_is_one_error_segment(tool_outputs_dir):
    text = (tool_outputs_dir / "pytest_failures_typeerror__X_Ray_LLM.log").read_text(
        encoding="utf-8", errors="replace"
    )
    errors = [s for s in segment(text, Source(role="tool", command="pytest")) if s.cls is C.ERROR]
    failed = text.count("\nFAILED ")
    assert len(errors) == failed == 8
    assert all(e.text.startswith("____") for e in errors)


def test_real_maven_stack_traces_are_found(tool_outputs_dir):
    text = (tool_outputs_dir / "maven_cucumber_java__simple-dtu-pay.txt").read_text(
        encoding="utf-8", errors="replace"
    )
    errors = [s for s in segment(text, TOOL) if s.cls is C.ERROR]
    assert len(errors) == 3
    for e in errors:
        assert "PendingException: TODO: implement me" in e.text
        assert e.text.rstrip().endswith("Token.feature:15)")
        assert e.meta["lang"] == "java"


def test_real_yarn_error_log_parts(tool_outputs_dir):
    text = (tool_outputs_dir / "yarn_error__wonka.log").read_text(
        encoding="utf-8", errors="replace"
    )
    segs = segment(text, TOOL)
    kinds = [s.cls for s in segs]
    assert kinds == [C.LOG, C.STRUCTURED, C.LOG, C.STRUCTURED, C.ERROR]
    assert segs[1].text.lstrip().startswith("{") and '"name": "wonka"' in segs[1].text
    assert segs[4].text.startswith("Trace:")


def test_issue_14_output_kinds():
    """A bare ``git diff`` is an edit, a YAML manifest structured, gradle/terraform/vite output a
    log (they read as prose or code line by line)."""
    from aider_gardener.classify import classify
    from aider_gardener.types import ContentClass, Source

    tool = Source(role="tool")
    diff = (
        "diff --git a/x.py b/x.py\nindex 1..2 100644\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    assert classify(diff, tool) is ContentClass.EDIT
    yaml = "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  labels:\n    app: x\n"
    yaml += "spec:\n  ports:\n    - port: 80\n      protocol: TCP\n  selector:\n    app: x\n"
    assert classify(yaml, tool) is ContentClass.STRUCTURED
    gradle = "> Task :app:compileKotlin FAILED\ne: file:///a/B.kt:3:5 Unresolved reference\n" * 5
    gradle += "FAILURE: Build failed with an exception.\n* What went wrong:\nBUILD FAILED in 3s\n"
    assert classify(gradle, tool) is ContentClass.LOG
    tf = 'aws_vpc.main: Creating...\n  cidr_block: "" => "10.0.0.0/16"\n' * 6
    assert classify(tf + "Apply complete! Resources: 6 added.\n", tool) is ContentClass.LOG
