"""Secrets out of everything the gardener writes for a model or a file that travels.

A key pasted into a ``/run`` command line or printed in an error would otherwise be copied into
summaries, the session-state block, checkpoints and recalled context, and that block goes with
every request of later sessions. The originals keep their secrets (the store is the user's own,
0600) so ``/show`` can still print them to the user; ``/forget ID`` drops them entirely.
Redaction happens where the gardener writes for a model or a later session (facts, the chat copy
of command output, references, recalled context, MCP answers, hook replacements), not in
``pipeline.compress``: a compressed summary stays a faithful, idempotent function of its input.

The vendor token formats are detect-secrets' regex detectors (the maintained list); added here
is what they do not cover in command lines and logs: whole PEM key blocks, ``NAME_KEY=value``
assignments and ``--password value`` flags, credentials in URL queries, bearer tokens, OpenAI and
Anthropic keys in their current formats. Its entropy and keyword detectors are left out on
purpose: commit hashes and entry ids are facts, and ``password = get_password()`` is code.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterator

MARK = "[redacted: {kind}]"

# detect-secrets' detectors whose formats are specific enough to redact without false hits in
# code and logs (module, class): the high-entropy, keyword, IP and softlayer/IBM/cloudant
# detectors match ordinary hashes, code and words, and are not used.
_DETECT_SECRETS = (
    ("artifactory", "ArtifactoryDetector"),
    ("aws", "AWSKeyDetector"),
    ("azure_storage_key", "AzureStorageKeyDetector"),
    ("basic_auth", "BasicAuthDetector"),
    ("discord", "DiscordBotTokenDetector"),
    ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"),
    ("jwt", "JwtTokenDetector"),
    ("mailchimp", "MailchimpDetector"),
    ("npm", "NpmDetector"),
    ("openai", "OpenAIDetector"),
    ("pypi_token", "PypiTokenDetector"),
    ("sendgrid", "SendGridDetector"),
    ("slack", "SlackDetector"),
    ("square_oauth", "SquareOAuthDetector"),
    ("stripe", "StripeDetector"),
    ("telegram_token", "TelegramBotTokenDetector"),
    ("twilio", "TwilioKeyDetector"),
)
# Literals without which a rule cannot match: testing for them first keeps the common case (no
# secret) to a few substring searches. Lower-case needs are tested against the lower-cased text.
_NEEDS = {
    "artifactory": ("AKC", *(f"AP{c}" for c in "0123456789ABCDEF")),
    "aws": ("A3T", "ABIA", "ACCA", "AKIA", "ASIA", "aws"),
    "npm": ("_authToken",),
    "basic_auth": ("://",),
    "jwt": ("eyJ",),
    "azure_storage_key": ("AccountKey=",),
    "slack": ("xox", "hooks.slack.com"),
    "square_oauth": ("sq0csp-",),
    "sendgrid": ("SG.",),
    "pypi_token": ("pypi-",),
    "stripe": ("k_live_",),
    "openai": ("T3BlbkFJ",),
    "mailchimp": ("-us",),
    "github_token": ("gh",),
    "gitlab_token": ("gl", "GR1348941"),
    "twilio": ("AC", "SK"),
    "secret variable": ("KEY", "SECRET", "TOKEN", "PASS", "PWD", "CREDENTIAL", "AUTH"),
    "secret option": ("password", "passwd", "token", "api", "secret", "client"),
    "secret value": ("password", "passwd", "secret", "api", "token", "private"),
    "URL credential": ("=",),
    "bearer token": ("Bearer", "Basic", "Token"),
    "Anthropic key": ("sk-ant-",),
    "OpenAI key": ("sk-",),
    "Google API key": ("AIza",),
    "Hugging Face token": ("hf_",),
    "GitHub token": ("github_pat_",),
    "API key": ("api key",),
}

# Detectors whose patterns match context around the secret, which is their first group.
_GROUPED = ("aws", "basic_auth", "npm")
_EDGE = " \t\n\"'=:"

_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|APIKEY|SECRET|TOKEN|PASSWORD|PASSWD|PASS|PWD|CREDENTIALS?|AUTH"
    r"|PRIVATE_KEY|ACCESS_KEY)(?:_|$)"
)
_OWN = (
    # NAME=value in a command line, a .env file or `env` output: the value only; the name is a
    # fact (which variable was set). The name is one upper-case word; whether it names a secret
    # is checked apart (``_secret_name``): one pattern for both backtracked without bound on
    # "TOKEN_TOKEN_…".
    (
        "secret variable",
        re.compile(
            r"(?<![\w-])(?P<name>[A-Z][A-Z0-9_]{0,127})=(?P<v>\"[^\"\n]*\"|'[^'\n]*'|[^\s'\"]+)"
        ),
    ),
    # --password value, --token=value, --api-key value
    (
        "secret option",
        re.compile(
            r"(?<![\w-])--?(?:password|passwd|token|api[-_]?key|secret|access[-_]token|"
            r"auth[-_]token|client[-_]secret)(?:=|[ \t]+)(?P<v>[^\s'\"]+|\"[^\"\n]*\"|'[^'\n]*')",
            re.I,
        ),
    ),
    # "password": "…", api_key: '…' in JSON, YAML, Python: only quoted values (code is not)
    (
        "secret value",
        re.compile(
            r"(?P<q>[\"']?)(?:password|passwd|secret|api[-_]?key|access[-_]?token|auth[-_]?token|"
            r"client[-_]?secret|private[-_]?key)(?P=q)[ \t]*[:=][ \t]*(?P<o>[\"'])(?P<v>[^\"'\n]+)"
            r"(?P=o)",
            re.I,
        ),
    ),
    # ?password=…&token=… in a URL
    (
        "URL credential",
        re.compile(
            r"[?&;](?:password|passwd|pwd|pass|token|access_token|refresh_token|id_token|"
            r"api_?key|key|secret|client_secret|sig|signature|x-amz-signature|x-amz-credential|"
            r"x-amz-security-token)=(?P<v>[^&\s#\"'<>]+)",
            re.I,
        ),
    ),
    ("bearer token", re.compile(r"\b(?:Bearer|Basic|Token)[ \t]+(?P<v>[A-Za-z0-9._~+/=-]{16,})")),
    ("Anthropic key", re.compile(r"(?<![\w-])sk-ant-[A-Za-z0-9_-]{20,}")),
    # OpenAI keys in all their forms (sk-…, sk-proj-…, sk-svcacct-…), and the masked ones an
    # "Incorrect API key provided: sk-proj-****abcd" error prints
    ("OpenAI key", re.compile(r"(?<![\w-])sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_*-]{20,}")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("GitHub token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}")),
    (
        "API key",
        re.compile(
            r"(?i:(?:incorrect|invalid) api key(?: provided)?|api key provided):?"
            r"[ \t]+(?P<v>\S{8,})"
        ),
    ),
)
_PEM_BEGIN = re.compile(
    r"-----BEGIN (?P<what>(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----|PuTTY-User-Key-File-\d"
)
_PEM_MAX = 64 * 1024  # a key block is a few KB: an END further away is not this block's
_KEY_LINE = re.compile(r"[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z-]+: .*)[ \t\r]*")
# $VAR, <your key>, {{ secret }}, ****, xxxx, your_key_here: references and examples, not secrets
_PLACEHOLDER = re.compile(
    r"^[\"']?(?:\$|<|\{|%|\[redacted|\*+[\"']?$|x+[\"']?$|your[_-]|.*[_-]here[\"']?$)", re.I
)


@dataclass(frozen=True)
class Finding:
    start: int
    end: int
    kind: str


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern
    needs: tuple[str, ...]
    check: Callable[[str, re.Match], bool] | None = None
    group: int | str = 0  # the part of a match that is the secret (the rest is its context)

    def may_match(self, text: str, lower: Callable[[], str]) -> bool:
        return not self.needs or any(n in (lower() if n.islower() else text) for n in self.needs)


def _jwt(value: str, match: re.Match) -> bool:
    """Only what decodes as a JWT header: ``eyJ…`` strings that are not tokens stay."""
    head = value.split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
        return isinstance(json.loads(decoded), dict)
    except (ValueError, UnicodeDecodeError):
        return False


def _mixed(value: str, match: re.Match) -> bool:
    """A key has letters and digits (or the stars of a masked one); ``sk-learn-some-long-name``
    is a word."""
    return any(c.isdigit() or c == "*" for c in value) and any(c.isalpha() for c in value)


def _secret_name(value: str, match: re.Match) -> bool:
    """``OPENAI_API_KEY=…``, ``DB_PASSWORD=…``; not ``MAX_TOKENS=…`` or ``BYPASS=…``."""
    return bool(_SECRET_NAME.search(match["name"]))


@lru_cache(maxsize=1)
def _rules() -> tuple[_Rule, ...]:
    rules: list[_Rule] = []
    try:
        import importlib

        for module, cls in _DETECT_SECRETS:
            plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)
            check = _jwt if module == "jwt" else None
            needs = _NEEDS.get(module, ())
            for pattern in plugin.denylist:
                group: int | str = 1 if module in _GROUPED and pattern.groups else 0
                rules.append(_Rule(plugin.secret_type, pattern, needs, check, group))
    except ImportError:  # pragma: no cover - the lock installs it; our own table still applies
        pass
    for kind, pattern in _OWN:
        check = _mixed if kind in ("OpenAI key", "Anthropic key", "API key") else None
        if kind == "secret variable":
            check = _secret_name
        group = "v" if "v" in pattern.groupindex else 0
        rules.append(_Rule(kind, pattern, _NEEDS.get(kind, ()), check, group))
    return tuple(rules)


def _span(match: re.Match, group: int | str) -> tuple[int, int]:
    """The secret's span, without the separators some patterns match around it."""
    start, end = match.span(group)
    while start < end and match.string[start] in _EDGE:
        start += 1
    while end > start and match.string[end - 1] in _EDGE:
        end -= 1
    return start, end


