"""The recall-by-meaning probes (bench/probes.py): every probe still names its message in the
shared data, and the report counts what it is given."""

from __future__ import annotations

from collections import Counter

import pytest

from bench import probes as bench_probes
from bench.probes import DATA, Outcome, Probe, digest, load_probes, replays_of, report, stored_text


def test_the_probe_set_is_large_varied_and_well_formed():
    ps = load_probes()
    assert len(ps) >= 80
    assert len({(p.source, p.key) for p in ps}) == len(ps)
    assert set(Counter(p.kind for p in ps)) == {"tool", "decision", "request", "reply"}
    assert len(Counter(p.lang for p in ps)) >= 3
    for p in ps:
        assert p.paraphrase.strip() and p.easy.strip() and p.paraphrase != p.easy


@pytest.mark.skipif(not DATA.exists(), reason="the shared data is absent")
def test_every_probe_names_its_message_by_position_and_hash():
    by_source: dict[str, list[Probe]] = {}
    for p in load_probes():
        by_source.setdefault(p.source, []).append(p)
    for source, group in by_source.items():
        if not (DATA / source).exists():
            continue
        replays = replays_of(source)
        for p in group:
            got = stored_text(replays[p.session].events[p.event])
            assert got is not None and digest(got[0]) == p.sha, (source, p.key)


def test_the_report_counts_hits_at_each_depth():
    p = Probe("a/b.md", 0, 1, "00000000", "tool", "en", "what failed", "the E0432 error")
    outcomes = [
        Outcome(p, "paraphrase", {"fts": None, "hybrid": 3, "recall": 1}, {"fts": 1.0}),
        Outcome(p, "easy", {"fts": 1, "hybrid": 1, "recall": 7}, {"fts": 2.0}),
    ]
    for o in outcomes:
        o.ms = {"fts": 1.0, "hybrid": 2.0, "recall": 3.0}
    text = report(outcomes)
    assert (
        "| paraphrase, top-1 / 5 / 10 | 0 / 0 / 0 of 1 | 0 / 1 / 1 of 1 | 1 / 1 / 1 of 1 |" in text
    )
    assert "| easy, top-1 / 5 / 10 | 1 / 1 / 1 of 1 | 1 / 1 / 1 of 1 | 0 / 0 / 1 of 1 |" in text
    assert "too late" not in text  # no ``turn`` row measured
    assert bench_probes.MODES == ("fts", "turn", "hybrid", "recall")
    for o, late in zip(outcomes, (True, False)):
        o.ranks["turn"], o.ms["turn"], o.late = 2, 1.5, late
    assert "the vector came too late for 1 of 2 queries" in report(outcomes)


def test_a_target_listed_under_a_hit_counts_at_that_hits_rank():
    """``/recall`` lists an exchange's other parts under its hit: the target is on the screen
    there, so it counts at that rank; as a hit's own entry it is not found."""
    from types import SimpleNamespace as NS

    texts = {"a": "alpha", "b": "bravo", "t": "the target", "c": "the target"}

    class Store:
        def get_entries(self, ids):
            return {i: NS(original=texts[i]) for i in ids if i in texts}

    def hit(eid, exchange=(), duplicates=()):
        return NS(entry_id=eid, exchange=exchange, duplicates=duplicates)

    sha = digest("the target")
    ranks = bench_probes._ranks
    assert ranks(Store(), [hit("a"), hit("b", exchange=("t",))], "t", sha) == (2, None)
    assert ranks(Store(), [hit("a"), hit("t")], "t", sha) == (2, 2)
    assert ranks(Store(), [hit("c"), hit("a")], "t", sha) == (1, 1)  # an exact copy
    assert ranks(Store(), [hit("a", duplicates=("t",))], "t", sha) == (1, 1)
    assert ranks(Store(), [hit("a"), hit("b")], "t", sha) == (None, None)
