"""Which language a project's sessions are written in, so a non-English one is embedded by the
multilingual model without anyone asking.

MiniLM was trained on English: on French or Turkish paraphrases it finds almost nothing, and the
store never noticed that a session was not in English. The user's own prompts say which
language they think in (replies follow them, tool output is English either way), so the store
detects the language of each prompt (py3langid: offline, its model inside the package, ~0.2 ms
a prompt after a 0.3 s load) and keeps a tally; Aider's input history gives the same evidence
before the first prompt. When most confident detections are one non-English language, the
store's ``language`` marker names it and ``model_choice`` picks multilingual-e5 for the store
(an explicit ``--gardener-embedder`` still wins). The switch takes effect when the store is next
opened (the model is process-wide); the session that crossed the line is told once.
Design: docs/decisions/095-recall-by-meaning.md.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any, Iterable

from . import markers

log = logging.getLogger(__name__)

MARKER = "language"
ENGLISH = "en"
MIN_LETTERS = 12  # shorter prompts ("ok", "/undo") say nothing about a language
CONFIDENCE = 0.9  # normalised probability below which a detection is not counted
MIN_EVIDENCE = 2  # confident detections before a store's language is decided
SHARE = 0.5  # more than this share of confident detections must be one language
HISTORY_PROMPTS = 50  # of the input history's last prompts read at start
_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
_IDEOGRAPH = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_MACHINE = re.compile(r"\s*<[\w-]+>")
_CODE = re.compile(r"`[^`]*`|\S+[/.]\S+|\S*[_=<>{}()\[\]]\S*")

_lock = threading.Lock()
_identifier: Any = None
_failed = False


def detect(text: str) -> str | None:
    """The ISO 639-1 code of ``text``'s language when it is confidently one, else None (short,
    code, or py3langid missing). Identifiers and paths are left out: they read as English."""
    if _MACHINE.match(text):
        return None  # a client's own message in the user's place (Claude Code's notifications)
    prose = _CODE.sub(" ", text[:2000])
    ideographs = len(_IDEOGRAPH.findall(prose))  # a character is a word: "继续阶段了" says a lot
    if len(_LETTER.findall(prose)) + 2 * ideographs < MIN_LETTERS:
        return None
    ident = _get()
    if ident is None:
        return None
    try:
        code, prob = ident.classify(prose)
    except Exception:  # noqa: BLE001 - a failed detection is no evidence
        return None
    return str(code) if float(prob) >= CONFIDENCE else None


def decide(tally: dict[str, int]) -> str | None:
    """The language a tally of confident detections decides, or None (not enough evidence)."""
    total = sum(tally.values())
    if total < MIN_EVIDENCE:
        return None
    code, n = max(tally.items(), key=lambda kv: (kv[1], kv[0]))
    return code if n > SHARE * total else None


def tally(texts: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for text in texts:
        code = detect(text)
        if code:
            out[code] = out.get(code, 0) + 1
    return out


def recorded(store_dir: Path | str) -> str | None:
    text = markers.read(store_dir, MARKER)
    return text if text and re.fullmatch(r"[a-z]{2,3}", text) else None


def record(store_dir: Path | str, code: str) -> None:
    markers.write(store_dir, MARKER, code)


def from_input_history(path: Path | str | None, store_dir: Path | str) -> str | None:
    """Decide the store's language from the last prompts of Aider's input history when the
    store has not decided one; returns the language recorded, or None."""
    if path is None or recorded(store_dir):
        return None
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")[-200_000:]
    except OSError:
        return None
    prompts = [ln[1:] for ln in text.splitlines() if ln.startswith("+") and "/" != ln[1:2]]
    code = decide(tally(prompts[-HISTORY_PROMPTS:]))
    if code is not None:
        record(store_dir, code)
    return code


def name(code: str) -> str:
    return _NAMES.get(code, code)


def _get() -> Any:
    """py3langid's identifier with normalised probabilities, loaded once; None when missing."""
    global _identifier, _failed
    if _identifier is not None or _failed:
        return _identifier
    with _lock:
        if _identifier is None and not _failed:
            try:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                _identifier = LanguageIdentifier.from_pickled_model(MODEL_FILE, norm_probs=True)
            except Exception as err:  # noqa: BLE001 - an optional dependency
                _failed = True
                log.info("gardener: language detection unavailable (%s)", err)
    return _identifier


_NAMES = {
    "en": "English",
    "es": "Spanish",
    "pt": "Portuguese",
    "fr": "French",
    "de": "German",
    "it": "Italian",
    "ru": "Russian",
    "tr": "Turkish",
    "zh": "Chinese",
    "ja": "Japanese",
    "ko": "Korean",
    "uk": "Ukrainian",
    "pl": "Polish",
    "nl": "Dutch",
    "cs": "Czech",
    "sv": "Swedish",
    "vi": "Vietnamese",
    "id": "Indonesian",
    "ar": "Arabic",
    "hi": "Hindi",
    "fa": "Persian",
}
