from types import SimpleNamespace

from aider_gardener.store import exchanges


def roles(**kw):
    return {eid: SimpleNamespace(role=role) for eid, role in kw.items()}


def test_a_request_its_reply_and_the_output_of_what_it_ran_are_one_exchange():
    entries = roles(p="user", r="assistant", t="tool")
    got = exchanges.exchanges(["t", "p", "r"], entries, {"r": "p", "t": "r"})
    assert got == {"p": "t", "r": "t", "t": "t"}  # each part -> the best-ranked one


def test_an_output_a_reply_answers_and_a_reply_without_its_prompt():
    entries = roles(t="tool", r="assistant")
    assert exchanges.exchanges(["r", "t"], entries, {"r": "t"}) == {"r": "r", "t": "r"}


def test_what_is_not_an_exchange_is_left_alone():
    entries = roles(p="user", r="assistant", r2="assistant", q="user")
    before = {"r2": "r", "r": "p", "q": "r2"}
    # two replies in a row; a prompt after a reply; a part that did not rank
    assert exchanges.exchanges(["r2", "q", "r"], entries, before) == {}


def test_an_exchange_has_at_most_three_parts_joined_best_link_first():
    entries = roles(p="user", r="assistant", t="tool", r2="assistant", t2="tool")
    before = {"r": "p", "t": "r", "r2": "t", "t2": "r2"}
    got = exchanges.exchanges(["r2", "t", "t2", "p", "r"], entries, before)
    assert got["r2"] == got["t"] == got["t2"] == "r2"  # r2-t (ranks 0, 1), then r2-t2
    assert got["p"] == got["r"] == "p"


def test_the_lower_ranked_parts_fold_under_the_best_and_free_their_slots():
    kept, rest = exchanges.fold(["a", "x", "b", "y", "c"], {"a": "a", "b": "a", "c": "a"})
    assert kept == ["a", "x", "y"]
    assert rest == {"a": ["b", "c"]}
    kept, rest = exchanges.fold(["b", "x"], {"a": "a", "b": "a"})  # its best part is gone
    assert kept == ["b", "x"] and rest == {}
