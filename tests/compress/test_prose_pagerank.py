"""The prose compressor's TextRank computes networkx's PageRank itself (networkx's graph and
matrix building cost half the compressor's time): the scores must be networkx's, bit for bit,
or summaries would change."""

import random

import networkx as nx

from aider_gardener.compress import prose


def _networkx_scores(vectors, df):
    """The code this module had before: edge weights from shared words, then networkx."""
    postings = {}
    for i, vec in enumerate(vectors):
        for w in vec:
            if df[w] <= prose.MAX_EDGE_DF:
                postings.setdefault(w, []).append(i)
    weights = {}
    for w, ids in postings.items():
        for a_pos, a in enumerate(ids):
            for b in ids[a_pos + 1 :]:
                weights[(a, b)] = weights.get((a, b), 0.0) + vectors[a][w] * vectors[b][w]
    graph = nx.Graph()
    graph.add_nodes_from(range(len(vectors)))
    graph.add_weighted_edges_from((a, b, w) for (a, b), w in weights.items() if w > 0)
    if graph.number_of_edges() == 0:
        return [0.0] * len(vectors)
    ranks = nx.pagerank(graph, weight="weight", max_iter=200, tol=1e-6)
    return [ranks[i] for i in range(len(vectors))]


def _vectors(rng, n, vocab):
    vectors = []
    for _ in range(n):
        words = rng.sample(vocab, rng.randint(1, 6))
        vectors.append({w: rng.random() for w in words})
    df = {}
    for vec in vectors:
        for w in vec:
            df[w] = df.get(w, 0) + 1
    return vectors, df


def test_scores_are_networkx_pagerank_exactly():
    rng = random.Random(7)
    for n in (1, 2, 5, 17, 60, 240, 700):
        vocab = [f"w{i}" for i in range(max(8, n // 2))]
        vectors, df = _vectors(rng, n, vocab)
        assert prose._pagerank(vectors, df) == _networkx_scores(vectors, df)


def test_isolated_units_and_no_edges():
    vectors = [{"a": 1.0}, {"b": 1.0}, {"a": 0.5}]
    df = {"a": 2, "b": 1}
    scores = prose._pagerank(vectors, df)
    assert scores == _networkx_scores(vectors, df)
    assert scores[1] < scores[0]  # the unit linked to nothing ranks lowest
    assert prose._pagerank([{"a": 1.0}, {"b": 1.0}], {"a": 1, "b": 1}) == [0.0, 0.0]
