"""The store's chat commands on real coders: /recall (previews, --add, --full), /show, /forget,
/restore, /pin with bad ids. Only the LLM is stubbed; the store is a real SQLite file."""

from __future__ import annotations

import shlex

import pytest

from aider_gardener.integration import commands_recall
from aider_gardener.integration.eviction import evict, history_tokens
from aider_gardener.integration.ingest import RECALL_HEADER, sync
from aider_gardener.store.recall import recall
from aider_gardener.tokens import count_tokens
from aider_gardener.types import Source
from tests.integration.helpers import text_of

ROWS = 1500
LOG = (
    "starting nightly import\n"
    "ERROR E4411 ZebraTimeout in app/frobnicate.py:42 after 30s\n"
    + "".join(f"INFO imported row {i} of batch 7\n" for i in range(ROWS))
    + "ERROR E4412 KangarooOverflow at row 1499\n"
)
LAST_LINE = ROWS + 3  # the KangarooOverflow line's number in the original
OTHER = (
    "Deploy notes: the KangarooOverflow alarm fires when batch 7 is replayed twice; the replay"
    " guard in app/replay.py stops it. Nothing to do with ZebraTimeout.\n"
)


@pytest.fixture
def logged(make_coder, repo, capsys):
    """A coder whose chat holds ``cat import.log`` (throttled to its summary) and the log's
    stored entry."""
    (repo / "import.log").write_text(LOG)
    coder = make_coder(max_output=300)
    coder.commands.cmd_run("cat import.log")
    meta = coder.gardener.meta(coder.cur_messages[-2])
    assert meta.state == "summary" and meta.stored
    capsys.readouterr()
    return coder, meta.entry_id


def out_of(capsys) -> str:
    got = capsys.readouterr()
    return got.out + got.err


def entry_count(store) -> int:
    return store.read(lambda c: c.execute("SELECT count(*) FROM entries").fetchone()[0])


# --- /recall listing --------------------------------------------------------------------------


def test_recall_lists_id_class_cost_and_the_lines_that_matched(logged, capsys):
    coder, log_id = logged
    entry = coder.gardener.store.get(log_id)
    coder.commands.cmd_recall("KangarooOverflow")
    out = out_of(capsys)
    assert f"{log_id}  log" in out
    assert f"{entry.tokens_original:,} tokens" in out and "`cat import.log`" in out
    # the line that matched, with its number, though it is far from the summary's head
    assert f"{LAST_LINE}: ERROR E4412 KangarooOverflow at row 1499" in out
    assert "starting nightly import" not in out
    assert "/recall ID --add" in out and "/show ID" in out


def test_recall_preview_ranks_lines_by_shared_terms(logged, capsys):
    coder, log_id = logged
    coder.commands.cmd_recall("E4411 ZebraTimeout frobnicate")
    out = out_of(capsys)
    assert "2: ERROR E4411 ZebraTimeout in app/frobnicate.py:42" in out
    assert "imported row" not in out  # 1,500 lines share no term with the query


# --- /recall --add ----------------------------------------------------------------------------


def test_add_top_hit_only_reports_tokens_and_is_never_ingested(logged, llm, capsys):
    coder, log_id = logged
    store = coder.gardener.store
    other = store.ingest(OTHER, Source(role="user"))
    before = entry_count(store)
    coder.commands.cmd_recall("KangarooOverflow row 1499 --add")
    out = out_of(capsys)
    block = f"--- id={log_id} (log)  `cat import.log`\n{LOG.rstrip()}"
    n = count_tokens(block, "gpt-4o")
    assert f"Added id={log_id} ({n:,} tokens) to the chat." in out
    assert f"id={other.id}" not in out.split("Added")[1]  # only the top hit
    user, reply = coder.cur_messages[-2:]
    assert user["content"].startswith(RECALL_HEADER) and LOG.rstrip() in user["content"]
    assert OTHER.strip() not in user["content"] and reply["content"] == "Ok."

    llm.replies = ["Row 1499 overflowed: batch 7 was replayed.\nThe replay guard stops that."]
    coder.run(with_message="why did row 1499 overflow?")
    assert LOG.rstrip() in text_of(llm.last)  # sent verbatim
    assert entry_count(store) == before + 2  # the prompt and the reply, not the recalled text
    assert not [e for e in store.list_entries(200) if e.original.startswith(RECALL_HEADER)]


