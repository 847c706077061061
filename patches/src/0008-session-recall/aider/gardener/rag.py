"""Session recall: before each request, put back the stored context relevant to it.

Eviction keeps the prompt small by taking things out; recall returns the few that matter for
*this* request, such as an error from twenty turns ago that the history now holds only as a
summary, or not at all. ``SessionRecall(store)`` is the ``context_recall`` callable
``--context-recall`` installs. Hits whose original or id is already in the prompt are skipped.
The result is one user/assistant pair at the end of the history chunk, in a new list: the
coder's ``done_messages`` is never changed.
"""

import math

from .store.query import query_terms
from .store.recall import recall
from .tokens import count_tokens

CANDIDATES = 8
MAX_HITS = 3
# Full-text recall ORs the query's words, so a text sharing one common word with the request
# is a "hit"; one found by full text alone must contain this share of the query's terms.
MIN_TERM_SHARE = 0.5

HEADER = "Context recalled from earlier in this session (it may or may not be relevant):"
REPLY = "Ok, I will use that context if it is relevant."


class SessionRecall:
    def __init__(self, store, budget=1024, max_hits=MAX_HITS):
        self.store = store
        self.budget = budget
        self.max_hits = max_hits

    def __call__(self, coder, chunks, query):
        done = chunks.done
        if done and done[-1].get("role") != "assistant":
            return []  # the pair would break the user/assistant alternation
        pair, ids = self.recall_pair(chunks, query, coder.main_model.name)
        if pair:
            chunks.done = list(done) + pair
        return ids

    def recall_pair(self, chunks, query, model):
        hits = recall(self.store, query, limit=CANDIDATES)
        if not hits:
            return [], []
        prompt = "\n".join(
            m["content"] for m in chunks.all_messages() if isinstance(m.get("content"), str)
        )
        terms = list(dict.fromkeys(t.lower() for t in query_terms(query)))
        entries = self.store.get_entries([hit.entry_id for hit in hits])
        used = count_tokens(HEADER, model) + count_tokens(REPLY, model)
        blocks, ids = [], []
        for rank, hit in enumerate(hits):
            if len(ids) >= self.max_hits:
                break
            entry = entries.get(hit.entry_id)
            original = entry.original if entry is not None else hit.text
            if hit.entry_id in prompt or original.strip() in prompt:
                continue
            if not relevant(hit, rank, terms, original):
                continue
            block = f"--- id={hit.entry_id} ({hit.cls})\n{hit.text.strip()}"
            cost = count_tokens(block, model)
            if used + cost > self.budget:
                continue
            used += cost
            blocks.append(block)
            ids.append(hit.entry_id)
        if not blocks:
            return [], []
        user = HEADER + "\n\n" + "\n\n".join(blocks)
        return [dict(role="user", content=user), dict(role="assistant", content=REPLY)], ids


def relevant(hit, rank, terms, text):
    via = getattr(hit, "via", "") or "fts"
    if "fts" in via and "vector" in via:
        return True
    low = text.lower()
    shared = sum(1 for term in terms if term in low)
    if "fts" not in via:
        return shared >= 1 or rank == 0
    needed = max(1, min(len(terms), math.ceil(MIN_TERM_SHARE * len(terms))))
    return shared >= needed
