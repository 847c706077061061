"""The small set of types every stage of the pipeline shares.

Data flows one way: ingest -> classify (``Segment``) -> compress (``Compressed`` per segment,
``CompressionResult`` per input) -> store -> evict/recall -> prompt. Keeping these types in one
module lets each stage be written and tested without importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping


class ContentClass(str, Enum):
    """What a piece of context is; each class has its own compressor and eviction priority."""

    LOG = "log"
    CODE = "code"
    STRUCTURED = "structured"
    PROSE = "prose"
    ERROR = "error"
    PROMPT = "prompt"
    EDIT = "edit"

    def __str__(self) -> str:  # so f-strings and tables print "log", not "ContentClass.LOG"
        return self.value


@dataclass(frozen=True)
class Source:
    """Where a text came from. Known provenance beats content cues when classifying.

    role: "user", "assistant" or "tool" (Aider's io.tool_output / command output).
    command: the shell command that produced the text (``/run make`` -> ``make``, ``/test``).
    path: a file the text is the content of (its extension names the language or format).
    """

    role: str | None = None
    command: str | None = None
    path: str | None = None


@dataclass(frozen=True)
class CompressOptions:
    """Caller knowledge that compressors cannot infer from the text alone.

    hot: identifiers or exact lines never to collapse (recently edited or mentioned code).
    keep_keys: structured-data keys whose values must survive (e.g. ones the user asked about).
    project_root: frames and paths under it are "the project's own" and are kept by the error
        compressor; library frames are collapsed.
    entry_id: the id the original is stored under, for compressors that cite it inline
        (``edited path: +A -R lines (id=...)``); set by the pipeline.
    test_runner: set by the pipeline when it split one test runner's output into segments: the
        runner detected once on the whole text. A segment compressor then parses its slice with
        that runner instead of guessing from a fragment, and leaves the run's counts and failing
        ids to the single summary line the pipeline appends (a head segment would otherwise say
        "no counts found" while the counts sit in the last segment).
    """

    model: str = "gpt-4o"
    source: Source = field(default_factory=Source)
    hot: frozenset[str] = frozenset()
    keep_keys: frozenset[str] = frozenset()
    project_root: str | None = None
    entry_id: str | None = None
    test_runner: str | None = None


@dataclass(frozen=True)
class Segment:
    """A contiguous slice ``text[start:end]`` of one input, with its class.

    meta carries what the classifier learned and the compressor can use, e.g. ``lang`` of a code
    fence, ``path`` of an edit block, ``runner`` of a test log.
    """

    cls: ContentClass
    start: int
    end: int
    text: str
    meta: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Compressed:
    """One compressor's output for one segment.

    counts are class-specific facts the compressor observed (lines, errors, warnings, failed tests,
    collapsed frames...). ``fallback`` is True when the class compressor failed and head/tail
    truncation was used instead; the text then says so in its summary line.
    """

    text: str
    counts: dict[str, int] = field(default_factory=dict)
    fallback: bool = False


@dataclass
class SegmentResult:
    segment: Segment
    compressed: Compressed
    tokens_original: int
    tokens_summary: int


@dataclass
class CompressionResult:
    """Everything known about one compressed input; what the store persists and the CLI prints.

    ``summary`` is the text that replaces the original in context: the compressed segments
    followed by the recall handle line (the handle is omitted when nothing was compressed, because
    then nothing needs recalling).
    """

    entry_id: str
    cls: ContentClass
    original: str
    summary: str
    tokens_original: int
    tokens_summary: int
    segments: list[SegmentResult]
    notes: list[str] = field(default_factory=list)
    # The exact input bytes when ``original`` cannot reproduce them (binary output, invalid UTF-8):
    # the store keeps these so nothing is lost.
    raw: bytes | None = None

    @property
    def ratio(self) -> float:
        return self.tokens_summary / self.tokens_original if self.tokens_original else 1.0

    @property
    def handle(self) -> str:
        return handle_line(self.entry_id)


HANDLE_PREFIX = "[full output stored: id="


def handle_line(entry_id: str) -> str:
    return f"{HANDLE_PREFIX}{entry_id}]"