def test_add_exactly_the_ids_given(logged, capsys):
    coder, log_id = logged
    store = coder.gardener.store
    other = store.ingest(OTHER, Source(role="user"))
    third = store.ingest("KangarooOverflow is also the name of a board game.\n" * 3)
    coder.commands.cmd_recall(f"{other.id} {log_id} --add")
    out = out_of(capsys)
    assert f"Added id={other.id} (" in out and f"Added id={log_id} (" in out
    added = coder.cur_messages[-2]["content"]
    assert OTHER.strip() in added and LOG.rstrip() in added
    assert "board game" not in added and third.id not in out
    # both count as in the chat verbatim, so session RAG does not inject them a second time
    in_history = coder.gardener.entries_in_history()
    assert in_history[other.id] == in_history[log_id] == "full"


def test_add_is_refused_when_it_would_not_fit_the_window(logged, monkeypatch, capsys):
    coder, log_id = logged
    monkeypatch.setitem(coder.main_model.info, "max_input_tokens", 8000)
    messages = list(coder.cur_messages)
    coder.commands.cmd_recall(f"{log_id} --add")
    out = out_of(capsys)
    assert f"Not added: id={log_id} (" in out and "would not fit" in out
    assert "8,000-token window" in out
    assert coder.cur_messages == messages


def test_added_text_stays_verbatim_for_the_recent_turns_even_under_hard_eviction(
    make_coder, repo, capsys
):
    (repo / "import.log").write_text(LOG)
    coder = make_coder("ask", max_output=300, recent_turns=2, budget=2000)
    session = coder.gardener
    coder.commands.cmd_run("cat import.log")
    log_id = session.meta(coder.cur_messages[-2]).entry_id
    coder.commands.cmd_recall(f"{log_id} --add")
    added = coder.cur_messages[-2]
    meta = session.meta(added)
    assert meta.kind == "recall" and meta.state == "full"
    for turn in range(2):  # the next two user turns: over budget, then an overflow
        coder.cur_messages += [dict(role="user", content=f"question {turn} about row 1499")]
        sync(session, coder)
        evict(session, coder)
        evict(session, coder, hard_target=500)
        assert meta.state == "full" and LOG.rstrip() in meta.msg["content"], turn
        coder.cur_messages.append(dict(role="assistant", content=f"answer {turn}"))
    # the kept turns are over: the next pressure ages it into the entries' summaries
    coder.cur_messages += [dict(role="user", content="and now?")]
    sync(session, coder)
    evict(session, coder)
    assert meta.state != "full" and history_tokens(session, coder) < 2000
    assert f"id={log_id}" in meta.msg["content"]
    assert "already in the chat" not in out_of(capsys)


def test_adding_what_is_already_in_the_chat_in_full_adds_nothing(logged, capsys):
    coder, log_id = logged
    coder.commands.cmd_recall(f"{log_id} --add")
    n = len(coder.cur_messages)
    capsys.readouterr()
    coder.commands.cmd_recall(f"{log_id} --add")
    assert f"id={log_id} is already in the chat in full." in out_of(capsys)
    assert len(coder.cur_messages) == n


# --- /show and /recall ID --full --------------------------------------------------------------


def test_show_prints_head_and_says_how_to_see_the_rest_without_a_terminal(logged, capsys):
    coder, log_id = logged
    coder.commands.cmd_show(log_id)
    out = out_of(capsys)
    assert f"id={log_id}  log" in out and f"{ROWS + 3:,} lines" in out
    assert "INFO imported row 37 of batch 7" in out
    assert "INFO imported row 900 of batch 7" not in out
    more = ROWS + 3 - commands_recall.SHOW_LINES
    assert f"… {more:,} more lines not shown: /show {log_id} --all prints them" in out
    path = coder.gardener.store.dir / "shown" / f"{log_id}.txt"
    assert path.read_text().rstrip() == LOG.rstrip()
    assert str(path) in "".join(out.split())  # (the console wraps the line)

    coder.commands.cmd_show(f"{log_id} --all")
    assert "ERROR E4412 KangarooOverflow at row 1499" in out_of(capsys)


