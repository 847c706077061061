"""One compressor per content class. ``COMPRESSORS`` is the only registry; add a class here."""

from __future__ import annotations

from ..types import ContentClass
from .base import Compressor, run_compressor
from .code import compress_code
from .edit import compress_edit
from .error import compress_error
from .log import compress_log
from .prose import compress_prose
from .structured import compress_structured

COMPRESSORS: dict[ContentClass, Compressor] = {
    ContentClass.LOG: compress_log,
    ContentClass.CODE: compress_code,
    ContentClass.STRUCTURED: compress_structured,
    ContentClass.PROSE: compress_prose,
    ContentClass.ERROR: compress_error,
    ContentClass.EDIT: compress_edit,
}

__all__ = ["COMPRESSORS", "Compressor", "run_compressor"]
