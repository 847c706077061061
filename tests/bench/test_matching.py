"""The probe matcher: verbatim, or every content word of a paraphrased answer in one unit;
identifiers only verbatim; never crashes on any text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.replay.matching import content_words, fold, identifier_like, loose, verbatim


def test_verbatim_ignores_whitespace_runs_only():
    assert verbatim(["7 May 2023"], "went on 7   May\n2023.")
    assert not verbatim(["7 May 2023"], "went on 7 may 2023")  # case matters verbatim


def test_paraphrased_answers_match_by_content_words():
    assert loose(["4 years"], ["We have been friends for four years now."])
    assert loose(["Adoption agencies"], ["She researched a few adoption agency websites."])
    assert loose(["7 May 2023"], ["[Session 3, 7 may, 2023]"])
    assert loose(["pottery, camping"], ["camped in June, then a pottery class"])


def test_every_content_word_must_be_in_the_same_unit():
    units = ["she likes pottery", "she went camping"]
    assert not loose(["pottery, camping"], units)
    assert loose(["pottery, camping"], [" ".join(units)])
    assert not loose(["June 2023"], ["in July 2023"])  # month names are content words


def test_any_one_answer_counts():
    assert loose(["Sweden", "Stockholm"], ["moved from Stockholm"])


def test_function_words_alone_only_match_verbatim():
    assert content_words("the one who") == frozenset({"1"})
    assert not loose(["it was"], ["was it"])
    assert loose(["it was"], ["so it was"])


def test_identifiers_match_verbatim_only():
    for answer in ["ledgerly/api.py", "Python 3.9", "KeyError: 'currency'", "test_x", "sku88"]:
        assert identifier_like(answer), answer
    # its words are all in the unit, but the identifier is not
    assert not loose(["Python 3.9"], ["platform linux -- Python 3.11.9"])
    assert not loose(["KeyError: 'currency'"], ["a KeyError, then the currency column"])
    for answer in ["The week before 9 June 2023", "self-care is important", "Dr. Seuss"]:
        assert not identifier_like(answer), answer


def test_a_hyphenated_compound_is_one_word():
    assert not loose(["py-moneyed"], ["ledgerly/amounts.py: from moneyed import Money"])
    assert loose(["py-moneyed"], ["we use Py-Moneyed now"])
    assert loose(["self-care is important"], ["she said self-care was so important"])
    assert not loose(["self-care"], ["care for your self"])


def test_folding():
    assert {fold(w) for w in ("swimming", "swim", "swims")} == {"swim"}
    assert {fold(w) for w in ("hiking", "hike", "hiked", "hikes")} == {"hik"}
    assert fold("agencies") == fold("agency") and fold("18th") == "18" and fold("Four") == "4"
    assert fold("classes") == fold("class") and fold("status") != fold("statu")


@given(st.text(max_size=200), st.lists(st.text(max_size=300), max_size=4))
def test_any_text_gives_an_answer_and_verbatim_implies_loose(answer, units):
    result = loose([answer], units)
    assert isinstance(result, bool)
    if answer.strip() and verbatim([answer], "\n".join(units)):
        assert result
