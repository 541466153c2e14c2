"""LoRA adapters: only the adapter trains, its folder rebuilds the model (sbert and sentence-transformers alike),
merge folds it in, a missing or crafted base is refused, and an index tells adapters apart."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import make_tiny_encoder

import sbert
from sbert.adapt import AdaptSettings, adapt
from sbert.adapters import LoraSettings, adapter_record, add_lora, is_adapter, merge
from sbert.cli import main
from sbert.data.beir import Document
from sbert.errors import IndexMismatchError, ModelFormatError, ModelNotFoundError
from sbert.model_names import resolve
from sbert.training import TrainingInterrupted

pytest.importorskip("peft")
pytestmark = pytest.mark.slow  # loads models and trains

TEXTS = ["calc crashes when saving", "the printer hangs on a page", "writer shows the wrong font"]
WORDS = "printer calc writer crash hang slow font table chart save load print page cell sheet".split()  # noqa: SIM905


def _corpus(tmp_path: Path) -> Path:
    """A BEIR corpus of 24 titled documents of random words."""
    rng = random.Random(0)
    folder = tmp_path / "corpus"
    folder.mkdir()
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as handle:
        for i in range(24):
            doc = Document(str(i), " ".join(rng.sample(WORDS, 3)), " ".join(rng.choices(WORDS, k=20)))
            handle.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    return folder


def _tiny_base(tmp_path: Path) -> Path:
    base = tmp_path / "base"
    if not base.is_dir():
        make_tiny_encoder().save(base)
    return base


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _trained_adapter(base: str | Path, out: Path, seed: int = 0, **shape) -> sbert.Encoder:
    """``base`` with a LoRA adapter whose B matrices are random (as if trained), saved to ``out``."""
    encoder = add_lora(sbert.load(base, device="cpu"), LoraSettings(**shape), str(base))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in encoder.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.05)
    encoder.save(out)
    return encoder


def test_adapt_lora_trains_only_the_adapter_and_leaves_the_base_byte_for_byte(tmp_path):
    base = _tiny_base(tmp_path)
    weights_before = _sha256(base / "model.safetensors")
    settings = AdaptSettings(steps=3, batch_size=4, lr=1e-3, lora=LoraSettings(rank=4, alpha=8))
    adapt(base, _corpus(tmp_path), tmp_path / "adapted", settings, device="cpu", progress=False)

    out = tmp_path / "adapted"
    assert {"adapter_config.json", "adapter_model.safetensors", "modules.json", "1_Pooling"} <= {
        p.name for p in out.iterdir()
    }
    assert not (out / "model.safetensors").exists() and not (out / "config.json").exists()
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == str(base.resolve())
    assert _sha256(base / "model.safetensors") == weights_before

    adapted, plain = sbert.load(out, device="cpu"), sbert.load(base, device="cpu")
    assert is_adapter(adapted) and not is_adapter(plain)
    base_weights = plain.transformer.model.state_dict()
    lora, kept = {}, {}
    for name, tensor in adapted.transformer.model.state_dict().items():
        (lora if "lora_" in name else kept)[name] = tensor
    original = {name.removeprefix("base_model.model.").replace(".base_layer", ""): t for name, t in kept.items()}
    assert original.keys() == base_weights.keys()
    for name, tensor in original.items():
        assert torch.equal(tensor, base_weights[name]), name  # exactly the base's
    assert any(bool(t.abs().sum()) for n, t in lora.items() if "lora_B" in n)  # B starts at 0: it trained
    assert not np.allclose(adapted.encode(TEXTS), plain.encode(TEXTS))


@pytest.mark.parametrize("extra", [{}, {"use_dora": True}, {"lora_bias": True}], ids=["plain", "dora", "bias-on-B"])
def test_the_fused_lora_sum_equals_peft_forward_and_gradients(extra):
    from peft import LoraConfig, get_peft_model
    from peft.tuners.lora import Linear as LoraLinear

    from sbert.modules.lora import fuse

    def output_and_grads(model, batch):
        model.zero_grad()
        output = model(**batch).last_hidden_state
        (output * torch.linspace(-1, 1, output.numel()).view(output.shape)).sum().backward()
        return output.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}

    encoder = make_tiny_encoder(dropout=0.0)
    batch = encoder.transformer.collate(encoder.transformer.tokenize(TEXTS)[0])
    with torch.no_grad():
        plain = encoder.transformer.model(**batch).last_hidden_state
    config = LoraConfig(
        r=4, lora_alpha=8, target_modules=["query", "value", "dense"], exclude_modules=["pooler.dense"], **extra
    )
    peft_model = get_peft_model(encoder.transformer.model, config)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    reference = output_and_grads(peft_model, batch)
    fuse(peft_model)
    layers = [m for m in peft_model.modules() if isinstance(m, LoraLinear)]
    assert layers and all(m.forward.__func__.__name__ == "_fused_forward" for m in layers)
    fused = output_and_grads(peft_model, batch)
    torch.testing.assert_close(fused[0], reference[0], rtol=0, atol=1e-5)
    assert fused[1].keys() == reference[1].keys() and any("lora_A" in n for n in fused[1])
    for name, grad in reference[1].items():
        torch.testing.assert_close(fused[1][name], grad, rtol=1e-4, atol=1e-5, msg=name)
    with peft_model.disable_adapter(), torch.no_grad():  # PEFT's own forward where it does more: the base alone
        torch.testing.assert_close(peft_model(**batch).last_hidden_state, plain, rtol=0, atol=1e-6)
    assert not torch.allclose(peft_model(**batch).last_hidden_state, plain, atol=1e-3)


def test_an_adapter_folder_is_small_and_loads_back_equal(tmp_path, model):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. peft looking the base up online
        encoder = _trained_adapter("default", tmp_path / "tracker-a")
    folder = tmp_path / "tracker-a"
    assert sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) <= 5 * 2**20  # the base is 87 MB
    config = json.loads((folder / "adapter_config.json").read_text())
    assert (config["base_model_name_or_path"], config["r"], config["lora_alpha"]) == (
        "sentence-transformers/all-MiniLM-L6-v2",
        16,
        32.0,
    )
    loaded = sbert.load(folder, device="cpu")
    np.testing.assert_allclose(loaded.encode(TEXTS), encoder.encode(TEXTS), atol=1e-6)
    assert not np.allclose(loaded.encode(TEXTS), model.encode(TEXTS), atol=1e-3)


def test_sentence_transformers_loads_the_adapter_with_equal_embeddings(tmp_path):
    from sentence_transformers import SentenceTransformer

    by_name = _trained_adapter("default", tmp_path / "by-name")
    reference = SentenceTransformer(str(resolve("default")), device="cpu")
    reference.load_adapter(str(tmp_path / "by-name"))  # the base plus load_adapter
    np.testing.assert_allclose(reference.encode(TEXTS), by_name.encode(TEXTS), atol=1e-5)

    by_folder = _trained_adapter(resolve("default"), tmp_path / "by-folder", seed=1)
    whole = SentenceTransformer(str(tmp_path / "by-folder"), device="cpu", local_files_only=True)  # the folder alone
    np.testing.assert_allclose(whole.encode(TEXTS), by_folder.encode(TEXTS), atol=1e-5)


def test_merge_equals_the_adapter_and_writes_a_whole_model(tmp_path):
    base = _tiny_base(tmp_path)
    encoder = _trained_adapter(base, tmp_path / "adapter", rank=4)
    merged = merge(encoder)
    assert not is_adapter(merged) and is_adapter(encoder)  # the adapter model is left as it was
    np.testing.assert_allclose(merged.encode(TEXTS), encoder.encode(TEXTS), atol=1e-5)

    result = CliRunner().invoke(main, ["merge", str(tmp_path / "adapter"), "--out", str(tmp_path / "merged")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "merged" / "model.safetensors").is_file()
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    np.testing.assert_allclose(sbert.load(tmp_path / "merged").encode(TEXTS), encoder.encode(TEXTS), atol=1e-5)
    refused = CliRunner().invoke(main, ["merge", str(tmp_path / "merged"), "--out", str(tmp_path / "again")])
    assert refused.exit_code == 1 and "holds no adapter" in refused.output


def test_onnx_runs_an_adapter_model_merged(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("SBERT_CACHE", str(tmp_path / "cache"))
    encoder = _trained_adapter(_tiny_base(tmp_path), tmp_path / "adapter", rank=4)
    expected = encoder.encode(TEXTS)
    onnx = sbert.load(tmp_path / "adapter", backend="onnx")
    np.testing.assert_allclose(onnx.encode(TEXTS), expected, atol=1e-5)
    int8 = sbert.load(tmp_path / "adapter", backend="onnx", precision="int8").encode(TEXTS)
    assert int8.shape == expected.shape and np.all(np.sum(int8 * expected, axis=1) > 0.9)


def test_a_missing_base_is_one_line_naming_it(tmp_path):
    base = tmp_path / "gone"
    make_tiny_encoder().save(base)
    _trained_adapter(base, tmp_path / "adapter", rank=2)
    base.rename(tmp_path / "moved")
    with pytest.raises(ModelNotFoundError) as missing:
        sbert.load(tmp_path / "adapter")
    assert str(base.resolve()) in str(missing.value) and "\n" not in str(missing.value)
    result = CliRunner().invoke(main, ["info", str(tmp_path / "adapter")])
    assert result.exit_code == 1 and str(base.resolve()) in result.output and len(result.output.splitlines()) == 1


def _edit_config(folder: Path, **changes) -> None:
    file = folder / "adapter_config.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), **changes}))


def test_crafted_adapter_folders_are_refused_naming_the_field(tmp_path, monkeypatch):
    base = _tiny_base(tmp_path)
    _trained_adapter(base, tmp_path / "adapter", rank=2)
    folder = tmp_path / "adapter"
    cases = [
        ({"base_model_name_or_path": "../base"}, ModelFormatError, "neither a model name sbert knows"),
        ({"peft_type": "PREFIX_TUNING"}, ModelFormatError, "peft_type"),
        ({"layer_replication": [[0, 1]]}, ModelFormatError, "'layer_replication'"),
        ({"r": 3}, ModelFormatError, "adapter_model.safetensors"),  # weights of another shape
    ]
    original = (folder / "adapter_config.json").read_text()
    for changes, error, words in cases:
        (folder / "adapter_config.json").write_text(original)
        _edit_config(folder, **changes)
        with pytest.raises(error, match=words):
            sbert.load(folder)
    (folder / "adapter_config.json").write_text(original)
    monkeypatch.chdir(tmp_path)  # a relative path is refused even where it would lead to the base
    _edit_config(folder, base_model_name_or_path="base")
    with pytest.raises(ModelFormatError, match="relative path"):
        sbert.load(folder)


def test_an_index_refuses_another_adapter_and_accepts_the_same_one_moved(tmp_path):
    from sbert.search.index.folder import VectorIndex

    base = _tiny_base(tmp_path)
    a = _trained_adapter(base, tmp_path / "tracker-a", seed=1, rank=2)
    _trained_adapter(base, tmp_path / "tracker-b", seed=2, rank=2)
    index = VectorIndex.build(tmp_path / "ix", a.encode(TEXTS), model=str(tmp_path / "tracker-a"))
    recorded = index.manifest["adapter"]
    assert recorded == adapter_record(tmp_path / "tracker-a") and recorded["name"] == "tracker-a"
    assert recorded["base"] == str(base.resolve())
    index.check_model(tmp_path / "tracker-a", a.dim)
    for other, words in ((tmp_path / "tracker-b", "'tracker-b'"), (base, "no adapter")):
        with pytest.raises(IndexMismatchError, match=words):
            VectorIndex.open(tmp_path / "ix").check_model(other)
    (tmp_path / "tracker-a").rename(tmp_path / "copied")
    VectorIndex.open(tmp_path / "ix").check_model(tmp_path / "copied")  # the same weights, elsewhere

    _trained_adapter(base, tmp_path / "tracker-a", seed=3, rank=2)  # retrained into the same folder
    with pytest.raises(IndexMismatchError, match="weights changed"):
        VectorIndex.open(tmp_path / "ix").check_model(tmp_path / "tracker-a")


def _stop_at_2(step: int, loss: float) -> None:
    if step == 2:
        os.kill(os.getpid(), signal.SIGINT)


def test_an_interrupted_lora_adapt_resumes_to_the_same_adapter(tmp_path):
    base, corpus = _tiny_base(tmp_path), _corpus(tmp_path)
    settings = AdaptSettings(steps=4, batch_size=4, lr=1e-3, checkpoint_every=100, lora=LoraSettings(rank=2))
    adapt(base, corpus, tmp_path / "straight", settings, device="cpu", progress=False)
    with pytest.raises(TrainingInterrupted):
        adapt(base, corpus, tmp_path / "stopped", settings, device="cpu", progress=False, on_step=_stop_at_2)
    summary = adapt(base, corpus, tmp_path / "stopped", settings, resume=True, device="cpu", progress=False)
    assert summary["steps_run"] == 2
    from safetensors.torch import load_file

    straight, stopped = (load_file(tmp_path / n / "adapter_model.safetensors") for n in ("straight", "stopped"))
    assert straight.keys() == stopped.keys()
    for name in straight:
        torch.testing.assert_close(straight[name], stopped[name], rtol=0, atol=1e-6, msg=name)


def test_adapters_share_one_base_and_each_pass_runs_one_adapter(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from sbert.shared_base import SharedBase

    base = _tiny_base(tmp_path)
    own = {
        n: _trained_adapter(base, tmp_path / n, seed=s, rank=2).encode(TEXTS)
        for n, s in (("tracker-a", 1), ("tracker-b", 2))
    }
    own[None] = sbert.load(base).encode(TEXTS)
    shared = SharedBase.load(base, {n: tmp_path / n for n in ("tracker-a", "tracker-b")}, max_adapters=2)
    assert shared.names == ["tracker-a", "tracker-b"]
    memory = shared.memory()
    assert memory["adapters"]["tracker-a"] == memory["adapters"]["tracker-b"] > 0
    assert memory["base"] == sum(p.numel() * 4 for p in sbert.load(base).parameters())

    def encode(name):
        return name, shared.encoder(name).encode(TEXTS, batch_size=1)

    with ThreadPoolExecutor(4) as pool:  # the three, interleaved from four threads
        for name, vectors in pool.map(encode, [None, "tracker-a", "tracker-b"] * 8):
            np.testing.assert_allclose(vectors, own[name], atol=1e-6, err_msg=str(name))
    with pytest.raises(KeyError, match="the adapters are: tracker-a, tracker-b"):
        shared.encoder("c")
    with pytest.raises(ValueError, match="at most 2 adapters"):
        shared.add("tracker-c", tmp_path / "tracker-a")
    other = tmp_path / "other-base"
    make_tiny_encoder(seed=5).save(other)
    _trained_adapter(other, tmp_path / "elsewhere", rank=2)
    with pytest.raises(ValueError, match="made over"):
        SharedBase.load(base, {"x": tmp_path / "elsewhere"})
    short = SharedBase.load(base, {"a": tmp_path / "tracker-a"})  # a short name, even one inside "lora_"
    np.testing.assert_allclose(short.encoder("a").encode(TEXTS), own["tracker-a"], atol=1e-6)
    for bad in ("my_lora_x", "a.b", "tracker-a "):
        with pytest.raises(ValueError, match=f"adapter name {bad!r} is not usable"):
            short.add(bad, tmp_path / "tracker-b")


def test_passes_of_two_adapters_run_at_the_same_time_each_through_its_own(tmp_path):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from sbert.shared_base import SharedBase

    base = _tiny_base(tmp_path)
    names = ("tracker-a", "tracker-b")
    own = {n: _trained_adapter(base, tmp_path / n, seed=s, rank=2).encode(TEXTS) for s, n in enumerate(names, 1)}
    shared = SharedBase.load(base, {n: tmp_path / n for n in names})
    both_inside = threading.Barrier(2, timeout=20)  # passes only while both passes are inside the model at once
    last = shared.encoder("tracker-a").transformer.model.base_model.model.encoder.layer[-1]

    def meet(module, args) -> None:
        both_inside.wait()

    hook = last.register_forward_pre_hook(meet)
    try:
        with ThreadPoolExecutor(2) as pool:
            found = dict(zip(names, pool.map(lambda n: shared.encoder(n).encode(TEXTS), names), strict=True))
    finally:
        hook.remove()
    for name in names:
        np.testing.assert_allclose(found[name], own[name], atol=1e-6, err_msg=name)


def test_an_adapter_that_cannot_share_its_base_is_refused_and_the_rest_still_run(tmp_path):
    from sbert.shared_base import SharedBase

    base = _tiny_base(tmp_path)
    own = _trained_adapter(base, tmp_path / "tracker-a", seed=1, rank=2).encode(TEXTS)
    plain = sbert.load(base).encode(TEXTS)
    _trained_adapter(base, tmp_path / "dora", rank=2)
    config = json.loads((tmp_path / "dora" / "adapter_config.json").read_text())
    (tmp_path / "dora" / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    _trained_adapter(base, tmp_path / "embedding", rank=2, targets=("query", "word_embeddings"))
    refusals = {
        "dora": "it is a DoRA adapter",
        "embedding": "its layer embeddings.word_embeddings is not a plain LoRA linear layer",
    }
    for first in (True, False):  # refused as the first adapter over the base, and beside one
        shared = SharedBase.load(base, {} if first else {"tracker-a": tmp_path / "tracker-a"})
        for name, why in refusals.items():
            with pytest.raises(ValueError, match=f"{name}: cannot run over a shared base: {why}.*sbert merge"):
                shared.add(name, tmp_path / name)
        if first:
            shared.add("again", tmp_path / "tracker-a")
        np.testing.assert_allclose(shared.encoder(None).encode(TEXTS), plain, atol=1e-6)
        np.testing.assert_allclose(shared.encoder("again" if first else "tracker-a").encode(TEXTS), own, atol=1e-6)


def test_the_service_routes_each_request_to_its_adapter_and_lists_them(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from fastapi.testclient import TestClient

    from sbert.serve.app import create_app
    from sbert.serve.settings import EngineSettings
    from sbert.shared_base import SharedBase

    base = _tiny_base(tmp_path)
    names = ("tracker-a", "tracker-b")
    own = {n: _trained_adapter(base, tmp_path / n, seed=s, rank=2).encode(TEXTS) for s, n in enumerate(names)}
    own["base"] = sbert.load(base).encode(TEXTS)
    shared = SharedBase.load(base, {n: tmp_path / n for n in names})
    app = create_app(shared.encoder(None), model_name=str(base), adapters=shared, engine=EngineSettings(max_wait_ms=50))
    with TestClient(app) as client, ThreadPoolExecutor(6) as pool:
        asked = ["tracker-a", "tracker-b", "base"] * 2  # at once: the batcher waits 50 ms to merge them
        answers = pool.map(lambda name: client.post("/v1/embeddings", json={"model": name, "input": TEXTS}), asked)
        for name, answer in zip(asked, answers, strict=True):
            vectors = [row["embedding"] for row in answer.json()["data"]]
            np.testing.assert_allclose(vectors, own[name], atol=1e-5, err_msg=name)
            assert answer.json()["model"] == name
        unknown = client.post("/v1/embeddings", json={"model": "tracker-c", "input": TEXTS})
        assert unknown.status_code == 404 and "'tracker-a'" in unknown.json()["error"]["message"]
        listed = client.get("/v1/models").json()["data"]
    assert [m["id"] for m in listed] == ["base", *names]
    assert listed[1]["memory_bytes"] == shared.memory()["adapters"]["tracker-a"] > 0


def test_serving_an_index_finds_its_own_adapter_among_those_served(tmp_path):
    from sbert.search.index.folder import VectorIndex
    from sbert.serve.adapters import load_served, named_folders

    base = _tiny_base(tmp_path)
    a = _trained_adapter(base, tmp_path / "tracker-a", seed=1, rank=2)
    _trained_adapter(base, tmp_path / "tracker-b", seed=2, rank=2)
    index = VectorIndex.build(tmp_path / "ix", a.encode(TEXTS), model=str(tmp_path / "tracker-a"))
    served = named_folders([f"tracker-b={tmp_path / 'tracker-b'}", f"tracker-a={tmp_path / 'tracker-a'}"])
    shared, own = load_served(str(base), served, max_adapters=4, device="cpu", index=index)
    assert own == "tracker-a" and shared.names == ["tracker-b", "tracker-a"]
    with pytest.raises(ValueError, match="'tracker-a', which is not among the adapters served"):
        load_served(str(base), {"tracker-b": str(tmp_path / "tracker-b")}, max_adapters=4, index=index)
    with pytest.raises(ValueError, match="NAME=FOLDER"):
        named_folders(["tracker-a"])


def test_several_indexes_are_served_each_searched_with_its_own_adapter_and_named_by_the_search(tmp_path):
    from fastapi.testclient import TestClient

    from sbert.search.index.folder import VectorIndex
    from sbert.serve.adapters import open_adapter_service
    from sbert.serve.app import create_app

    base = _tiny_base(tmp_path)
    own = {}  # each adapter's cosines of the query to the texts, best first
    for seed, name in enumerate(("tracker-a", "tracker-b"), start=1):
        encoder = _trained_adapter(base, tmp_path / name, seed=seed, rank=2)
        texts = encoder.encode(TEXTS, normalize=True)
        VectorIndex.build(tmp_path / f"ix-{name}", texts, model=str(tmp_path / name), texts=TEXTS)
        query = encoder.encode_query(["a crash in calc"], normalize=True)[0]
        own[name] = sorted((texts @ query).tolist(), reverse=True)
    served = open_adapter_service(
        str(base), {n: str(tmp_path / n) for n in own}, index={n: str(tmp_path / f"ix-{n}") for n in reversed(own)},
        max_adapters=4, device="cpu",
    )  # fmt: skip
    assert served["index_adapter"] == {"tracker-b": "tracker-b", "tracker-a": "tracker-a"}
    served.pop("model_name")
    with TestClient(create_app(**served, model_name=str(base))) as client:
        for name, expected in own.items():
            found = client.post("/search", json={"index": name, "query": "a crash in calc", "k": 3}).json()
            scores = [hit["score"] for hit in found["results"][0]["hits"]]
            np.testing.assert_allclose(scores, expected, atol=1e-5, err_msg=name)
        assert not np.allclose(own["tracker-a"], own["tracker-b"], atol=1e-3)  # the adapters do differ
        unnamed = client.post("/search", json={"query": "calc"})
        assert unnamed.status_code == 400 and "several indexes ('tracker-b', 'tracker-a')" in unnamed.text
        unknown = client.post("/search", json={"index": "tracker-c", "query": "calc"})
        assert unknown.status_code == 404 and "'tracker-c' is not served here: it serves 'tracker-b'" in unknown.text
        listed = client.get("/info").json()
        assert listed["index"] is None
        assert {n: (i["size"], i["adapter"]) for n, i in listed["indexes"].items()} == {n: (3, n) for n in own}


def test_index_options_are_one_unnamed_location_or_each_named():
    from sbert.serve.adapters import named_indexes

    assert named_indexes([]) is None
    assert named_indexes(["ix"]) == "ix"
    assert named_indexes(["postgresql://db/x?sslmode=require#t"]) == "postgresql://db/x?sslmode=require#t"
    assert named_indexes(["a=ix-a", "b.2=postgresql://db/x?c=d"]) == {"a": "ix-a", "b.2": "postgresql://db/x?c=d"}
    with pytest.raises(ValueError, match="'ix-b': several indexes are served by name, as NAME=LOCATION"):
        named_indexes(["a=ix-a", "ix-b"])
    with pytest.raises(ValueError, match="index name 'a' is given twice"):
        named_indexes(["a=ix-a", "a=ix-b"])


def test_an_adapter_trains_at_its_own_default_learning_rate_unless_one_is_given():
    from sbert.adapt.recipe import LR, _train_config
    from sbert.adapters import LORA_LR

    assert (LR, LORA_LR) == (2e-5, 3e-4)
    assert _train_config(AdaptSettings(), 3200, False).lr == LR
    assert _train_config(AdaptSettings(lora=LoraSettings()), 3200, False).lr == LORA_LR
    assert _train_config(AdaptSettings(lr=3e-5, lora=LoraSettings()), 3200, False).lr == 3e-5
    assert AdaptSettings(lora=LoraSettings()).learning_rate == LORA_LR