def test_recall_id_full_is_show(logged, capsys):
    coder, log_id = logged
    coder.commands.cmd_recall(f"{log_id} --full --all")
    out = out_of(capsys)
    assert "INFO imported row 900 of batch 7" in out and "KangarooOverflow at row 1499" in out
    assert len(coder.cur_messages) == 2  # shown, not added


def test_show_pages_long_originals_through_the_pager_on_a_terminal(
    logged, monkeypatch, tmp_path, capsys
):
    coder, log_id = logged
    paged = tmp_path / "paged.txt"
    monkeypatch.setenv("PAGER", f"sh -c {shlex.quote('cat > ' + str(paged))}")
    monkeypatch.setattr(commands_recall, "_isatty", lambda: True)
    coder.commands.cmd_show(log_id)
    assert paged.read_text() == LOG
    assert "more lines not shown" not in out_of(capsys)


def test_show_without_a_usable_pager_falls_back_to_the_head(logged, monkeypatch, capsys):
    coder, log_id = logged
    monkeypatch.setenv("PAGER", "no-such-pager-xyz")
    monkeypatch.setattr(commands_recall, "_isatty", lambda: True)
    coder.commands.cmd_show(log_id)
    assert "more lines not shown" in out_of(capsys)


# --- /forget, /restore ------------------------------------------------------------------------


def test_forget_hides_the_entry_and_its_copies_until_restored(logged, capsys):
    coder, log_id = logged
    store = coder.gardener.store
    # what /recall --add used to store: the original inside a new "prompt" entry
    copy = store.ingest(
        f"{RECALL_HEADER}\n\n--- id={log_id} (log)\n{LOG.rstrip()}", Source(role="user")
    )
    assert {log_id, copy.id} <= {h.entry_id for h in recall(store, "KangarooOverflow")}

    coder.commands.cmd_forget(log_id)
    out = out_of(capsys)
    assert f"Forgot id={log_id} and 1 copy of it" in out and f"/restore {log_id}" in out
    assert not {log_id, copy.id} & {h.entry_id for h in recall(store, "KangarooOverflow")}
    for cmd in (coder.commands.cmd_recall, coder.commands.cmd_show):
        cmd(log_id)
        assert f"id={log_id} is forgotten; /restore {log_id} brings it back." in out_of(capsys)
    coder.commands.cmd_recall(copy.id)
    assert f"a copy of {log_id}" in out_of(capsys)
    coder.commands.cmd_forget(log_id)
    assert "already forgotten" in out_of(capsys)

    # running the command again re-ingests the same output: the decision stands
    coder.commands.cmd_run("cat import.log")
    assert not store.get(log_id).active
    capsys.readouterr()

    coder.commands.cmd_forget(f"--undo {log_id}")
    assert f"Restored id={log_id} and 1 copy of it" in out_of(capsys)
    assert {log_id, copy.id} <= {h.entry_id for h in recall(store, "KangarooOverflow")}
    coder.commands.cmd_forget(log_id)
    coder.commands.cmd_restore(log_id)
    coder.commands.cmd_restore(log_id)
    out = out_of(capsys)
    assert f"Restored id={log_id}" in out and f"id={log_id} is not forgotten" in out


@pytest.mark.parametrize("bad", ["zzzzzzzzzz", "nonexistent", "x"])
def test_unknown_ids_are_no_stored_entry_not_usage(make_coder, capsys, bad):
    coder = make_coder()
    for cmd in ("forget", "restore", "pin", "show"):
        coder.commands.run(f"/{cmd} {bad}")
        out = out_of(capsys)
        assert f"No stored entry {bad}." in out, cmd
        assert "Usage" not in out, cmd
    coder.commands.run("/forget --undo zzzzzzzzzz")
    assert "No stored entry zzzzzzzzzz." in out_of(capsys)