def _pem_blocks(text: str) -> Iterator[Finding]:
    """A private key block whole, header to footer (or to the end of its base64 lines when the
    footer was cut off): a key's body lines carry no marker of their own."""
    if "PRIVATE KEY" not in text and "PuTTY-User-Key-File" not in text:
        return
    pos, next_end = 0, -1
    while True:
        match = _PEM_BEGIN.search(text, pos)
        if match is None:
            return
        what = match["what"]
        end = -1
        if what:  # the next footer of any kind, found once for all the headers before it
            if next_end < match.end():
                next_end = text.find("-----END ", match.end())
                next_end = len(text) if next_end < 0 else next_end
            footer = f"-----END {what}-----"
            if next_end <= match.end() + _PEM_MAX and text.startswith(footer, next_end):
                end = next_end + len(footer)
        if end < 0:  # no footer: the key's lines that follow, up to a blank or other line
            end = match.end()
            limit = min(len(text), match.end() + _PEM_MAX)
            line_end = text.find("\n", end, limit)
            while 0 <= line_end < limit:
                nxt = text.find("\n", line_end + 1, limit)
                stop = nxt if nxt >= 0 else limit
                line = text[line_end + 1 : stop]
                if not line.strip() or not _KEY_LINE.fullmatch(line):
                    break
                end = stop
                line_end = nxt
        yield Finding(match.start(), end, "private key")
        pos = max(end, match.end())


