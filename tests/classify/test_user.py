"""User messages: the prompt stays; large pastes get the class of what they are."""

from __future__ import annotations

from aider_gardener.classify import segment
from aider_gardener.classify.user import PASTE_MIN_LINES
from aider_gardener.types import ContentClass, Source

C = ContentClass
USER = Source(role="user")


def classes(text, src):
    return [s.cls for s in segment(text, src)]


def py_traceback(frames: int) -> str:
    body = "".join(
        f'  File "/app/pkg/mod{i}.py", line {10 + i}, in f{i}\n    g{i}()\n' for i in range(frames)
    )
    return "Traceback (most recent call last):\n" + body + "ValueError: bad value\n"


def test_user_words_are_prompt_and_small_pastes_stay_in_it():
    small = "Fix this please:\n\n```\n" + py_traceback(2) + "```\n"
    assert classes(small, USER) == [C.PROMPT]


def test_large_pasted_traceback_in_user_message_is_error():
    msg = "Fix this please:\n\n" + py_traceback(PASTE_MIN_LINES) + "\nThanks!\n"
    segs = segment(msg, USER)
    assert [s.cls for s in segs] == [C.PROMPT, C.ERROR, C.PROMPT]
    assert segs[1].text.startswith("Traceback (most recent call last):")
    assert "ValueError: bad value" in segs[1].text


def test_large_fenced_paste_gets_the_class_of_its_content():
    rows = ",\n".join(f'  {{"id": {i}, "name": "item{i}"}}' for i in range(25))
    msg = f"Here is the API output:\n\n```json\n[\n{rows}\n]\n```\n\nWhy is item7 missing?\n"
    assert classes(msg, USER) == [C.PROMPT, C.STRUCTURED, C.PROMPT]
    code = "\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(12))
    msg2 = f"Review this:\n\n```\n{code}\n```\n"
    assert classes(msg2, USER) == [C.PROMPT, C.CODE]


def test_large_unfenced_log_paste_in_user_message_is_log():
    log = "".join(f"2024-05-01 12:00:{i:02d} WARN cache miss for key {i}\n" for i in range(30))
    msg = "The server prints this over and over, why?\n" + log
    assert classes(msg, USER) == [C.PROMPT, C.LOG]


def test_double_spaced_paste_counts_its_lines_once():
    code = "".join(f"x{i} = {i}\n\n" for i in range(12))  # 24 lines, 12 real ones
    msg = f"What does this do?\n\n```\n{code}```\n"
    assert classes(msg, USER) == [C.PROMPT]


def test_run_wrapper_output_is_classified_as_command_output():
    out = (
        "============================= test session starts ==============================\n"
        "collected 1 item\n\ntests/test_x.py F\n\n"
        "=================================== FAILURES ===================================\n"
        "___________________________________ test_x ____________________________________\n\n"
        "    def test_x():\n>       assert f() == 2\nE       assert 1 == 2\n\n"
        "tests/test_x.py:3: AssertionError\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/test_x.py::test_x - assert 1 == 2\n"
        "============================== 1 failed in 0.01s ===============================\n"
    )
    msg = f"I ran this command:\n\npytest tests/test_x.py\n\nAnd got this output:\n\n{out}\n"
    segs = segment(msg, USER)
    assert [s.cls for s in segs] == [C.PROMPT, C.LOG, C.ERROR, C.LOG]
    assert segs[1].meta["command"] == "pytest tests/test_x.py"
    assert segs[1].meta["runner"] == "pytest"
    assert segs[2].text.startswith("____") and "AssertionError" in segs[2].text


def test_file_contents_shown_in_a_user_message_are_code_with_their_path():
    body = "\n".join(f"def f{i}():\n    return {i}" for i in range(12))
    msg = f"Here are the files:\n\napp/funcs.py\n```\n{body}\n```\n"
    segs = segment(msg, USER)
    assert [s.cls for s in segs] == [C.PROMPT, C.CODE]
    assert segs[1].meta["path"] == "app/funcs.py" and "edit" not in segs[1].meta


def test_failed_edit_report_sent_back_by_aider_is_log_not_prompt():
    report = (
        "# 1 SEARCH/REPLACE block failed to match!\n\n## SearchReplaceNoExactMatch: This SEARCH "
        "block failed to exactly match lines in a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n"
        ">>>>>>> REPLACE\n\nThe SEARCH section must exactly match an existing block of lines.\n"
    )
    assert classes(report, USER) == [C.LOG]
