"""Aider's own fixed-format messages, recognised by their fixed first line.

Aider writes some machine text into the conversation — the report of SEARCH/REPLACE blocks that
failed to match (sent back to the model as a user message), the repository map — whose headings
and sentences make them look like prose, though they are tool output (or code skeletons). The
wording comes from ``aider/coders/editblock_coder.py`` and ``aider/coders/base_prompts.py``.
"""

from __future__ import annotations

import re

from ..types import ContentClass

_FAILED_MATCH = re.compile(r"\A\s*# \d+ SEARCH/REPLACE blocks? failed to match!")
_REPO_MAP = re.compile(r"\A\s*Here are summaries of some files present in my git repo")


def aider_message_class(text: str) -> ContentClass | None:
    if _FAILED_MATCH.match(text):
        return ContentClass.LOG
    if _REPO_MAP.match(text):
        return ContentClass.CODE if ("│" in text or "⋮" in text) else ContentClass.LOG
    return None
