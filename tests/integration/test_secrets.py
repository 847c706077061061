"""Secrets do not travel: a key on a /run command line and in its failing output reaches
neither the requests (state block, summaries), nor checkpoints, nor the next session, while the
stored original keeps it for the user's /show. Real coders, real store; only the LLM is
stubbed."""

from __future__ import annotations

from aider_gardener.continuity.checkpoint import list_checkpoints
from aider_gardener.integration.keeper import tracker_of
from tests.integration.helpers import text_of

KEY = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz" * 3
AWS = "AKIAIOSFODNN7EXAMPLE"
SCRIPT = (
    "echo 'Deploying web-7 with the new client'\n"
    'echo "openai.AuthenticationError: Error code: 401 -'
    ' Incorrect API key provided: $OPENAI_API_KEY"\n'
    f"echo 'botocore: using access key {AWS}'\n"
    "exit 1\n"
)


def said(capsys) -> str:
    out = capsys.readouterr()
    return " ".join((out.out + out.err).split())


def run_deploy(coder, repo) -> str:
    (repo / "deploy.sh").write_text(SCRIPT)
    command = f"OPENAI_API_KEY={KEY} sh deploy.sh"
    coder.commands.cmd_run(command)
    return command


def test_a_key_on_the_command_line_and_in_the_error_never_travels(
    make_coder, llm, repo, tmp_path, capsys
):
    coder = make_coder()
    run_deploy(coder, repo)
    out = said(capsys)
    meta = coder.gardener.meta(coder.cur_messages[-2])
    assert meta.stored and meta.secret and meta.state == "summary"
    assert (
        f"a secret in the output is redacted in the chat (full text: /show {meta.entry_id})" in out
    )
    in_chat = coder.cur_messages[-2]["content"]
    assert "Incorrect API key provided: [redacted: " in in_chat
    assert KEY not in in_chat and AWS not in in_chat
    errors = [f for f in tracker_of(coder.gardener).book if f.kind == "error" and f.live]
    assert errors, "the failing command became an open error"
    llm.replies = ["The key is wrong."]
    coder.run(with_message="why does the deploy fail?")
    state = [
        m["content"] for m in llm.last if "Session state kept by aider-gardener" in m["content"]
    ]
    assert state and "AuthenticationError" in state[0]
    assert KEY not in state[0] and AWS not in state[0]

    coder.commands.run("/checkpoint before rotating the key " + KEY)
    [path] = list_checkpoints(tmp_path / "store" / "checkpoints")
    text = path.read_text()
    assert "AuthenticationError" in text and "deploy.sh" in text
    assert KEY not in text and AWS not in text and "[redacted: " in text
    coder.gardener.close()

    capsys.readouterr()
    later = make_coder()  # carries the open error into the next session
    assert "carried over" in said(capsys)
    llm.replies = ["Ok."]
    later.run(with_message="hello again")
    sent = text_of(llm.last)
    assert "AuthenticationError" in sent
    assert KEY not in sent and AWS not in sent
    facts = later.gardener.store.read(lambda c: c.execute("SELECT text FROM facts").fetchall())
    assert facts and not any(KEY in row[0] for row in facts)


def test_show_gives_the_user_the_original_and_pin_restores_it_redacted(make_coder, repo, capsys):
    coder = make_coder()
    run_deploy(coder, repo)
    meta = coder.gardener.meta(coder.cur_messages[-2])
    capsys.readouterr()
    coder.commands.cmd_show(meta.entry_id)
    out = capsys.readouterr().out
    assert KEY in "".join(out.split())  # the user's own screen
    assert "Contains a secret" in " ".join(out.split())
    coder.commands.run(f"/pin {meta.entry_id}")  # back to full text in the chat: redacted
    in_chat = coder.gardener.meta(coder.cur_messages[-2]).msg["content"]
    assert "Deploying web-7" in in_chat and KEY not in in_chat and AWS not in in_chat


def test_a_big_output_enters_as_its_summary_without_the_key_of_its_command(
    make_coder, llm, repo, capsys
):
    (repo / "big.sh").write_text(
        'i=0; while [ $i -lt 3000 ]; do echo "INFO synced row $i"; i=$((i+1)); done\n'
        'echo "ERROR upload refused for token $UPLOAD_TOKEN"\n'
    )
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    coder = make_coder(max_output=300)
    coder.commands.cmd_run(f"UPLOAD_TOKEN={token} sh big.sh")
    meta = coder.gardener.meta(coder.cur_messages[-2])
    assert meta.state == "summary" and "ERROR upload refused" in meta.summary
    llm.replies = ["Ok."]
    coder.run(with_message="why was the upload refused?")
    sent = text_of(llm.last)
    assert "UPLOAD_TOKEN=[redacted: " in sent and token not in sent
