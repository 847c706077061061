"""Does a probe's answer occur in a text? Strictly (verbatim) or by its content words.

Verbatim is right for identifiers (a path, a test id, an exception line), which a continuity
mechanism must keep exactly, and wrong for conversational benchmarks such as LoCoMo, whose
answers are paraphrases ("4 years" for "four years"). The loose matcher counts an answer as
present when every *content word* of it occurs within one message (or one recalled hit):
lowercased, punctuation and function words removed, number words up to twenty folded to digits,
simple plural/-ing/-ed endings folded. It knows nothing about modes, so it keeps the comparison
fair; the strict figure is reported beside it. Answers that look like identifiers are matched
verbatim only, and a hyphenated compound is one word. Function words are a short hand-written
list: general stopword lists (scikit-learn's, NLTK's) drop words that are answers here ("may"
the month, "five", "first", "no").

Examples and the reasons in full: docs/decisions/056-replay-harness.md.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

STOPWORDS = frozenset("""
    a an the and or but nor so yet if then than that this these those there here
    of in on at to for from by with without within into onto over under about above below
    across after before during since until upon via per as around through between among
    is are was were be been being am do does did doing done have has had having
    will would shall should can could might must ought
    i me my mine myself we us our ours ourselves you your yours yourself yourselves
    he him his himself she her hers herself it its itself they them their theirs themselves
    who whom whose which what when where why how
    all any both each few more most other some such only own same too very just also
    not s t d ll m re ve o y
    """.split())
NUMBER_WORDS = {
    w: str(n)
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
        " fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
WORD = re.compile(r"[^\W_]+(?:-[^\W_]+)*")  # a hyphenated compound is one word
ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
IDENTIFIER = re.compile(r"[/\\_:()\[\]<>{}=@#`|]|\w\.\w|[a-z][A-Z]|[A-Za-z]\d")
DOUBLED = re.compile(r"([b-df-hjkmnpqrtvwxy])\1$")  # runn -> run, swimm -> swim; not ll/ss/zz


def fold(word: str) -> str:
    """One word, lowercased, to the form both sides are compared in."""
    w = word.lower()
    if w in NUMBER_WORDS:
        return NUMBER_WORDS[w]
    m = ORDINAL.match(w)
    if m:
        return m.group(1)
    if w.isdigit() or len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "xes", "ches", "shes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    else:
        for suffix, min_len in (("ing", 6), ("ed", 5)):
            if w.endswith(suffix) and len(w) >= min_len:
                w = w[: -len(suffix)]
                if DOUBLED.search(w):
                    w = w[:-1]
                break
    if len(w) > 3 and w.endswith("e") and not w.endswith("ee"):
        w = w[:-1]  # hike/hiking/hiked, like/liked all fold to one form
    return w


def content_words(text: str) -> frozenset[str]:
    """The folded content words of ``text`` (function words and punctuation removed)."""
    return frozenset(fold(w) for w in WORD.findall(text.lower()) if w not in STOPWORDS)


def identifier_like(answer: str) -> bool:
    """Matched verbatim only (see the module docstring)."""
    return bool(IDENTIFIER.search(answer))


@lru_cache(maxsize=4096)
def _answer_words(answer: str) -> frozenset[str]:
    return frozenset() if identifier_like(answer) else content_words(answer)


def verbatim(answers: Iterable[str], text: str) -> bool:
    """An answer occurs in ``text`` exactly, whitespace runs counting as one space."""
    flat = " ".join(text.split())
    return any(" ".join(a.split()) in flat for a in answers)


def loose(answers: Iterable[str], units: Iterable[str]) -> bool:
    """Verbatim anywhere in ``units``, or every content word of one answer in one unit (a
    message of the prompt, a recalled hit). An answer made only of function words, or one that
    looks like an identifier, matches verbatim only."""
    units = list(units)
    answers = list(answers)
    if verbatim(answers, "\n".join(units)):
        return True
    wanted = [w for w in (_answer_words(a) for a in answers) if w]
    if not wanted:
        return False
    for unit in units:
        words = content_words(unit)
        if any(w <= words for w in wanted):
            return True
    return False