def test_recall_of_an_absent_id_says_so(make_coder, capsys):
    coder = make_coder()
    coder.commands.run("/recall zzzzzzzzzz")
    assert "No stored entry zzzzzzzzzz." in out_of(capsys)
    coder.commands.run("/recall nothing matches this")
    assert "No close match for 'nothing matches this' in this session's store." in out_of(capsys)


def test_pin_refuses_a_forgotten_entry(logged, capsys):
    coder, log_id = logged
    coder.gardener.store.forget(log_id)
    coder.commands.cmd_pin(log_id)
    assert f"id={log_id} is forgotten" in out_of(capsys)
    assert not coder.gardener.store.get(log_id).pinned


def test_ids_complete_for_the_id_commands(logged):
    coder, log_id = logged
    assert log_id in coder.commands.get_completions("/forget")
    assert log_id in coder.commands.get_completions("/show")
    assert log_id not in (coder.commands.get_completions("/restore") or [])
    coder.gardener.store.forget(log_id)
    assert log_id in coder.commands.get_completions("/restore")


def test_a_recalled_block_without_a_record_is_never_stored(make_coder):
    """History the side table lost (e.g. restored chat history) holding a /recall --add block:
    it is recognised by its header, points at the entry it holds and is not stored again."""
    coder = make_coder()
    store = coder.gardener.open_store(coder)
    entry = store.ingest(LOG, Source(role="tool", command="cat import.log"))
    before = entry_count(store)
    coder.cur_messages += [
        dict(role="user", content=f"{RECALL_HEADER}\n\n--- id={entry.id} (log)\n{LOG}"),
        dict(role="assistant", content="Ok."),
    ]
    sync(coder.gardener, coder)
    meta = coder.gardener.meta(coder.cur_messages[-2])
    assert meta.kind == "recall" and meta.entry_id == entry.id and meta.stored
    assert entry_count(store) == before


def test_added_text_stays_verbatim_for_the_recent_turns_in_incremental_mode(logged_mode, llm):
    """The incremental view compiles everything before the last N turns; an added block is kept
    out of the compiled summary for as many requests as eviction keeps it."""
    coder, log_id = logged_mode("incremental", recent_turns=2)
    coder.commands.cmd_recall(f"{log_id} --add")
    verbatim = []
    for turn in range(4):
        llm.replies = [f"answer {turn}"]
        coder.run(with_message=f"question {turn} about row 1499")
        verbatim.append(LOG.rstrip() in text_of(llm.last))
    assert verbatim == [True, True, False, False]


@pytest.fixture
def logged_mode(make_coder, repo):
    def make(mode: str, **options):
        (repo / "import.log").write_text(LOG)
        coder = make_coder("ask", mode=mode, max_output=300, **options)
        coder.commands.cmd_run("cat import.log")
        for turn in range(3):  # enough turns before it that the view compiles a summary
            coder.cur_messages += [
                dict(role="user", content=f"earlier {turn}"),
                dict(role="assistant", content=f"reply {turn}"),
            ]
        return coder, coder.gardener.meta(coder.cur_messages[-8]).entry_id

    return make


DEPLOY = "The deploy failed because the database connection was refused."
DEPLOY_QUERY = "release crashed, the db rejected every login"  # no word in common, cosine 0.51


def _stored_and_embedded(folder) -> str:
    """A project store from an earlier session, everything embedded: the target's id."""
    from aider_gardener.store import Store
    from aider_gardener.types import ContentClass

    with Store(folder, vectors=True) as earlier:
        # first: a turn is embedded with the turn it answers, which would dilute a one-line
        # paraphrase to the relevance floor (cosine 0.39 instead of 0.51, store/floor.py)
        target = earlier.ingest(DEPLOY, Source(role="user"), cls=ContentClass.PROSE).id
        for text in ("Lunch is at noon on Fridays.", "Rename parse to parse_int in app.py."):
            earlier.ingest(text, Source(role="user"), cls=ContentClass.PROSE)
        earlier.drain(300)  # what the worker thread has not embedded yet
        assert not earlier.pending_chunks(10)  # everything embedded
        assert recall(earlier, DEPLOY_QUERY, limit=3, mode="fts") == []
    return target


