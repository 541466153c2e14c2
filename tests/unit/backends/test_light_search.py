"""The light query path: ``import sbert`` and ``sbert search`` on an ONNX-built index load neither torch nor
transformers, and give the same vectors and hits as the full path (not timed: benchmarks/cold_start.py is)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sbert.search import exact

SRC = str(Path(__file__).resolve().parents[3] / "src")
HEAVY = ("torch", "transformers")
TEXTS = [
    "A man is playing a guitar.",
    "A woman slices an onion.",
    "The cat sleeps on the sofa.",
    "Children play football in the park.",
    "A chef cooks pasta in a kitchen.",
    "Someone plays the piano on stage.",
    "The dog runs along the beach.",
    "A plane takes off from the airport.",
]


def _python(code: str, **env: str) -> str:
    """Run ``code`` in a fresh interpreter (this checkout's sources first); its stdout."""
    environ = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), **env}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_sbert_loads_neither_torch_nor_transformers():
    out = _python(
        "import sys, sbert, sbert.cli, sbert.search, sbert.search.retrieve, sbert.search.index.folder\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    assert out.strip() == "[]"


def test_numpy_exact_search_equals_the_torch_one():
    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((700, 24)).astype(np.float32)
    corpus[10] = corpus[3]  # a tie: the lower row comes first
    queries = np.vstack([corpus[3], rng.standard_normal((4, 24)).astype(np.float32)])
    light = exact._numpy_search(queries, corpus, 12, 2, 256)
    full = exact.semantic_search(queries, corpus, 12, score="dot", query_chunk_size=3, corpus_chunk_size=300)
    np.testing.assert_array_equal(light.indices, full.indices)
    np.testing.assert_array_equal(light.scores, full.scores)
    assert list(light.indices[0][:2]) == [3, 10]


@pytest.fixture(scope="module")
def onnx_index(tmp_path_factory):
    """A tiny model saved to a folder and an index of TEXTS built with it on the ONNX backend."""
    pytest.importorskip("onnxruntime")
    from conftest import make_tiny_encoder

    from sbert.search.retrieve import build_index

    root = tmp_path_factory.mktemp("light")
    encoder = make_tiny_encoder(dropout=0.0)
    encoder.save(root / "model")
    encoder = __import__("sbert").load(root / "model", device="cpu", backend="onnx")
    build_index(root / "index", encoder, TEXTS, model=str(root / "model"))
    return root, encoder


def _search_in_subprocess(index: Path, *args: str, **env: str) -> tuple[list, list[str]]:
    code = (
        "import json, sys\n"
        "from sbert.cli import main\n"
        f"main(['search', {str(index)!r}, 'a guitar player', 'cooking food', '-k', '3', '--json', *{args!r}], "
        "standalone_mode=False)\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    *hits, loaded = _python(code, **env).strip().rsplit("\n", 1)
    return json.loads("\n".join(hits)), json.loads(loaded)


@pytest.mark.slow
def test_search_on_an_onnx_index_imports_neither_torch_nor_transformers(onnx_index):
    root, _ = onnx_index
    assert (root / "index" / "query-encoder.json").is_file()
    light, loaded = _search_in_subprocess(root / "index")
    assert loaded == []
    full, loaded_full = _search_in_subprocess(root / "index", "--backend", "onnx", SBERT_NO_LIGHT_SEARCH="1")
    assert "torch" in loaded_full  # the full path really is the other one
    assert [[h["id"] for h in q["hits"]] for q in light] == [[h["id"] for h in q["hits"]] for q in full]
    for a, b in zip(light, full, strict=True):
        np.testing.assert_allclose([h["score"] for h in a["hits"]], [h["score"] for h in b["hits"]], atol=1e-6)


@pytest.mark.slow
def test_light_query_vectors_equal_the_onnx_encoders(onnx_index):
    from sbert.backends.onnx_query import light_query_encoder
    from sbert.search.retrieve import open_index

    root, encoder = onnx_index
    light = light_query_encoder(open_index(root / "index"))
    assert light is not None and light.runtime == "onnx/fp32"
    queries = ["a guitar player", "cooking food in a big kitchen", "x"]
    np.testing.assert_allclose(light.encode_query(queries), encoder.encode_query(queries), atol=1e-6, rtol=0)
    assert light.accepts(queries) and not light.accepts(["   "])
    assert not light.accepts(["word " * 100])  # cut at the model's 32 tokens: the full path warns


@pytest.mark.slow
def test_stale_or_missing_records_fall_back_to_the_full_path(onnx_index, tmp_path):
    import shutil

    from sbert.backends.onnx_query import light_query_encoder
    from sbert.search.retrieve import build_index, open_index

    root, _ = onnx_index
    copy = tmp_path / "index"
    shutil.copytree(root / "index", copy)
    spec = json.loads((copy / "query-encoder.json").read_text())
    spec["onnx"]["sha256"] = "0" * 64  # the export was rebuilt since
    (copy / "query-encoder.json").write_text(json.dumps(spec))
    assert light_query_encoder(open_index(copy)) is None
    torch_encoder = __import__("sbert").load(root / "model", device="cpu")
    build_index(copy, torch_encoder, TEXTS, model=str(root / "model"), overwrite=True)
    assert not (copy / "query-encoder.json").exists() and light_query_encoder(open_index(copy)) is None
