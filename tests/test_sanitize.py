from aider_gardener.sanitize import decode, looks_binary


def test_utf8_passes_through():
    assert decode("héllo".encode()).text == "héllo"
    assert decode("héllo".encode()).notes == []


def test_binary_is_detected_and_not_decoded():
    d = decode(b"\x00\x01\x02ELF" * 100)
    assert d.binary and "600 bytes" in d.text


def test_utf16_le_without_bom():
    d = decode("plain ascii text output\n".encode("utf-16-le") * 5)
    assert d.text.startswith("plain ascii text output") and not d.binary


def test_invalid_utf8_counts_replacements():
    d = decode(b"ok \xff\xfe end")
    assert "\ufffd" in d.text and "invalid UTF-8: 2 bytes" in d.notes[0]


def test_lone_surrogates_in_str():
    d = decode("abc\udcff def")
    assert d.text.encode("utf-8") and d.notes


def test_control_heavy_text_looks_binary_but_tabs_do_not():
    assert looks_binary(bytes(range(1, 9)) * 50)
    assert not looks_binary(b"a\tb\tc\n" * 50)


def test_utf32_read_as_utf16_is_binary_as_its_text_would_be():
    """UTF-32's BOM starts like UTF-16's; the decoded text has a NUL after every character and
    is binary when given as a str, so it must be binary when given as bytes too."""
    data = "".join(f"line {i} of a UTF-32 file\n" for i in range(60)).encode("utf-32")
    assert decode(data).binary
    assert decode(data.decode("utf-16", "replace")).binary