def test_a_first_recall_after_the_model_loaded_searches_by_meaning(
    make_coder, capsys, tmp_path, monkeypatch
):
    """The session preloads the model at start but opens its store at first use: a /recall
    before any message opened the store then and found nothing by meaning, however long the
    user had waited (found trying --gardener-embedder in a terminal)."""
    import threading

    from aider_gardener.store import embeddings
    from aider_gardener.store.worker import EmbeddingWorker

    target = _stored_and_embedded(tmp_path / "store")
    embeddings.load()  # what the start-up preload has done by now
    # the new store's worker has not opened chromadb yet when the /recall comes (in a real
    # terminal that took ~3 s): hold it back until the recall is done
    gate = threading.Event()
    real = EmbeddingWorker._warm
    monkeypatch.setattr(EmbeddingWorker, "_warm", lambda self: (gate.wait(30), real(self))[1])
    coder = make_coder(vectors=True)
    assert coder.gardener.store is None  # nothing sent yet: /recall opens it
    capsys.readouterr()
    try:
        coder.commands.cmd_recall(DEPLOY_QUERY)
    finally:
        gate.set()
    out = capsys.readouterr().out
    assert target in out and "full text only" not in out


def test_a_recall_while_the_model_loads_says_it_searched_full_text_only(
    make_coder, capsys, tmp_path, monkeypatch
):
    from aider_gardener.store import embeddings

    _stored_and_embedded(tmp_path / "store")
    monkeypatch.setattr(embeddings, "loaded", lambda: False)  # still loading (seconds)
    coder = make_coder(vectors=True)
    capsys.readouterr()
    coder.commands.cmd_recall(DEPLOY_QUERY)
    out = " ".join(capsys.readouterr().out.split())
    assert (
        f"No close match for {DEPLOY_QUERY!r} in this session's store by full text only (the"
        " embedding model is still loading)." in out
    )


KEY = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz" * 3


@pytest.fixture
def keyed(make_coder, repo, capsys):
    """A stored /run output whose error line printed an API key."""
    (repo / "deploy.log").write_text(
        "deploying web-7\n" * 30 + f"AuthenticationError: Incorrect API key provided: {KEY}\n"
    )
    first = make_coder()
    first.commands.cmd_run("cat deploy.log")
    meta = first.gardener.meta(first.cur_messages[-2])
    assert meta.stored
    first.gardener.close()
    capsys.readouterr()
    return make_coder(), meta.entry_id  # the next session: not in its chat


def test_recall_add_redacts_secrets_and_says_so(keyed, capsys):
    coder, eid = keyed
    coder.commands.cmd_recall(f"{eid} --add")
    out = " ".join(out_of(capsys).split())
    added = coder.cur_messages[-2]["content"]
    assert added.startswith(RECALL_HEADER) and "AuthenticationError" in added
    assert KEY not in added and "[redacted: " in added
    assert "Secrets in it were redacted in the chat; /show ID prints the original" in out


def test_show_prints_the_secret_to_the_user_and_says_it_is_one(keyed, capsys):
    coder, eid = keyed
    coder.commands.cmd_show(eid)
    out = out_of(capsys)
    assert KEY in "".join(out.split())  # the user's own screen: the original (wrapped), whole
    out = " ".join(out.split())
    assert "Contains a secret (OpenAI key): shown to you only" in out
    assert f"/forget {eid} takes it out of recall" in out


def test_recall_names_a_dead_chroma_server_as_why_it_searched_full_text_only(
    make_coder, repo, capsys
):
    """Not "the vector index is unavailable": the URL nothing answers at."""
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # nothing listens there once closed
    (repo / "import.log").write_text(LOG)
    coder = make_coder(vectors=True, chroma_url=url)
    coder.commands.cmd_run("cat import.log")
    index = coder.gardener.store.vectors
    deadline = time.monotonic() + 120
    while index.healthy and time.monotonic() < deadline:
        time.sleep(0.1)
    capsys.readouterr()
    coder.commands.cmd_recall("KangarooOverflow")
    out = " ".join(out_of(capsys).split())
    assert f"Searched by full text only (the Chroma server at {url} does not answer" in out


# --- issue 23: /forget reaches the chat, recall lists close matches only, one-line headers ------


