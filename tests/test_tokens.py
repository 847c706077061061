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
