"""Aider's own fixed-format messages."""

from __future__ import annotations

from aider_gardener.classify.aider_text import aider_message_class
from aider_gardener.types import ContentClass as C


def test_failed_match_report_and_repo_map():
    assert aider_message_class("# 2 SEARCH/REPLACE blocks failed to match!\n\n...") is C.LOG
    repo = "Here are summaries of some files present in my git repository.\n"
    assert aider_message_class(repo + "a.py:\n⋮...\n│def f():\n") is C.CODE
    assert aider_message_class(repo + "a.py\n\nb.py\n") is C.LOG
    assert aider_message_class("Please fix the failing test.") is None
