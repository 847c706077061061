"""Cross-segment de-duplication: repeats of one failure collapse, distinct failures stay whole.

Segments and their compressed texts are built by hand here; the end-to-end behaviour on real
split test logs is tested in ``tests/test_pipeline.py``.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.compress.dedupe import dedupe_failures
from aider_gardener.types import Compressed, ContentClass, Segment
from tests.critical_facts import missing_facts


def section(
    name: str,
    addr: str = "0x7fd754039250",
    param: str = "['NB']",
    message: str = "Exception: Output path must exist",
    where: str = "streamline/modeling/modelrunner.py:90",
    statement: str = "runner = ModelExperimentRunner(output_path, algorithms)",
    context: str = "optuna.logging.set_verbosity(optuna.logging.WARNING)",
) -> str:
    bar = "_" * 18
    return (
        f"{bar} {name} {bar}\n"
        "\n"
        f"algorithms = {param}, run_parallel = False\n"
        "\n"
        "    def test_valid_model_runner(algorithms, run_parallel):\n"
        f"        {context}\n"
        f">       {statement}\n"
        "\n"
        "streamline/tests/test_model_runner.py:67: \n"
        "_ _ _ _ _\n"
        "\n"
        f"self = <streamline.modeling.modelrunner.ModelExperimentRunner object at {addr}>\n"
        "\n"
        "        if not os.path.exists(self.output_path):\n"
        '>           raise Exception("Output path must exist")\n'
        f"E           {message}\n"
        "\n"
        f"{where}: Exception\n"
    )


def build(*parts: tuple[ContentClass, str]) -> tuple[list[Segment], list[Compressed | str]]:
    segs, outs, pos = [], [], 0
    for cls, text in parts:
        segs.append(Segment(cls, pos, pos + len(text), text))
        outs.append(Compressed(text, {}) if cls is not ContentClass.LOG else text)
        pos += len(text)
    return segs, outs


def texts(outs) -> list[str]:
    return [o.text if isinstance(o, Compressed) else o for o in outs]


def joined(outs) -> str:
    return "\n".join(t for t in texts(outs) if t)


ERR = ContentClass.ERROR
LOG = ContentClass.LOG


def test_identical_parametrized_failures_collapse_to_one_line_naming_every_id():
    ids = [f"test_valid_model_runner[algorithms{k}-True]" for k in range(5)]
    params = ["['NB']", "['LR']", "['DT']", "['RF']", "['GB']"]
    addrs = ["0x7fd754039250", "0x7fd72977e040", "0x7fd754039bb0", "0x7fd729777790", "0x1"]
    segs, outs = build(
        (LOG, "collected 70 items\n"),
        *[(ERR, section(i, addr=a, param=p)) for i, a, p in zip(ids, addrs, params)],
        (LOG, "=== short test summary info ===\n"),
    )
    out = texts(dedupe_failures(segs, outs))
    assert out[1] == outs[1].text  # the first occurrence is shown whole
    assert out[2] == f"[×4 failures identical to the one above: {', '.join(ids[1:])}]"
    assert out[3:6] == ["", "", ""]  # folded into the group line
    assert out[0] == outs[0] and out[6] == outs[6]  # log segments are not touched


def test_a_single_non_adjacent_repeat_names_the_first_occurrence():
    segs, outs = build(
        (ERR, section("test_a")),
        (ERR, section("test_b", message="ValueError: something else entirely")),
        (ERR, section("test_c", addr="0xdeadbeef")),
    )
    out = texts(dedupe_failures(segs, outs))
    assert out[:2] == texts(outs)[:2]
    assert out[2] == "[same failure as test_a above: test_c]"


def test_different_messages_are_distinct_errors_and_stay_whole():
    """Numbers in an exception line are facts: ``expected 3`` and ``expected 4`` differ."""
    segs, outs = build(
        (ERR, section("test_a", message="ValueError: expected 3 rows")),
        (ERR, section("test_b", message="ValueError: expected 4 rows")),
    )
    assert texts(dedupe_failures(segs, outs)) == texts(outs)


def test_addresses_mask_in_logs_but_not_in_exception_messages():
    def with_log(name: str, addr: str, message: str = "Exception: Output path must exist") -> str:
        body = section(name, message=message)
        return body + f"WARNING  root:pool.py:12 worker <Thread object at {addr}> stopped\n"

    segs, outs = build((ERR, with_log("test_a", "0x7f01")), (ERR, with_log("test_b", "0x7f02")))
    assert texts(dedupe_failures(segs, outs))[1] == "[same failure as above: test_b]"
    segs, outs = build(
        (ERR, section("test_a", message="RuntimeError: lock <Lock object at 0x7f01> held")),
        (ERR, section("test_b", message="RuntimeError: lock <Lock object at 0x7f02> held")),
    )
    assert texts(dedupe_failures(segs, outs)) == texts(outs)  # the message line is a fact


def test_same_exception_from_another_place_keeps_its_statement_and_locations():
    first = section("test_a")
    other = section(
        "test_b",
        statement="runner = ModelExperimentRunner(output_path, ['XGB'], save_plots=True)",
        context="prepare_dataset(seed=4)",
        where="streamline/modeling/modelrunner.py:91",
    )
    segs, outs = build((ERR, first), (ERR, other))
    out = texts(dedupe_failures(segs, outs))
    assert out[0] == first
    skeleton = out[1].splitlines()
    assert skeleton[0].strip("_ ") == "test_b"
    assert (
        ">       runner = ModelExperimentRunner(output_path, ['XGB'], save_plots=True)" in skeleton
    )
    assert "streamline/tests/test_model_runner.py:67: " in skeleton
    assert "streamline/modeling/modelrunner.py:91: Exception" in skeleton
    assert "[same exception as test_a above]" in skeleton
    assert not any(x.startswith("E ") for x in skeleton)  # the repeated message is the pointer
    assert "prepare_dataset(seed=4)" not in out[1]  # context the first occurrence already gives
    assert not missing_facts(first + other, "\n".join(out))


def test_java_traces_without_a_test_header_point_at_the_first_with_their_message():
    trace = (
        "io.cucumber.java.PendingException: TODO: implement me\n"
        "\tat dk.dtu.steps.TokenSteps.create_token(TokenSteps.java:61)\n"
        "\tat ?.the test creates a token(file:///C:/p/src/test/resources/Token.feature:15)\n"
    )
    segs, outs = build(
        (ERR, "      " + trace),
        (LOG, "[ERROR] Token.Token service issues a token -- Time elapsed: 0.102 s <<< ERROR!\n"),
        (ERR, trace),
    )
    out = texts(dedupe_failures(segs, outs))
    assert out[0] == "      " + trace
    expected = "[same error as above: io.cucumber.java.PendingException: TODO: implement me]"
    assert out[2] == expected


def test_repeats_of_a_failure_that_is_not_first_in_a_run_group_separately():
    segs, outs = build(
        (ERR, section("test_a")),
        (ERR, section("test_b", message="KeyError: 'x'")),
        (ERR, section("test_c", message="KeyError: 'x'", addr="0x2")),
        (ERR, section("test_d", addr="0x3")),
        (ERR, section("test_e", addr="0x4")),
    )
    out = texts(dedupe_failures(segs, outs))
    assert out[2] == "[same failure as above: test_c]"
    assert out[3] == "[×2 failures identical to test_a above: test_d, test_e]"
    assert out[4] == ""


def test_non_error_segments_and_plain_strings_are_left_alone():
    text = section("test_a")
    segs = [Segment(LOG, 0, len(text), text), Segment(LOG, len(text), 2 * len(text), text)]
    outs = [Compressed(text, {}), Compressed(text, {})]
    assert texts(dedupe_failures(segs, outs)) == [text, text]
    segs = [Segment(ERR, 0, len(text), text), Segment(ERR, len(text), 2 * len(text), text)]
    assert dedupe_failures(segs, [text, text]) == [text, text]  # verbatim passes stay verbatim


def test_pointer_counts_say_which_segment_was_repeated():
    segs, outs = build((ERR, section("test_a")), (ERR, section("test_b", addr="0x9")))
    out = dedupe_failures(segs, outs)
    assert out[1].counts["duplicate_of_segment"] == 0


NAMES = [f"test_{c}" for c in "abcdefgh"]
MESSAGES = ["Exception: Output path must exist", "KeyError: 'k'", "ValueError: expected 3"]
WHERE = ["streamline/modeling/modelrunner.py:90", "streamline/modeling/modelrunner.py:97"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(NAMES),
            st.sampled_from(MESSAGES),
            st.sampled_from(WHERE),
            st.sampled_from(["0x1", "0xabc", "0x7fd72977e040"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_property_facts_survive_and_nothing_grows(cases):
    parts = []
    for name, message, where, addr, log_between in cases:
        parts.append((ERR, section(name, addr=addr, message=message, where=where)))
        if log_between:
            parts.append((LOG, "WARNING  root:test_model_runner.py:63 Running Modelling Phase\n"))
    segs, outs = build(*parts)
    out = dedupe_failures(segs, outs)
    original = "".join(texts(outs))
    result = joined(out)
    assert not missing_facts(original, result)
    for name, *_ in cases:
        assert name in result  # every failing test is still named
    for before, after in zip(texts(outs), texts(out)):
        assert len(after) <= len(before)


def test_benchmark_dedupe_two_hundred_sections(benchmark):
    parts = [(ERR, section(f"test_{k}", addr=hex(k), param=f"[{k}]")) for k in range(200)]
    segs, outs = build(*parts)
    out = benchmark(dedupe_failures, segs, outs)
    assert sum(bool(t) for t in texts(out)) == 2  # the first, and one line for the others
