from aider_gardener.tokens import count_tokens, encoding_name


def test_encoding_choice():
    assert encoding_name("gpt-4o") == "o200k_base"
    assert encoding_name("openai/gpt-4o-mini") == "o200k_base"
    assert encoding_name("gpt-4") == "cl100k_base"
    assert encoding_name("anthropic/claude-sonnet-4-20250514") == "cl100k_base"
    assert encoding_name(None) == "cl100k_base"


def test_counts_match_tiktoken():
    import tiktoken

    text = "def hello(name):\n    return f'hi {name}'\n" * 10
    assert count_tokens(text, "gpt-4") == len(tiktoken.get_encoding("cl100k_base").encode(text))
    assert count_tokens("", "gpt-4o") == 0


def test_large_text_chunked_count_is_close_to_exact():
    import tiktoken

    text = "".join(f"line {i}: value={i * 31 % 977} status=ok\n" for i in range(40_000))
    exact = len(tiktoken.get_encoding("o200k_base").encode_ordinary(text))
    assert abs(count_tokens(text, "gpt-4o") - exact) <= exact * 0.001


def test_cache_returns_same_value():
    text = "cache me " * 100
    assert count_tokens(text) == count_tokens(text)


def test_long_runs_are_counted_fast_enough_to_finish_and_close_to_exact():
    """BPE is quadratic on one long word; the splitter keeps it linear (speed is benchmarked, the
    count must stay close to tiktoken's exact answer on a size where exact is affordable)."""
    import tiktoken

    text = "a" * 5000 + " tail " + "\ufffd" * 3000
    exact = len(tiktoken.get_encoding("o200k_base").encode_ordinary(text))
    assert abs(count_tokens(text, "gpt-4o") - exact) <= exact * 0.02


def test_huge_text_is_estimated_within_one_percent():
    import tiktoken

    from aider_gardener import tokens

    line = "2026-01-01 12:00:00 INFO worker {} processed item {} in {}ms\n"
    text = "".join(line.format(i, i * 7, i % 97) for i in range(300_000))
    exact = len(tiktoken.get_encoding("o200k_base").encode_ordinary(text))
    old = tokens._SAMPLE_ABOVE
    tokens._SAMPLE_ABOVE = 1_000_000
    try:
        estimate = tokens._count(text, tokens._encoding("o200k_base"))
    finally:
        tokens._SAMPLE_ABOVE = old
    assert abs(estimate - exact) <= exact * 0.01


def _adversarial_lines(seed: int) -> str:
    """Lines starting and ending with every kind of character the pre-tokenizer treats apart:
    newline runs, CRLF, spaces, tabs, '/', punctuation, digits, contractions, non-ASCII."""
    import random

    rng = random.Random(seed)
    starts = [
        "\n",
        " ",
        "\t",
        "/",
        "\r\n",
        ".",
        "'s",
        "1",
        "a",
        "A",
        "-",
        "#",
        '"',
        "é",
        "中",
        "  ",
    ]
    ends = ["\n", "\r\n", "\n\n", " \n", ".\n", "/\n"]
    body = "ab1.,/ \t'\"-_"
    return "".join(
        rng.choice(starts)
        + "".join(rng.choice(body) for _ in range(rng.randint(0, 30)))
        + rng.choice(ends)
        for _ in range(rng.randint(400, 900))
    )


def test_counting_by_runs_of_lines_is_exact():
    import tiktoken

    from aider_gardener import tokens

    for name in ("cl100k_base", "o200k_base"):
        enc = tiktoken.get_encoding(name)
        for seed in range(20):
            text = _adversarial_lines(seed)
            assert len(text) > tokens._RUNS_ABOVE
            assert tokens._count_runs(text, enc, name) == len(enc.encode_ordinary(text))


def test_a_wrapped_output_reuses_the_counts_of_its_lines():
    """Aider's message around a command's output, then the output alone: exact both times, and
    the second count encodes only the runs the header changed."""
    import tiktoken

    from aider_gardener import tokens

    output = "".join(
        f"2024-05-0{i % 9 + 1} worker-{i % 7} took {i * 37 % 1000} ms\n" for i in range(800)
    )
    message = f"I ran this command:\n\npytest -q\n\nAnd got this output:\n\n{output}\n"
    enc = tiktoken.get_encoding("o200k_base")
    assert count_tokens(message, "gpt-4o") == len(enc.encode_ordinary(message))
    calls = []
    real = tokens._encoding("o200k_base")

    class Spy:
        def encode_ordinary(self, text):
            calls.append(len(text))
            return real.encode_ordinary(text)

    assert tokens._count_runs(output, Spy(), "o200k_base") == len(enc.encode_ordinary(output))
    assert 0 < sum(calls) < len(output) / 4
