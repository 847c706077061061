"""Critical facts survive compression, end to end through the pipeline, on every real output."""

from __future__ import annotations

import pytest

from aider_gardener.pipeline import compress
from aider_gardener.types import Source
from tests.conftest import tool_output_files
from tests.critical_facts import missing_facts

FILES = tool_output_files()


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_critical_facts_survive(path):
    original = path.read_text(encoding="utf-8", errors="replace")
    result = compress(original, source=Source(role="tool"))
    missing = missing_facts(original, result.summary)
    assert not missing, {k: sorted(v)[:10] for k, v in missing.items()}


def test_the_fact_extractor_finds_facts_in_real_outputs(tool_outputs_dir):
    """Guards the check itself: an extractor finding nothing would make the test above vacuous."""
    from tests.critical_facts import error_codes, exception_lines, failing_tests

    pytest_log = (tool_outputs_dir / "pytest_failures_typeerror__X_Ray_LLM.log").read_text()
    assert len(failing_tests(pytest_log)) >= 8
    assert any(e.startswith("TypeError") for e in exception_lines(pytest_log))
    tsc = (tool_outputs_dir / "tsc_errors__wealth-aggregator.txt").read_text()
    assert {"TS2339", "TS2551"} <= error_codes(tsc)
    assert missing_facts(tsc, "nothing kept")["error_codes"]
