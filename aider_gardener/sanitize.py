"""Turn whatever a command printed into text the pipeline can work on, and say what was odd.

Nothing is lost here: the caller keeps the original bytes (the store saves them); this only
decides what text the classifier and compressors see and which one-line notes the summary carries.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field

_SNIFF = 8192


@dataclass
class Decoded:
    text: str
    binary: bool = False
    notes: list[str] = field(default_factory=list)


def looks_binary(sample: bytes) -> bool:
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    control = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 27))
    return control / len(sample) > 0.10


def decode(data: bytes | str) -> Decoded:
    if isinstance(data, str):
        return _from_str(data)
    decoded = _from_bytes(data)
    if not decoded.binary and _text_looks_binary(decoded.text):
        # The text must be judged as a str input holding it would be: a summary that kept it is
        # compressed again as a str (UTF-32 read as UTF-16 is NUL-riddled "text").
        return Decoded(f"[binary output: {len(data):,} bytes, not shown]", binary=True)
    return decoded


def _from_bytes(data: bytes) -> Decoded:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        # PowerShell's ">" writes UTF-16; decoding it as bytes would look binary.
        return Decoded(data.decode("utf-16", errors="replace"), notes=["decoded from UTF-16"])
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    sample = data[:_SNIFF]
    if looks_binary(sample) and not _utf16_without_bom(sample):
        return Decoded(f"[binary output: {len(data):,} bytes, not shown]", binary=True)
    if _utf16_without_bom(sample):
        return Decoded(data.decode("utf-16-le", errors="replace"), notes=["decoded from UTF-16"])
    try:
        return Decoded(data.decode("utf-8"))
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        bad = text.count("\ufffd")
        return Decoded(text, notes=[f"invalid UTF-8: {bad:,} bytes shown as U+FFFD"])


def _text_looks_binary(text: str) -> bool:
    sample = text[:_SNIFF]
    return "\x00" in sample and looks_binary(sample.encode("utf-8", "replace"))


def _from_str(text: str) -> Decoded:
    if _text_looks_binary(text):
        return Decoded(f"[binary output: {len(text):,} characters, not shown]", binary=True)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from surrogateescape decoding upstream
        fixed = text.encode("utf-8", "replace").decode("utf-8")
        return Decoded(fixed, notes=["invalid UTF-8: undecodable bytes shown as ?"])
    return Decoded(text)


def _utf16_without_bom(sample: bytes) -> bool:
    """ASCII text in UTF-16LE has a NUL at every odd offset."""
    if len(sample) < 16:
        return False
    odd = sample[1::2]
    return odd.count(0) / len(odd) > 0.9 and sample[0::2].count(0) / len(odd) < 0.1