def find_secrets(text: str) -> list[Finding]:
    """Where the secrets are in ``text``, sorted, overlaps merged."""
    if not text:
        return []
    found: list[Finding] = list(_pem_blocks(text))
    folded: list[str] = []

    def lower() -> str:
        if not folded:
            folded.append(text.lower())
        return folded[0]

    for rule in _rules():
        if not rule.may_match(text, lower):
            continue
        for match in rule.pattern.finditer(text):
            start, end = _span(match, rule.group)
            value = text[start:end]
            if end - start < 6 or _PLACEHOLDER.match(value) or value.isdigit():
                continue
            if rule.check is not None and not rule.check(value, match):
                continue
            found.append(Finding(start, end, rule.kind))
    found.sort(key=lambda f: (f.start, -f.end))
    merged: list[Finding] = []
    for f in found:
        if merged and f.start < merged[-1].end:
            last = merged[-1]
            if f.end > last.end:
                merged[-1] = Finding(last.start, f.end, last.kind)
            continue
        merged.append(f)
    return merged


def redact(text: str) -> str:
    """``text`` with every secret replaced by ``[redacted: KIND]``; the same text when there is
    none. Redacting twice changes nothing (the marker matches no rule)."""
    if not text:
        return text
    found = find_secrets(text)
    if not found:
        return text
    out, pos = [], 0
    for f in found:
        out.append(text[pos : f.start])
        out.append(MARK.format(kind=f.kind))
        pos = f.end
    out.append(text[pos:])
    return "".join(out)


def redact_range(text: str, start: int, end: int, margin: int = 1024) -> tuple[str, int]:
    """``text[start:end]`` redacted, and how many secrets were cut from it. A page of a long
    original is looked at with ``margin`` characters on each side, so a key split by the page
    boundary is still recognised and its part on this page removed."""
    lo, hi = max(0, start - margin), min(len(text), end + margin)
    window = text[lo:hi]
    out, pos, n = [], start, 0
    for f in find_secrets(window):
        f_start, f_end = f.start + lo, f.end + lo
        if f_end <= start or f_start >= end:
            continue
        out.append(text[pos : max(pos, f_start)])
        out.append(MARK.format(kind=f.kind))
        pos, n = min(end, f_end), n + 1
    out.append(text[pos:end])
    return "".join(out), n


def secret_kinds(text: str) -> list[str]:
    """The kinds of secret in ``text``, each once, in order of appearance (for /show's note)."""
    return list(dict.fromkeys(f.kind for f in find_secrets(text)))
