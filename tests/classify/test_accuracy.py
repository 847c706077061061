"""Measured accuracy against the hand-made gold labels on the real shared data.

The labels (``bench/labels/*.tsv``) name units by file, line range and a short hash; the units are
cut from the shared data by the extractor in ``bench/classification.py``, which knows only the
chat-history format. Skips when the shared data is absent.
"""

from __future__ import annotations

import pytest

from bench import classification as bc

CLASSES = set(bc.CLASSES)


@pytest.fixture(scope="module")
def units(histories_dir, tool_outputs_dir):
    return bc.all_units()


@pytest.mark.parametrize("path", [bc.LABELS, bc.HOLDOUT_LABELS], ids=["main", "holdout"])
def test_label_files_are_well_formed(path):
    rows = bc.load_labels(path)
    assert len(rows) >= (400 if path == bc.LABELS else 90)
    for r in rows:
        assert r["label"] in CLASSES
        assert len(r["sha1_8"]) == 8 and int(r["sha1_8"], 16) >= 0
        assert int(r["start_line"]) <= int(r["end_line"])


def test_every_label_still_points_at_the_same_text(units):
    by_key = {u.key: u for u in units}
    for path in (bc.LABELS, bc.HOLDOUT_LABELS):
        for r in bc.load_labels(path):
            u = by_key.get((r["file"], int(r["start_line"]), int(r["end_line"])))
            assert u is not None, r
            assert u.sha1_8 == r["sha1_8"], r


def test_labelled_units_are_exactly_the_seeded_samples(units):
    def keys(path):
        return {(r["file"], int(r["start_line"]), int(r["end_line"])) for r in bc.load_labels(path)}

    assert keys(bc.LABELS) == {u.key for u in bc.sample(units)}
    assert keys(bc.HOLDOUT_LABELS) == {u.key for u in bc.holdout_sample(units)}


def test_sample_covers_every_tool_output_and_history(units):
    files = {u.file for u in bc.sample(units)}
    assert {u.file for u in units} <= files


@pytest.mark.parametrize("path", [bc.LABELS, bc.HOLDOUT_LABELS], ids=["main", "holdout"])
def test_accuracy_at_least_95_percent(path, units):
    res = bc.score(use_source=True, labels=path)
    assert not res["missing"] and not res["stale"]
    assert res["total"] == len(bc.load_labels(path))
    assert res["accuracy"] >= 0.95, bc.format_report(res)


def test_every_new_tool_output_kind_is_classified_as_labelled(units):
    """Issue 14: the 38 outputs of ``tool_outputs_more`` (gradle, terraform, vite, kubectl, YAML
    manifests, a bare ``git diff``…) are each classified as a person labelled them."""
    res = bc.score(use_source=True)
    new = [r for r in bc.load_labels(bc.LABELS) if r["file"].startswith("tool_outputs_more/")]
    if not new:
        pytest.skip("no tool_outputs_more labels")
    wrong = [e for e in res["errors"] if e["file"].startswith("tool_outputs_more/")]
    assert not wrong, wrong
