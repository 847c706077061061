"""``COMPRESSORS``: one compressor per content class, the only registry; add a class here.

It lives apart from the package's ``__init__`` so that importing one helper (``compress.base``,
``compress.testrun``) does not load every compressor and its ~100 regexes: the gardener's start
needs only those two, and each compressor module costs Aider's time to the first prompt.
"""

from __future__ import annotations

from ..types import ContentClass
from .base import Compressor
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
