"""Assistant replies: what is split out, with which class and meta."""

from __future__ import annotations

from aider_gardener.classify import segment
from aider_gardener.classify.assistant import sniff
from aider_gardener.types import ContentClass, Source

C = ContentClass
ASSISTANT = Source(role="assistant")


REPLY = """I'll make `load` tolerate a missing file and add a test for it.

app/io.py
```python
<<<<<<< SEARCH
def load(path):
    return open(path).read()
=======
def load(path):
    if not os.path.exists(path):
        return ""
    return open(path).read()
>>>>>>> REPLACE
```

You can check it with:

```bash
pytest tests/test_io.py
```

The config example:

```json
{"retries": 3, "paths": ["a", "b"]}
```

That's all.
"""


def test_assistant_reply_splits_into_prose_edits_and_fences():
    segs = segment(REPLY, ASSISTANT)
    assert [s.cls for s in segs] == [
        C.PROSE,
        C.EDIT,
        C.PROSE,
        C.CODE,
        C.PROSE,
        C.STRUCTURED,
        C.PROSE,
    ]
    edit = segs[1]
    assert edit.text.startswith("app/io.py\n```python\n<<<<<<< SEARCH")
    assert edit.text.rstrip().endswith(">>>>>>> REPLACE\n```")
    assert edit.meta == {
        "fence": "1",
        "lang": "python",
        "path": "app/io.py",
        "edit": "search_replace",
    }
    assert segs[3].meta == {"fence": "1", "lang": "bash"}


def test_search_replace_with_nested_fences_in_the_edited_text_stays_one_edit():
    reply = (
        "Updating the docs.\n\n"
        "docs/api.md\n```markdown\n<<<<<<< SEARCH\n=======\n# API\n\n## Example\n```bash\n"
        "curl localhost\n```\n\nMore text.\n>>>>>>> REPLACE\n```\n\nDone.\n"
    )
    segs = segment(reply, ASSISTANT)
    assert [s.cls for s in segs] == [C.PROSE, C.EDIT, C.PROSE]
    assert "curl localhost" in segs[1].text and segs[1].meta["path"] == "docs/api.md"


def test_whole_file_fence_and_unified_diff_are_edits():
    reply = (
        "Here is the new file:\n\nsrc/main.go\n```go\npackage main\n\nfunc main() {}\n```\n\n"
        "And the patch:\n\n```diff\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n```\n"
    )
    segs = segment(reply, ASSISTANT)
    edits = [s for s in segs if s.cls is C.EDIT]
    assert [e.meta.get("path") for e in edits] == ["src/main.go", "x.py"]
    assert [e.meta["edit"] for e in edits] == ["whole", "udiff"]


def test_aider_tag_fences_and_path_inside_the_info_string():
    reply = "backend/app.py\n<source>\nimport os\nprint(os.sep)\n</source>\n\nThat is it.\n"
    segs = segment(reply, ASSISTANT)
    assert segs[0].cls is C.EDIT and segs[0].meta["path"] == "backend/app.py"
    reply2 = "```src/util.ts\nexport const x = 1;\n```\n"
    assert segment(reply2, ASSISTANT)[0].meta["path"] == "src/util.ts"


def test_loose_fences_are_judged_by_their_content():
    reply = (
        "Run:\n\n```\nnpm run dev\n```\n\nThe doc draft:\n\n```\n"
        "This page explains how the service is configured and deployed.\n"
        "Each section below describes one of the settings in plain words.\n```\n"
    )
    segs = segment(reply, ASSISTANT)
    fenced = [s for s in segs if s.meta.get("fence")]
    assert [s.cls for s in fenced] == [C.CODE, C.PROSE]


def test_unclosed_fence_runs_to_the_end():
    reply = "Partial answer:\n\n```python\ndef f():\n    return 1\n"
    segs = segment(reply, ASSISTANT)
    assert [s.cls for s in segs] == [C.PROSE, C.CODE]
    assert segs[-1].end == len(reply)


def test_sniff_tells_content_kinds_apart():
    trace = ["Traceback (most recent call last):", '  File "a.py", line 1, in f', "    g()", "E: x"]
    assert sniff(trace) is C.ERROR
    assert sniff(['{"a": 1,', ' "b": [2, 3]}']) is C.STRUCTURED
    assert sniff(["--- a/x", "+++ b/x", "@@ -1 +1 @@", "-a", "+b"]) is C.EDIT
    prose = [
        "This is a sentence about the design of the module and why it exists.",
        "Another sentence explains the trade-offs we accepted here.",
    ]
    assert sniff(prose) is C.PROSE
    assert sniff(["import os", "x = os.getcwd()", "print(x)"]) is C.CODE
