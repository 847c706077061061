"""Cheap per-line cues: what a single line most likely is.

A line on its own is ambiguous, so nothing here decides a segment's class; callers count kinds
over a block (on a bounded sample for big inputs) and decide by majority. Every pattern is
compiled once and anchored, so one line costs a few regex probes at most.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

BLANK = "blank"
TRACE = "trace"
LOG = "log"
DIFF = "diff"
STRUCT = "struct"
CODE = "code"
PROSE = "prose"
PATH = "path"
OTHER = "other"

# The frame line's "at name…(…)|:N" is [class](?:[^(]*\(.*\)|.*:\d+), not [class]+.*(?:\(.*\)|:\d+):
# the + and the .* overlap, and a long "at aaaa…" line cost a rescan per split (quadratic).
TRACE_RE = re.compile(
    r"""^\s*(?:
        (?:E\s+)?Traceback\ \(most\ recent\ call\ last\)
      | File\ "[^"\n]+",\ line\ \d+
      | at\ [\w$.<>\[\]/\\:@-](?:[^(\n]*\(.*\)|.*:\d+)\s*$
      | \S[^@\n]{0,200}\ @\ \S+:\d+(?::\d+)?\s*$
      | (?:During\ handling\ of\ the\ above\ exception|The\ above\ exception\ was\ the\ direct)
      | Caused\ by:[ ]
      | goroutine\ \d+\ \[
      | panic:[ ]
    )""",
    re.X,
)
# "… [ 42%]" is outside the ^\s* group (.* takes the indent anyway): after \s* its .* rescanned
# the line from every split of a long run of blanks (quadratic), as did \s*(?:[…])?\s*$.
LOG_RE = re.compile(
    r"""^(?:\s*(?:
        \[?\d{4}[-/.]\d{1,2}[-/.]\d{1,2}[T\ ,]                # 2024-01-20 ... / 2024/01/20
      | \[?\d{1,2}:\d{2}:\d{2}                                # [21:29:33]
      | \d{6}\ \d{6}\                                         # HDFS 081109 203615
      | (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\ +\d{1,2}\ \d\d:\d\d
      | \[?(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FATAL|NOTICE|CRITICAL|SEVERE)\b
      | (?:PASS|FAIL|FAILED|PASSED|SKIPPED|XFAIL|ERROR|ok
          |---\ (?:PASS|FAIL|SKIP)|===\ (?:RUN|PAUSE|CONT))\b
      | ={5,}|-{5,}\ |_{5,}
      | npm\ (?:ERR!|WARN|notice)|yarn\ (?:run|install)\ v|warning\ |error\ |note:\ |help:[ ]
      | g?make(?:\[\d+\])?:\ |\*\*\*[ ]
      | (?:\S*/)?(?:ccache\ )?(?:gcc|g\+\+|cc|c\+\+|clang(?:\+\+)?|nvcc|icc|icpx)(?:-[\d.]+)?
          \ .*\ -(?:c|o)\ \S                                # a compiler call make echoes
      | (?:CC|CXX|LD|AR|AS|CCLD|CXXLD|GEN|HOSTCC|HOSTLD)\ +\S+\.\w+\s*$   # kbuild/automake quiet
      | (?:Tokens|Cost|Model|Main\ model|Weak\ model|Editor\ model|Git\ repo|Repo-map|Warning
          |Removed|Now\ at|Diff\ since):\ \S
      | (?:Aider\ v\d|Applied\ edit\ to\ |Commit\ [0-9a-f]{7}\ |Added\ \S.*\ to\ the\ chat
          |Removed\ \S.*\ from\ the\ chat|You\ can\ use\ /undo|Running\ \S|Committing\ \S
          |Use\ /help|\^C\ |Add\ .*\?\ \(Y|Run\ shell\ command|Create\ new\ file\?
          |Restored\ previous\ conversation|Scanning\ repo|Initial\ repo\ scan
          |The\ LLM\ did\ not\ conform|Only\ \d+\ reflections|Retrying\ in\ )
      | (?:error|warning)(?:\[\w+\])?:[ ]
      | -->\ \S
      | [\w.\\/-]+[:(]\d+(?:[:,]\d+)?\)?:?\ (?:error|warning|note|fatal)\b
      | [\w.\\/-]+\(\d+,\d+\):\ (?:error|warning)
      | (?:Compiling|Finished|Running|Downloading|Downloaded|Installing|Collecting|Building
          |Linking)\ \S
      | [✓✔✗✕×√●○⚠][ ]
      | \[(?:GIN|Nest|main|INFO|ERROR|WARN)[^\]]*\]
      | (?:tests?|src)[\w/\\.-]*\.\w+\ [.sFExX]+\s*(?:\[\s*\d+%\]\s*)?$
      | (?:Ran\ \d+\ tests?|Tests?:\ +\d|Test\ Suites:|Snapshots:|Time:\ )
      | >\ (?:Task|Configure\ project)\ :|BUILD\ (?:FAILED|SUCCESSFUL)\b|FAILURE:\ |[ew]:\ file:/
      | \*\ (?:What\ went\ wrong|Try):
      | npm\ (?:error|warn)\ |vite\ v\d|\S+\s+[\d.]+\ (?:KiB|kB|MiB|MB|B)\ (?:/|│)\ gzip:
      | (?:data\.)?[\w-]+\.[\w-]+(?:\[\d+\])?:\ (?:Refreshing\ state|Creating|Creation\ complete
          |Still\ creating|Destroying|Destruction\ complete|Modifying|Modifications\ complete
          |Reading|Read\ complete)
      | (?:Terraform\ will\ perform|Plan:\ \d+\ to\ add|Apply\ complete!|\#\ \S+\ (?:will|must)\ be)
      | [\w.%\#-]+:\ +"[^"]*"\ =>\ "                       # terraform 0.11 attribute changes
    ))
    | .*\[\s*\d{1,3}%\]\s*$                                     # "[ 42%]" progress at the end
    """,
    re.X,
)
DIFF_HEAD_RE = re.compile(
    r"^(?:diff --git |index [0-9a-f]{6,}\.\.|--- (?:a/|/dev/null)|\+\+\+ (?:b/|/dev/null)|@@ -\d)"
)
DIFF_LINE_RE = re.compile(r"^[+-](?![+-]{2} )(?:\s{2,}\S|\S)")
JSON_RE = re.compile(
    r"""^\s*(?:
        [{}\[\]],?\s*$
      | "[^"\n]*"\s*:\s*\S
      | "[^"\n]*",?\s*$
      | (?:-?\d[\d.eE+-]*|true|false|null),?\s*$
    )""",
    re.X,
)
YAML_RE = re.compile(r"""^\s*(?:-\ [\w"'][\w"'.-]*:(?:\s|$)|[\w"'.-]+:\s*$|-\ \S+$)""")
CODE_RE = re.compile(
    r"""^\s*(?:
        (?:import|from|def|class|async\ def|return|elif|else|for|while|try|except|finally|with|raise
          |const|let|var|function|export|public|private|protected|static|package|fn|func|impl|use
          |pub|interface|enum|struct|namespace|using|switch|case|break|continue|yield|await|throw
          |if|do|new|delete|typedef|template|module|require|echo|print)\b
      | \#(?:include|define|ifn?def|endif|pragma)\b
      | (?://|/\*|\*\s|\*/|\#!|--\ |<!--)
      | [)}\]]+[;,]?\s*$
      | [{}]\s*$
      | <\/?[A-Za-z][\w.:-]*(?:\s[^<>]*)?\/?>?\s*$
      | @\w+
      | [│⋮█]
      | \d+[│█]
      | (?:\$\ |>\ )?(?:npm|npx|pnpm|yarn|pip3?|python3?|node|cd|git|docker|uv|curl|wget|mkdir|chmod
          |sudo|brew|apt(?:-get)?|make|cargo|go|dotnet|mvn|gradle|set|export|ls|cat|rm|cp|mv)\ \S
      | SELECT\ |INSERT\ |UPDATE\ |CREATE\ |ALTER\ |DROP\ |GRANT[ ]
    )
    | [;{]\s*$ | [(,]\s*$ | \)\s*:\s*$ | =>\s*\{? | ::
    | ^\s*[\w.\[\]'"]+\s*[-+*/|&]?=\s*[^=\s]
    """,
    re.X,
)
SHELL_RE = re.compile(
    r"^\s*(?:\$\s+|PS [^>]*>\s*)?(?:npm|npx|pnpm|yarn|pip3?|python3?|py|node|cd|git|docker|uv|curl"
    r"|wget|mkdir|chmod|sudo|brew|apt(?:-get)?|make|cargo|go|dotnet|mvn|gradle|set|export|ls|cat"
    r"|rm|cp|mv|touch|source|conda|poetry|pytest|bun|deno|kubectl|helm|terraform|aider|forge|anvil"
    r"|cast|grep|find|echo|tsc|eslint|ruff|black|flake8|mypy|alembic|uvicorn|flask|django-admin"
    r"|rails|bundle|gem|composer|php|java|javac|gcc|g\+\+|clang|cmake|ssh|scp|rsync|tar|unzip)"
    r"(?:\s+\S.*)?$"
)
CODE_START_RE = re.compile(
    r"^\s*(?:from\s+[\w.]+\s+import\s|import\s+[\w.{*]|def\s+\w+\s*\(|async\s+def\s"
    r"|class\s+\w+\s*[(:{<]"
    r"|return\b|const\s+\w+\s*[=:]|let\s+\w+\s*[=:]|var\s+\w+\s*=|function\s*\w*\s*\(|export\s+"
    r"(?:default|const|function|class|interface|type|async)\b|public\s|private\s|protected\s"
    r"|\#include\b|package\s+[\w.]+;?\s*$|fn\s+\w+|func\s+\w+|impl\b|use\s+[\w:]+;"
    r"|pub\s+(?:fn|struct)"
    r"|if\s*\(|for\s*\(|while\s*\(|}\s*else\b|elif\s|except\b.*:\s*$|raise\s+\w)"
)
PATH_RE = re.compile(
    r"^\s*(?:#{1,4}\s+)?[*`'\"]{0,2}"
    r"(?P<path>(?:[A-Za-z]:)?[\w~.\\/@()\[\]$+-]*[\w\])-]\.[A-Za-z0-9_]{1,12}"
    r"|(?:[\w.-]+[\\/])+[\w.-]+|Dockerfile|Makefile|Procfile|Gemfile|Rakefile)"
    r"[*`'\"]{0,2}:?\s*$"
)
_WORD_RE = re.compile(r"[A-Za-zÀ-ɏͰ-ϿЀ-ӿ]{2,}")
_SYMBOLS = set("{}()[];=<>|\\$_*#@^~`")
_BULLET_RE = re.compile(r"^\s*(?:[-*+•]\s+|\d{1,3}[.)]\s+|#{1,6}\s+|>\s*|\*\*)")


def kind(line: str) -> str:
    """The most likely kind of one line (prose-ness is judged last: it is the weakest cue)."""
    s = line.strip()
    if not s:
        return BLANK
    if TRACE_RE.match(line):
        return TRACE
    if DIFF_HEAD_RE.match(line):
        return DIFF
    if LOG_RE.match(line):
        return LOG
    if JSON_RE.match(line):
        return STRUCT
    if CODE_START_RE.match(line) or SHELL_RE.match(line):
        return CODE
    if is_prose(s):
        return PROSE
    if YAML_RE.match(line):
        return STRUCT
    if CODE_RE.search(line):
        return CODE
    if PATH_RE.match(line):
        return PATH
    return OTHER


def is_prose(s: str) -> bool:
    """Sentence-like: several real words, few code symbols (markdown bullets/headings allowed)."""
    body = _BULLET_RE.sub("", s, count=1)
    words = _WORD_RE.findall(body)
    if len(words) < 3 or body.count(" ") < 2:
        return False
    letters = sum(len(w) for w in words)
    if letters < 0.55 * len(body):
        return False
    sym = sum(1 for ch in body if ch in _SYMBOLS)
    if sym > max(2, len(body) // 12):
        return False
    if body.rstrip().endswith((";", "{", "}", "):", "=>")):
        return False
    return True


def is_sentence(s: str) -> bool:
    """A real sentence (what a markdown reply is made of; configure/status lines are shorter)."""
    return len(s.split()) >= 8 and s.rstrip().endswith((".", "!", "?", ":", ")")) and is_prose(s)


def is_path(line: str) -> str | None:
    """The path if the whole line is a bare file path (how Aider names the file of an edit)."""
    if len(line) > 250 or " " in line.strip().strip("#").strip():
        return None
    m = PATH_RE.match(line)
    return m.group("path") if m else None


def is_diff_line(line: str) -> bool:
    return bool(DIFF_HEAD_RE.match(line) or DIFF_LINE_RE.match(line)) and not is_prose(
        line[1:].strip()
    )


def sample(lines: Sequence[str], limit: int = 240) -> list[str]:
    """Head, tail and an even spread of the middle: class votes stay bounded for huge inputs."""
    n = len(lines)
    if n <= limit:
        return list(lines)
    head, tail = limit // 2, limit // 6
    mid = limit - head - tail
    step = (n - head - tail) / mid
    middle = [lines[head + int(i * step)] for i in range(mid)]
    return list(lines[:head]) + middle + list(lines[n - tail :])


def counts(lines: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in lines:
        k = kind(line)
        out[k] = out.get(k, 0) + 1
    return out