def _contents(coder) -> str:
    return "\n".join(str(m.get("content")) for m in coder.done_messages + coder.cur_messages)


def _roles_alternate(coder) -> bool:
    roles = [m["role"] for m in coder.done_messages + coder.cur_messages]
    return all(a != b for a, b in zip(roles, roles[1:]))


def test_forget_takes_the_copy_in_the_chat_out_and_says_how_much(logged, capsys):
    """The log's summary was in the chat after /forget, and nothing said so."""
    coder, log_id = logged
    meta = coder.gardener.meta(coder.cur_messages[-2])
    assert f"id={log_id}" in _contents(coder)
    coder.commands.cmd_forget(log_id)
    out = " ".join(out_of(capsys).split())
    assert f"Forgot id={log_id}: removed from the store and from the chat" in out
    assert f"({meta.tokens_now + 2:,} tokens)" in out  # the summary and its "Ok."
    assert f"id={log_id}" not in _contents(coder) and "ZebraTimeout" not in _contents(coder)
    assert _roles_alternate(coder)
    assert log_id not in coder.gardener.entries_in_history()


def test_forget_of_a_prompt_leaves_a_note_in_its_turn(make_coder, llm, capsys):
    coder = make_coder()
    llm.replies = ["Noted: the rotation plan for Kestrel moves staging keys every Monday at nine."]
    coder.run(with_message="remember the staging password rotation plan for Kestrel")
    meta = next(
        coder.gardener.meta(m)
        for m in coder.done_messages + coder.cur_messages
        if "Kestrel" in str(m.get("content")) and coder.gardener.meta(m)
    )
    entry_id = meta.entry_id
    assert entry_id
    capsys.readouterr()
    coder.commands.cmd_forget(entry_id)
    out = out_of(capsys)
    assert "removed from the store and from the chat" in out
    assert "remember the staging" not in _contents(coder)
    assert f"[removed from the chat by /forget: id={entry_id}]" in _contents(coder)
    assert _roles_alternate(coder)


def test_forget_says_when_the_chat_did_not_hold_it(make_coder, capsys):
    coder = make_coder()
    store = coder.gardener.open_store(coder)
    entry = store.ingest(OTHER, Source(role="tool", command="cat notes.txt"))
    coder.commands.cmd_forget(entry.id)
    assert f"Forgot id={entry.id}: removed from the store; the chat did not hold it." in " ".join(
        out_of(capsys).split()
    )


def test_forget_inside_a_recalled_block_with_other_entries_says_it_stays(logged, capsys):
    coder, log_id = logged
    other = coder.gardener.store.ingest(OTHER, Source(role="tool", command="cat deploy.md"))
    coder.commands.cmd_recall(f"{other.id} {log_id} --add")
    assert "Added id=" in out_of(capsys)
    coder.commands.cmd_forget(other.id)
    out = " ".join(out_of(capsys).split())
    assert f"Forgot id={other.id} in the store; the chat keeps it" in out
    assert "until it is evicted (/clear removes it now)" in out
    assert len(out.splitlines()) == 1


def test_recall_does_not_list_hits_below_the_floor(logged, monkeypatch, capsys):
    """``/recall checksum`` listed the five nearest prompts: vector neighbours are not
    matches."""
    from aider_gardener.store.recall import RecallHit

    coder, log_id = logged
    far = RecallHit(log_id, "log", 0.2, "summary", None, 0.0, via="vector", similarity=0.05)
    monkeypatch.setattr(commands_recall, "recall", lambda *a, **k: [far])
    coder.commands.cmd_recall("checksum")
    out = out_of(capsys)
    assert out.strip() == "No close match for 'checksum' in this session's store."
    near = RecallHit(log_id, "log", 0.2, "summary", None, 0.0, via="vector", similarity=0.9)
    monkeypatch.setattr(commands_recall, "recall", lambda *a, **k: [near])
    coder.commands.cmd_recall("checksum")
    assert log_id in out_of(capsys)


