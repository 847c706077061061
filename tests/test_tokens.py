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
