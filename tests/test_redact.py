"""Secret redaction: the common formats go, facts stay, redacting twice changes nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aider_gardener.redact import find_secrets, redact, secret_kinds

OPENAI = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz" * 3
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----\n"
)

SECRETS = [
    # (text, what must be gone, what must stay)
    (f"OPENAI_API_KEY={OPENAI} pytest -q", OPENAI, "OPENAI_API_KEY="),
    (f"$ OPENAI_API_KEY='{OPENAI}' python app.py", OPENAI, "python app.py"),
    (
        "openai.AuthenticationError: Error code: 401 - Incorrect API key provided: "
        "sk-proj-****************************************AbCd.",
        "AbCd",
        "AuthenticationError: Error code: 401",
    ),
    (f"Incorrect API key provided: {OPENAI}", OPENAI, "Incorrect API key provided:"),
    ("ANTHROPIC_API_KEY=sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe claude", "Zx9Yw8", "claude"),
    ("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "AWS_ACCESS_KEY_ID"),
    (
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY aws s3 ls",
        "wJalrXUtnFEMI",
        "aws s3 ls",
    ),
    (f"git clone https://{GITHUB}@github.com/acme/app", GITHUB, "github.com/acme/app"),
    ("GH_TOKEN=github_pat_11ABCDEFG0123456789_abcdefghijklmnop gh pr list", "11ABCDEFG", "gh pr"),
    ("git push https://deploy:hunter2hunter2@example.com/r.git", "hunter2hunter2", "deploy:"),
    (
        "GET https://api.example.com/v1/users?page=2&password=Tr0ub4dor3&sort=asc",
        "Tr0ub4dor3",
        "sort=asc",
    ),
    ("psql postgres://app:s3cretPassw0rd@db:5432/app", "s3cretPassw0rd", "db:5432/app"),
    (f"deploy key:\n{PEM}done", "MIIEowIBAAKCAQEA", "done"),
    ("mysql --password=Tr0ub4dor3 -u root", "Tr0ub4dor3", "-u root"),
    ('{"api_key": "9f8e7d6c5b4a39281706", "timeout": 30}', "9f8e7d6c5b4a", '"timeout": 30'),
    ("curl -H 'Authorization: Bearer abcdef0123456789abcdef0123'", "abcdef0123456789", "curl -H"),
    ("slack: xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGh", "slack:"),
    ("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "hf_AbCdEf", "HF_TOKEN"),
    ("DB_PASS=hunter22hunter sh migrate.sh", "hunter22hunter", "DB_PASS="),
    ("export MY_SECRET_NAME=abcdef123456", "abcdef123456", "MY_SECRET_NAME="),
]


@pytest.mark.parametrize("text,secret,kept", SECRETS)
def test_common_formats_are_redacted(text, secret, kept):
    out = redact(text)
    assert secret not in out
    assert kept in out
    assert "[redacted: " in out
    assert redact(out) == out


def test_pem_block_goes_whole_even_when_its_footer_was_cut():
    cut = PEM.split("-----END")[0] + "\nnext line stays\n"
    out = redact(cut)
    assert "MIIEow" not in out and "VTLw7" not in out and "next line stays" in out


NOT_SECRETS = [
    "commit 3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "[full output stored: id=t5ifzcaz3j]",
    "token = get_token()\npassword = os.environ['DB_PASSWORD']",
    "MAX_TOKENS=4096 TOKEN_LIMIT=100000",
    "BYPASS=yes-please-1234 PASSED_TESTS=all-of-them-12",
    "GITHUB_TOKEN=$GITHUB_TOKEN DB_PASSWORD=<your password> API_KEY=${{ secrets.KEY }}",
    "pip install scikit-learn sk-learn-contrib-something-long",
    "FAILED tests/test_auth.py::test_token_refresh - AssertionError: expected 401",
    "550e8400-e29b-41d4-a716-446655440000",
    "https://example.com/search?q=passwords&page=2",
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_facts_that_look_like_secrets_stay(text):
    assert redact(text) == text
    assert find_secrets(text) == []


def test_secret_kinds_names_each_kind_once():
    text = f"A={OPENAI}\nB https://{GITHUB}@github.com\nC={OPENAI}"
    kinds = secret_kinds(text)
    assert len(kinds) == len(set(kinds)) == 2


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_redaction_is_idempotent_and_never_raises(text):
    once = redact(text)
    assert redact(once) == once


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="sk-projAKIAghp_=:/@ \n\"'abcXYZ0123456789", max_size=300))
def test_redaction_is_idempotent_on_secret_like_noise(text):
    once = redact(text)
    assert redact(once) == once