def test_a_hit_header_is_one_terminal_line(make_coder, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    coder = make_coder()
    store = coder.gardener.open_store(coder)
    command = "\n".join(f"./deploy.sh --region eu-west-{i} --flag-{i}=value" for i in range(20))
    assert len(command) > 700
    entry = store.ingest(
        "deploy ok: WombatCache warmed\n" * 3, Source(role="tool", command=command)
    )
    coder.commands.cmd_recall("WombatCache")
    lines = out_of(capsys).splitlines()
    header = next(line for line in lines if line.startswith(entry.id))
    assert len(header) <= 79 and header.endswith("…")
    assert lines[lines.index(header) + 1].lstrip().startswith("1: deploy ok")


def test_near_copies_are_one_hit_that_names_the_others(make_coder, capsys):
    """The same failing run after each attempt is listed once, with the ids of its copies."""
    coder = make_coder()
    store = coder.gardener.open_store(coder)
    run = "FAILED tests/test_cart.py::test_empty_cart - QuokkaDivision\n== 1 failed in 0.{}s\n"
    ids = [store.ingest(run.format(n), Source(role="tool", command="pytest")).id for n in (1, 2, 3)]
    other = store.ingest("QuokkaDivision is guarded in cart.py now.\n", Source(role="assistant"))
    coder.commands.cmd_recall("QuokkaDivision")
    lines = out_of(capsys).splitlines()
    # a header, or a part of the reply's exchange (the run it answers) under it
    headers = [
        line.split()[0] if not line[0].isspace() else line.split()[2]
        for line in lines
        if line and (not line[0].isspace() or line.startswith("  + "))
    ]
    listed = [h for h in headers if h in ids]
    assert len(listed) == 1 and other.id in headers
    copies = next(line for line in lines if "near-cop" in line)
    assert copies.strip().startswith("(and 2 near-copies: ") and copies.strip().endswith(")")
    named = copies.strip()[len("(and 2 near-copies: ") : -1].split()
    assert sorted(named) == sorted(set(ids) - set(listed))


def test_recall_shows_a_prompt_and_its_reply_as_one_hit(make_coder, llm, capsys):
    """The two halves of an exchange both match; /recall lists them as one hit, the other half
    indented under it with its id (``store/exchanges.py``)."""
    coder = make_coder()
    llm.replies = [
        "The Kestrel rotation moves staging keys every Monday at nine.\nAsk me to change it."
    ]
    coder.run(with_message="what is the Kestrel rotation plan for staging keys?")
    sync(coder.gardener, coder)  # the reply is stored as the next turn would store it
    store = coder.gardener.store
    ids = {e.role: e.id for e in store.get_entries(_all_ids(store)).values()}
    assert {"user", "assistant"} <= set(ids)
    capsys.readouterr()
    coder.commands.cmd_recall("Kestrel rotation staging keys")
    out = out_of(capsys)
    headers = [line for line in out.splitlines() if ids["user"] in line or ids["assistant"] in line]
    assert len(headers) == 2, out
    top, half = headers
    assert not top.startswith(" ")
    assert half.startswith("  + reply: ") or half.startswith("  + asked: "), out


def _all_ids(store) -> list[str]:
    return [r[0] for r in store.read(lambda c: c.execute("SELECT id FROM entries").fetchall())]


def test_recall_add_puts_the_whole_exchange_back_oldest_first(make_coder, llm, capsys):
    coder = make_coder()
    llm.replies = ["The Kestrel rotation moves staging keys every Monday.\nAsk me to change it."]
    coder.run(with_message="what is the Kestrel rotation plan for staging keys?")
    sync(coder.gardener, coder)
    store = coder.gardener.store
    ids = {e.role: e.id for e in store.get_entries(_all_ids(store)).values()}
    coder.commands.cmd_clear("")  # neither part is in the chat any more
    sync(coder.gardener, coder)
    capsys.readouterr()
    coder.commands.cmd_recall("Kestrel rotation staging keys --add")
    out = out_of(capsys)
    added = [line for line in out.splitlines() if line.startswith("Added id=")]
    assert [line.split()[1] for line in added] == [
        f"id={ids['user']}",
        f"id={ids['assistant']}",
    ], out
    assert "Monday" in _contents(coder) and "what is the Kestrel" in _contents(coder)
