"""Classify chat context and compress it without an LLM call.

Every message or command output is split into segments of one class (log, code, structured,
prose, error, prompt, edit) and each segment is compressed by an algorithm made for its class,
so a 2,000-line test run costs what its failures cost. Nothing in Aider calls this package yet:
it is a library addition, used by the patches that follow it.
"""

from .pipeline import compress
from .tokens import count_tokens
from .types import CompressionResult, CompressOptions, ContentClass, Segment, Source

__all__ = [
    "CompressOptions",
    "CompressionResult",
    "ContentClass",
    "Segment",
    "Source",
    "compress",
    "count_tokens",
]
