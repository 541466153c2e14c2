"""The speed and size dial: transformer backends, static models, Matryoshka widths, on one CPU in one run.

Parts (``--parts``, each re-runnable alone; its facts and lines are kept, committed, in
benchmarks/results/records/static/<part>.json, and the tables are assembled from whatever parts are there, so
a part re-run on another machine replaces only its own; quick runs keep theirs in .work/static-quick):

- models: the static models and the Matryoshka model, each built once (folders under .work/static/models):
  ``sbert distill default`` (model2vec's defaults: 256 dims); the same with the collections' words added
  (``--vocabulary``: SciFact and openoffice-dups corpora); that one trained on the teacher's own sentence
  vectors (``sbert train --objective embedding-mse --format texts --teacher default``: every text of the data
  folder: STSb, SICK, SNLI sentences, the SciFact and openoffice-dups corpora, whole and, unless
  ``--no-teacher-sentences``, as their titles and sentences); that one trained on labelled
  pairs of the training parts (mnrl); the default model trained with ``--matryoshka 384,256,128,64`` (mnrl
  on the STSb train pairs scored 4 or more; ``--matryoshka-pairs all`` adds the retrieval training parts'
  judged pairs, ``all+regression`` besides them the paper's regression objective on every STSb train pair;
  ``--matryoshka-epochs``, ``--matryoshka-steps``), the same without Matryoshka, and the same Matryoshka
  training started from ``sbert rotate default`` fitted on its training texts (``--matryoshka-rows`` picks
  which of them a run builds and measures; the others are read back from the part's record). A model
  is trained when its folder under benchmarks/.work/static/models is missing; delete it to train it again
  (vectors are cached by the model folder's files: a model built again is embedded again).
- quality: per row, STSb test Spearman x 100 (cosine), SciFact test NDCG@10, openoffice-dups MRR@10 (the
  newer part of its split in time: ``benchmarks.lib.retrieval_data.test_part``), documents cut at each model's
  limit (``RetrievalEvaluator`` + ``IndexRetriever``).
- speed: sentences per second (batch 32, STSb/SICK sentences), batch-1 latency p50, size on disk, and the
  index size at 1M vectors (1M x dim x 4 bytes float32, x 1 byte int8: computed).
- matryoshka: the Matryoshka-trained models against plain truncation of today's model at 384/256/128/64.
- query: whole bug reports (openoffice-dups test queries) and SciFact's claims as queries, warm hybrid
  search (windows + BM25, sbert's default fusion: weighted, alpha 0.7) over each corpus in windows: p50 per
  query (query embedding + search) for torch, ONNX int8 and the static model, and the NDCG@10 / MRR@10 each
  costs.

Rows: sentence-transformers torch (the default model); sbert torch, onnx, onnx-int8; the distilled static
models; distilled + trained on the teacher's vectors, + labelled pairs, + the two corpora's title pairs
(label-free, ``sbert adapt --method title``'s pairs) or their title and crop pairs (``--method
title+crop``'s); model2vec's ``StaticModel.encode`` of the distilled folder; wordllama. The quality, speed
and query parts build the static models they lack (never the Matryoshka ones: those are their own part's,
with its own recipe and ``--device``).

    python -m benchmarks.static [--parts models,quality,speed,matryoshka,query] [--data DIR]
    python -m benchmarks.static --quick   # tiny sizes: checks that every part runs (no docs written)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from benchmarks.lib import (
    RECORDS,
    RESULTS,
    ROOT,
    WORK,
    cpu_name,
    device_name,
    environment_lines,
    load_record,
    markdown_table,
    source_env,
    write_between_markers,
    write_record,
    write_result,
)

DOC, SCALE_DOC, RETRIEVAL_DOC = (RESULTS / f"{name}-evidence.md" for name in ("cpu", "scale", "retrieval"))
BEGIN, END = "<!-- benchmarks/static.py: begin -->", "<!-- benchmarks/static.py: end -->"
MRL_BEGIN, MRL_END = "<!-- benchmarks/static.py matryoshka: begin -->", "<!-- benchmarks/static.py matryoshka: end -->"
MAIN_PARTS = ("models", "quality", "speed", "query")  # the main table's; the Matryoshka table has its own block
PLOT = ROOT / "docs" / "img" / "static-speed-quality.png"
PARTS = ("models", "quality", "speed", "matryoshka", "query")
MRL_DIMS = (384, 256, 128, 64)
MRL_PAIRS = {
    "stsb": "the STSb train pairs scored 4 or more",
    "all": "the STSb train pairs scored 4 or more and the SciFact and openoffice-dups training parts' judged pairs",
    "all+regression": "the pairs of `all`, and besides them the paper's regression objective (cosine against the "
    "gold score, MSE) on every STSb train pair, the two interleaved round-robin, training texts cut to 128 tokens",
}
# Matryoshka table row -> (folder under .work/static/models, how it starts: "" trained without --matryoshka,
# "default" with it from the default model, "rotated" with it from `sbert rotate default` on its training texts)
MRL_ROWS = {
    "today's model, truncated": ("default", ""),
    "trained the same without Matryoshka, truncated": ("mrl-control", ""),
    "Matryoshka-trained": ("mrl", "default"),
    "Matryoshka-trained from a rotation (sbert rotate on its training texts first)": ("mrl-rotated", "rotated"),
}
MRL_ROTATION_TEXTS = 2_000  # the rotated start's fit: texts drawn at random (as benchmarks/rotation.py's fits)
MRL_CUT = 128  # all+regression: training texts cut to this many tokens (as sbert adapt does: 3x faster on a CPU)
QUORA = 40_000_000
ONE_THREAD = "the same, torch.set_num_threads(1)"  # a speed-only row after the trained static model
ROWS = {  # row -> (kind, what it loads)
    "sentence-transformers torch": ("st", "default"),
    "sbert torch": ("sbert", "torch"),
    "sbert onnx": ("sbert", "onnx"),
    "sbert onnx-int8": ("sbert", "onnx-int8"),
    "distilled (model2vec defaults, 256 d)": ("static", "distilled"),
    "distilled + corpus vocabulary": ("static", "vocab"),
    "distilled + vocabulary + trained on the teacher's vectors": ("static", "trained"),
    "the same + pairs (mnrl; STSb, SciFact, openoffice train parts: labels)": ("static", "pairs"),
    "the same + title pairs of the two corpora (mnrl; label-free, as sbert adapt)": ("static", "titles"),
    "the same as the pairs row + title and crop pairs (mnrl; label-free, as sbert adapt)": ("static", "title-crop"),
    "model2vec StaticModel.encode (distilled folder)": ("model2vec", "distilled"),
    "wordllama 0.4 (l2_supercat_256)": ("wordllama", ""),
}


def work_dir(args) -> Path:
    path = WORK / ("static-quick" if args.quick else "static")
    path.mkdir(parents=True, exist_ok=True)
    return path


# -- models ------------------------------------------------------------------------------------------
def sbert_cli(*args: str) -> float:
    """Run ``sbert ARGS`` (this checkout's) and return its wall time; its output goes to ours."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sbert", *args], check=True, env=source_env())
    return time.perf_counter() - began


def collection_texts(args) -> list[str]:
    """Every document of the SciFact and openoffice-dups corpora (title and text)."""
    from sbert.data.beir import read_beir
    from sbert.data.paths import data_dir

    texts = []
    for name in ("scifact", "openoffice-dups"):
        collection = read_beir(data_dir(args.data) / "retrieval" / name, "test")
        texts += [d.joined() for d in collection.corpus.values()]
    return texts


def collection_sentences(args) -> list[str]:
    """The titles and sentences of every SciFact and openoffice-dups document (``sbert.adapt``'s sentence
    split): short texts of the two domains, like their queries, for the teacher to embed besides the whole
    documents."""
    from sbert.adapt.pseudo_queries import sentences
    from sbert.data.corpus import read_corpus_documents
    from sbert.data.paths import data_dir

    texts = []
    for name in ("scifact", "openoffice-dups"):
        documents, _ = read_corpus_documents(data_dir(args.data) / "retrieval" / name)
        texts += [t for d in documents for t in ([d.title] if d.title.strip() else []) + sentences(d.text)]
    return list(dict.fromkeys(t.strip() for t in texts if t.strip()))


def write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def write_pairs(path: Path, args, collections: tuple[str, ...] = ("scifact", "openoffice-dups")) -> Path:
    """(query, positive) rows of the training parts only: STSb train pairs scored 4 or more (of 5), SciFact's
    train judgments, openoffice-dups' older 80% (``benchmarks.lib.retrieval_data``'s split)."""
    from benchmarks.lib.retrieval_data import split_collection
    from sbert.data.beir import read_beir
    from sbert.data.paths import data_dir
    from sbert.data.sts import read_stsb

    stsb = read_stsb(data_dir(args.data) / "stsbenchmark" / "sts-train.csv")
    rows = [(p.sentence1, p.sentence2) for p in stsb if p.score >= 4.0]
    for name in collections:
        train = read_beir(split_collection(name, args.data), "train")
        texts = train.document_texts()
        rows += [(train.queries[q], texts[d]) for q, judged in train.qrels.items() for d, g in judged.items() if g > 0]
    path.write_text("".join(json.dumps({"query": q, "positive": d}) + "\n" for q, d in rows), encoding="utf-8")
    return path


def matryoshka_pairs(args, work: Path) -> Path:
    """The Matryoshka models' training pairs (``--matryoshka-pairs``), written once."""
    if args.matryoshka_pairs.startswith("all"):
        path = work / "pairs.jsonl"
        return path if path.is_file() else write_pairs(path, args)
    path = work / "stsb-positives.jsonl"
    return path if path.is_file() else write_pairs(path, args, collections=())


def build_models(args, work: Path) -> dict:  # long: one step per model, each skipped when it is there
    """The static models (each skipped when its folder is there); what building each cost."""
    from benchmarks.lib.sentences import sentences
    from sbert.data.paths import data_dir

    models, facts = work / "models", {}
    models.mkdir(exist_ok=True)
    data = data_dir(args.data)
    documents = collection_texts(args)
    if not (models / "distilled").is_dir():
        facts["distil seconds"] = sbert_cli("distill", "default", "--out", str(models / "distilled"))
    if not (models / "vocab").is_dir():
        corpus = write_jsonl(work / "collections.jsonl", documents)
        facts["distil + vocabulary seconds"] = sbert_cli(
            "distill", "default", "--out", str(models / "vocab"), "--vocabulary", str(corpus)
        )
    if not (models / "trained").is_dir():
        texts = sentences(data, ("stsb", "sick", "snli")) + documents
        texts = list(dict.fromkeys(texts + (collection_sentences(args) if args.teacher_sentences else [])))
        texts = texts[: args.static_texts] if args.static_texts else texts
        source = write_jsonl(work / "all-texts.jsonl", texts)
        train = ["train", "--objective", "embedding-mse", "--format", "texts", "--train", str(source)]
        train += ["--teacher", "default", "--model", str(models / "vocab"), "--out", str(models / "trained")]
        train += ["--lr", str(args.static_lr), "--batch-size", str(args.static_batch), "--warmup", "0.05"]
        train += ["--epochs", str(args.static_epochs), "--no-progress", "--checkpoint-every", "100000"]
        facts["trained: seconds"] = sbert_cli(*train)
        summary = json.loads((models / "trained.train" / "log.jsonl").read_text().splitlines()[-1])["summary"]
        facts["trained: texts, steps, texts/s of the loop"] = [
            len(texts),
            summary["steps"],
            round(summary["steps_per_second"] * args.static_batch),
        ]
    stages = (
        ("pairs", "trained", write_pairs, "pairs"),
        ("titles", "pairs", write_title_pairs, "title pairs"),
        ("title-crop", "pairs", partial(write_title_pairs, generators=("title", "crop")), "title and crop pairs"),
    )
    for folder, base, write, label in stages:  # mnrl on (query, positive) rows, from the stage before
        if not (models / folder).is_dir():
            source = write(work / f"{folder}.jsonl", args)
            train = ["train", "--objective", "mnrl", "--format", "ntuples", "--train", str(source)]
            train += ["--model", str(models / base), "--out", str(models / folder), "--lr", str(args.static_lr)]
            train += ["--batch-size", str(args.static_batch), "--epochs", str(args.static_epochs), "--no-progress"]
            facts[f"{label}: seconds"] = sbert_cli(*train, "--checkpoint-every", "100000")
    return facts


def write_title_pairs(path: Path, args, generators: tuple[str, ...] = ("title",)) -> Path:
    """(title, body) rows of every titled document of SciFact's and openoffice-dups' corpora: the pairs
    ``sbert adapt --method title`` trains on (no query, no judgment read); with ``generators`` ("title",
    "crop"), ``--method title+crop``'s."""
    from sbert.adapt.pseudo_queries import pseudo_queries
    from sbert.data.corpus import read_corpus_documents
    from sbert.data.paths import data_dir

    rows = []
    for name in ("scifact", "openoffice-dups"):
        documents, _ = read_corpus_documents(data_dir(args.data) / "retrieval" / name)
        rows += [(q.query, q.positive) for q in pseudo_queries(documents, generators, seed=42)]
    path.write_text("".join(json.dumps({"query": q, "positive": d}) + "\n" for q, d in rows), encoding="utf-8")
    return path


def matryoshka_objectives(args, work: Path) -> list[str]:
    """``sbert train``'s options naming the Matryoshka models' objectives: mnrl on the pairs, or (``all+regression``)
    a run file holding mnrl on the pairs and regression on the STSb train scores."""
    from sbert.data.paths import data_dir

    if args.matryoshka_pairs != "all+regression":
        return ["--objective", "mnrl", "--format", "ntuples", "--train", str(matryoshka_pairs(args, work))]
    stsb = data_dir(args.data) / "stsbenchmark" / "sts-train.csv"
    run = work / "mrl-run.toml"
    pairs = matryoshka_pairs(args, work)
    objectives = [("mnrl", "ntuples", pairs), ("regression", "stsb", stsb)]
    text = f"out = {json.dumps(str(work / 'models' / 'mrl'))}\n\n[train]\nmax_seq_length = {MRL_CUT}\n"
    for objective, fmt, path in objectives:  # JSON strings are TOML basic strings
        text += f"\n[[objectives]]\nobjective = {json.dumps(objective)}\nformat = {json.dumps(fmt)}\n"
        text += f"train = {json.dumps(str(path))}\n"
    run.write_text(text, encoding="utf-8")
    return ["--config", str(run)]


def matryoshka_rotation_texts(args, work: Path) -> Path:
    """The texts the Matryoshka models train on, without their pairing or scores (every distinct query and
    positive of the pairs; with ``all+regression`` STSb's train sentences too): what ``mrl-rotated``'s
    ``sbert rotate`` is fitted on before its training."""
    from sbert.data.paths import data_dir
    from sbert.data.sts import read_stsb

    rows = [json.loads(line) for line in matryoshka_pairs(args, work).read_text(encoding="utf-8").splitlines()]
    texts = [t for row in rows for t in (row["query"], row["positive"])]
    if args.matryoshka_pairs == "all+regression":
        stsb = read_stsb(data_dir(args.data) / "stsbenchmark" / "sts-train.csv")
        texts += [t for p in stsb for t in (p.sentence1, p.sentence2)]
    return write_jsonl(work / "mrl-rotation-texts.jsonl", list(dict.fromkeys(texts)))


def build_matryoshka_models(args, work: Path) -> dict:
    """The Matryoshka part's trained models (``--matryoshka-rows``; each skipped when its folder is there),
    on ``--device``; what building each cost."""
    models, facts = work / "models", {}
    models.mkdir(parents=True, exist_ok=True)
    dims = ["--matryoshka", ",".join(map(str, MRL_DIMS))]
    # mnrl takes every pair it is given as a positive: only STSb train pairs scored 4 or more (of 5), and with
    # --matryoshka-pairs all, the retrieval training parts' judged pairs too (pairs.jsonl)
    for label in matryoshka_rows(args):
        folder, start = MRL_ROWS[label]
        if folder == "default" or (models / folder).is_dir():
            continue
        base = "default"
        if start == "rotated":  # sbert rotate on the training texts first, then the same training
            base = str(models / f"{folder}-start")
            texts = str(matryoshka_rotation_texts(args, work))
            facts[f"{folder} rotation seconds"] = sbert_cli(
                "rotate", "default", "--corpus", texts, "--out", base, "--device", args.device,
                "--max-texts", str(MRL_ROTATION_TEXTS), "--no-progress",
            )  # fmt: skip
        train = ["train", *matryoshka_objectives(args, work), "--model", base, *(dims if start else [])]
        train += ["--out", str(models / folder), "--no-progress", "--batch-size", str(args.matryoshka_batch)]
        train += ["--epochs", str(args.matryoshka_epochs), "--max-steps", str(args.matryoshka_steps)]
        train += ["--checkpoint-every", "100000", "--device", args.device]
        facts[f"{folder} training seconds"] = sbert_cli(*train)
        recipe = {"pairs": args.matryoshka_pairs, "epochs": args.matryoshka_epochs, "max_steps": args.matryoshka_steps}
        recipe["batch"] = args.matryoshka_batch
        recipe["device"] = device_name(args.device)
        (models / f"{folder}-recipe.json").write_text(json.dumps(recipe))
    return facts


def matryoshka_rows(args) -> list[str]:
    """The Matryoshka table's rows this run measures (``--matryoshka-rows``: their folder names, or all)."""
    folders = [folder for folder, _ in MRL_ROWS.values()]
    wanted = args.matryoshka_rows.split(",") if args.matryoshka_rows else folders
    unknown = set(wanted) - set(folders)
    if unknown:
        raise SystemExit(f"--matryoshka-rows: unknown {', '.join(sorted(unknown))}; choose from {', '.join(folders)}")
    return [label for label, (folder, _) in MRL_ROWS.items() if folder in wanted]


def models_part(args, work: Path) -> tuple[list[str], dict]:
    """What building each model cost: this run's, over what earlier runs measured for models kept since."""
    earlier = part_facts(args, work, "models")
    facts = {**earlier, **build_models(args, work), **build_matryoshka_models(args, work)}
    lines = [f"- {key}: {f'{value:,.0f}' if isinstance(value, float) else value}" for key, value in facts.items()]
    lines = lines or ["- (all models were there already)"]
    return lines, facts


# -- loading each row ------------------------------------------------------------------------------------
class Embedder:
    """What the evaluators call on a model, for any encode function: unit vectors, cut to ``dim`` where
    given, cached on disk by the texts (quality parts only: timing never goes through it)."""

    similarity_fn_name = "cosine"

    def __init__(self, name: str, encode: Callable[[list[str]], np.ndarray], cache: Path, dim: int | None = None):
        self.name, self._encode, self.cache, self.dim = name, encode, cache, dim

    def encode(self, texts, batch_size: int = 32, convert_to: str = "numpy", **_) -> np.ndarray:
        texts = [texts] if isinstance(texts, str) else list(texts)
        key = hashlib.sha1("\x00".join([self.name, *texts]).encode()).hexdigest()[:20]
        path = self.cache / f"{key}.npy"
        if path.is_file():
            vectors = np.load(path)
        else:
            vectors = np.asarray(self._encode(texts), dtype=np.float32)
            self.cache.mkdir(parents=True, exist_ok=True)
            np.save(path, vectors)
        if self.dim is not None:
            vectors = vectors[:, : self.dim]
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        if convert_to == "torch":
            import torch

            return torch.from_numpy(np.ascontiguousarray(vectors))
        return vectors

    encode_query = encode_document = encode


def load_row(name: str, work: Path):  # long: one branch per kind of row
    """(encode function: texts -> vectors at batch 32, size on disk in bytes, dim) of row ``name``."""
    import sbert
    from sbert.model_names import resolve

    kind, what = ROWS[name]
    models = work / "models"
    if kind == "st":
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(resolve("default")), device="cpu")
        return (lambda t: model.encode(t, batch_size=32)), folder_bytes(resolve("default")), 384
    if kind == "sbert":
        options = {"torch": {}, "onnx": {"backend": "onnx"}, "onnx-int8": {"backend": "onnx", "precision": "int8"}}
        model = sbert.load("default", device="cpu", **options[what])
        size = model.onnx_path.stat().st_size if model.onnx_path else folder_bytes(resolve("default"))
        return (lambda t: model.encode(t, batch_size=32, on_truncation="ignore")), size, model.dim
    if kind == "static":
        model = sbert.load(models / what, device="cpu")
        return (
            (lambda t: model.encode(t, batch_size=32, on_truncation="ignore")),
            folder_bytes(models / what),
            model.dim,
        )
    if kind == "model2vec":
        from model2vec import StaticModel

        model = StaticModel.from_pretrained(models / what)
        return (lambda t: model.encode(t, batch_size=32)), folder_bytes(models / what), model.dim
    import wordllama
    from wordllama import WordLlama

    model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    weights = next(Path(wordllama.__file__).parent.rglob("*.safetensors"))
    return (lambda t: model.embed(t, norm=True, batch_size=32)), weights.stat().st_size, 256


def vector_cache(work: Path, name: str, folder: Path | None = None) -> Path:
    """Where row ``name``'s vectors are cached: by the row and, for a model built here, by its folder's
    files (names, sizes, modification times), so that a model built again never reuses its old vectors."""
    cache = work / "vectors" / slug(name)
    if folder is None or not Path(folder).is_dir():
        return cache
    files = sorted(Path(folder).rglob("*"))
    stamp = [(str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    return cache / hashlib.sha1(json.dumps(stamp).encode()).hexdigest()[:12]


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file() and ".onnx" not in p.name)


# -- quality -----------------------------------------------------------------------------------------
def collections(args) -> dict:
    """SciFact's test split and openoffice-dups' newer (test) part, sampled in quick runs."""
    from benchmarks.lib.retrieval_data import sample, test_part

    parts = {}
    for name in ("scifact", "openoffice-dups"):
        parts[name] = sample(test_part(name, args), args.queries, args.documents)
    return parts


def retrieval_scores(model, collection, retriever=None, latency: int = 0) -> dict[str, float]:
    """NDCG@10, MRR@10 (and the per-query latency when ``latency`` > 0) of ``model`` on ``collection``: the
    one place that calls the retrieval evaluation API (``IndexRetriever``, documents whole, by default)."""
    from sbert.evaluation.retrieval import RetrievalEvaluator
    from sbert.evaluation.retrievers import IndexRetriever

    retriever = retriever or IndexRetriever()
    return RetrievalEvaluator(collection, retriever=retriever, latency_queries=latency)(model)


def stsb_pairs(args) -> tuple[list[str], list[float]]:
    from sbert.data.paths import data_dir
    from sbert.data.sts import read_stsb

    pairs = list(read_stsb(data_dir(args.data) / "stsbenchmark" / "sts-test.csv"))[: args.sts_pairs]
    return [t for p in pairs for t in (p.sentence1, p.sentence2)], [p.score for p in pairs]


def quality(model: Embedder, args, parts: dict) -> dict[str, float]:
    from benchmarks.lib.sentences import stsb_spearman

    texts, gold = stsb_pairs(args)
    return {
        "stsb": stsb_spearman(model.encode(texts), gold),
        "scifact_ndcg10": retrieval_scores(model, parts["scifact"])["ndcg@10"],
        "openoffice_mrr10": retrieval_scores(model, parts["openoffice-dups"])["mrr@10"],
    }


def quality_part(args, work: Path) -> tuple[list[str], dict]:
    parts, facts = collections(args), {}
    for name in ROWS:
        print(f"quality: {name}", flush=True)
        encode, _, _ = load_row(name, work)
        kind, what = ROWS[name]
        cache = vector_cache(work, name, work / "models" / what if kind in ("static", "model2vec") else None)
        facts[name] = quality(Embedder(name, encode, cache), args, parts)
    return [], facts


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")[:60]


# -- speed -------------------------------------------------------------------------------------------
def speed_texts(args) -> list[str]:
    from benchmarks.lib.sentences import sentences
    from sbert.data.paths import data_dir

    return sentences(data_dir(args.data), ("stsb", "sick"))[: args.speed_texts]


def rate(encode, texts: list[str], min_seconds: float) -> float:
    """Sentences per second of ``encode(texts)``, repeated until ``min_seconds`` have passed (at least once)."""
    done, began = 0, time.perf_counter()
    while True:
        encode(texts)
        done += len(texts)
        if time.perf_counter() - began >= min_seconds:
            return done / (time.perf_counter() - began)


def speed_part(args, work: Path) -> tuple[list[str], dict]:
    """Every row loaded at once and timed in turn, ``--speed-rounds`` times round-robin: each row's rate is
    the median of its rounds, so a minute of load from another process on the shared CPU lowers one round
    of every row, not all rounds of a few rows (timed one row after another, rows of the same table shape
    came out up to 25% apart)."""
    import statistics

    import torch

    from benchmarks.lib import latency_ms

    texts, facts = speed_texts(args), {}
    loaded = {name: load_row(name, work) for name in ROWS}
    loaded[ONE_THREAD] = loaded[list(ROWS)[6]]
    threads = torch.get_num_threads()

    def timed(name: str, measure: Callable[[], float]) -> float:
        torch.set_num_threads(1 if name == ONE_THREAD else threads)  # a static model's ops are tiny
        try:
            return measure()
        finally:
            torch.set_num_threads(threads)

    for encode, _, _ in loaded.values():
        encode(texts[:64])  # warm-up
    rates: dict[str, list[float]] = {name: [] for name in loaded}
    for number in range(args.speed_rounds):
        print(f"speed: round {number + 1} of {args.speed_rounds}", flush=True)
        for name, (encode, _, _) in loaded.items():
            rates[name].append(timed(name, lambda e=encode: rate(e, texts, args.min_seconds / args.speed_rounds)))
    for name, (encode, size, dim) in loaded.items():
        print(f"speed: latency of {name}", flush=True)
        p50 = timed(name, lambda e=encode: latency_ms(lambda t: e([t]), texts[: args.latency])[0])
        facts[name] = {
            "rate": statistics.median(rates[name]),
            "rounds": [round(r, 1) for r in rates[name]],
            "p50_ms": p50,
            "disk_mb": size / 2**20,
            "dim": dim,
        }
    return [], facts


# -- matryoshka --------------------------------------------------------------------------------------
def matryoshka_part(args, work: Path) -> tuple[list[str], dict]:
    """Each row of ``--matryoshka-rows`` measured at every width; the other rows read back from the record."""
    import sbert

    earlier = part_facts(args, work, "matryoshka")
    parts, facts, measured = collections(args), {}, matryoshka_rows(args)
    for label, (folder_name, _) in MRL_ROWS.items():
        if label not in measured:
            facts.update({key: earlier[key] for dim in MRL_DIMS if (key := f"{label}|{dim}") in earlier})
            continue
        folder = "default" if folder_name == "default" else work / "models" / folder_name
        model = sbert.load(folder, device=args.device)
        for dim in MRL_DIMS:
            print(f"matryoshka: {label} at {dim}", flush=True)

            def encode(t, m=model):
                return m.encode(t, batch_size=32, on_truncation="ignore")

            built = None if folder == "default" else Path(folder)
            embedder = Embedder(f"mrl-{label}", encode, vector_cache(work, f"mrl-{label}", built), dim)
            facts[f"{label}|{dim}"] = quality(embedder, args, parts)
    rows = [
        [label, dim, *(f"{q[k]:.2f}" for k in ("stsb", "scifact_ndcg10", "openoffice_mrr10"))]
        for key, q in facts.items()
        for label, dim in [key.split("|")]
    ]
    header = ["model", "dims", "STSb Spearman", "SciFact NDCG@10", "openoffice MRR@10"]
    log = (work / "models" / "mrl.train" / "log.jsonl").read_text().splitlines()
    summary = json.loads(log[-1])["summary"]
    steps = summary["steps"]
    made = work / "models" / "mrl-recipe.json"  # absent for models built before it was written: the defaults
    recipe = load_record(made, {"pairs": "stsb", "epochs": 1, "max_steps": 1000})
    intro = (
        f"The default model cut to each width (and re-normalised), against the default model trained {steps} "
        f"steps ({recipe['epochs']} epoch(s), at most {recipe['max_steps']}) with "
        f"`--matryoshka {','.join(map(str, MRL_DIMS))}` (mnrl at batch {recipe.get('batch', 64)} on "
        f"{MRL_PAIRS[recipe['pairs']]}; "
        f"`--matryoshka-pairs {recipe['pairs']}`), "
        "and against the same training without "
        "`--matryoshka` (what the training itself does, apart from Matryoshka), and against the same Matryoshka "
        f"training started from `sbert rotate default` fitted on {MRL_ROTATION_TEXTS:,} of its own training texts "
        "drawn at random (the texts only: no pairing, no score; the model turned onto their principal axes, so "
        "that its first coordinates already carry most of their variance); the same evaluation as above."
    )
    kept = [label for label in MRL_ROWS if label not in measured and f"{label}|{MRL_DIMS[0]}" in facts]
    if kept:
        intro += f" Read back from an earlier run of this part (not re-run): {'; '.join(kept)}."
    if recipe.get("device", "cpu") != "cpu":
        intro += (
            f" Trained and scored on {recipe['device']} (`--device cuda`, {summary['seconds']:.0f} s of training), "
            "all three models of this table alike; the default model's weights travelled to that machine rounded "
            "to float16 (run in float32), so its rows here may differ from the CPU rows above in the last digit."
        )
    return [intro, "", *markdown_table(header, rows)], facts


# -- query latency -----------------------------------------------------------------------------------
def query_part(args, work: Path) -> tuple[list[str], dict]:
    import sbert
    from benchmarks.lib.retrieval_data import sample, test_part
    from sbert.evaluation.retrievers import RetrievalSettings

    settings = RetrievalSettings(chunk=True, window=args.window, hybrid=True)  # fusion, alpha: sbert's defaults
    collections = {
        name: sample(test_part(name, args), args.queries, args.documents) for name in ("openoffice-dups", "scifact")
    }
    models = {
        "sbert torch": sbert.load("default", device="cpu"),
        "sbert onnx-int8": sbert.load("default", device="cpu", backend="onnx", precision="int8"),
        "static (distilled + vocabulary + trained)": sbert.load(work / "models" / "trained", device="cpu"),
    }
    facts, rows = {}, []
    for name, model in models.items():
        facts[name] = {}
        for label, collection in collections.items():
            print(f"query: {name} on {label}", flush=True)
            retriever = settings.retriever()
            scores = retrieval_scores(model, collection, retriever, args.query_latency)
            found = {k: scores[k] for k in ("ndcg@10", "mrr@10", "query_ms_p50", "query_ms_p99")}
            facts[name][label] = {**found, "windows": len(retriever.built)}
        o, f = facts[name]["openoffice-dups"], facts[name]["scifact"]
        rows.append([name, f"{o['query_ms_p50']:.1f} / {o['query_ms_p99']:.1f}", f"{o['ndcg@10']:.2f}"])
        rows[-1] += [f"{o['mrr@10']:.2f}", f"{o['windows']:,}", f"{f['query_ms_p50']:.1f}", f"{f['ndcg@10']:.2f}"]
    tokenizer = models["sbert torch"].transformer.tokenizer
    queries = list(collections["openoffice-dups"].queries.values())
    tokens = [len(ids) for ids in tokenizer(queries)["input_ids"]]
    header = ["query encoder", "openoffice p50 / p99 ms per query", "openoffice NDCG@10", "openoffice MRR@10"]
    header += ["openoffice windows", "SciFact p50 ms", "SciFact NDCG@10"]
    intro = (
        f"openoffice-dups test part: {len(queries):,} whole bug reports as queries (the default "
        f"tokenizer's tokens: median {np.median(tokens):.0f}, 10-90% {np.percentile(tokens, 10):.0f}-"
        f"{np.percentile(tokens, 90):.0f}; the transformer reads the first 256); SciFact test: short claims. "
        f"Hybrid search as sbert searches an index by default (BM25 fused, weighted, alpha 0.7) over documents in "
        f"windows of {args.window} tokens scored by their best window; warm (one query first, untimed); latency "
        f"over the first {args.query_latency} queries, one at a time: embedding the query and searching. Each row "
        "indexes the documents with its own model."
    )
    return [intro, "", *markdown_table(header, rows)], facts


# -- the table, the plot, the docs -------------------------------------------------------------------
def main_table(facts: dict) -> list[str]:
    quality_facts, speed_facts = facts.get("quality", {}), facts.get("speed", {})
    rows, names = [], list(ROWS)
    names.insert(7, ONE_THREAD)
    for name in names:
        if name == ONE_THREAD and name not in speed_facts:
            continue
        q, s = (
            quality_facts.get(name, quality_facts.get(names[6]) if name == ONE_THREAD else None),
            speed_facts.get(name),
        )
        scores = [f"{q[k]:.2f}" for k in ("stsb", "scifact_ndcg10", "openoffice_mrr10")] if q else ["-"] * 3
        speed = [f"{s['rate']:,.0f}", f"{s['p50_ms']:.2f}", f"{s['disk_mb']:,.1f}"] if s else ["-"] * 3
        index = [f"{1e6 * s['dim'] * 4 / 2**30:.2f} / {1e6 * s['dim'] / 2**30:.2f}", str(s["dim"])] if s else ["-"] * 2
        rows.append([name, *scores, *speed, *index])
    header = ["model", "STSb", "SciFact NDCG@10", "openoffice MRR@10", "sentences/s (batch 32)"]
    header += ["batch-1 p50 ms", "size on disk MB", "index at 1M: float32 / int8 GiB", "dims"]
    return markdown_table(header, rows)


def retrieval_lines(facts: dict, lines: dict) -> list[str]:
    """retrieval-evidence.md's part: each row's retrieval scores and speed, and the query latency table."""
    quality_facts, speed_facts = facts.get("quality", {}), facts.get("speed", {})
    rows = [
        [name, f"{q['scifact_ndcg10']:.2f}", f"{q['openoffice_mrr10']:.2f}"]
        + ([f"{speed_facts[name]['rate']:,.0f}"] if name in speed_facts else ["-"])
        for name in ROWS
        if (q := quality_facts.get(name))
    ]
    header = ["model (dense, documents cut at its limit)", "SciFact NDCG@10", "openoffice MRR@10", "sentences/s"]
    out = [f"Measured by `python -m benchmarks.static` on {cpu_name()} (the whole table, with STSb and sizes:", ""]
    out[0] += " [static.md](static.md))."
    out += [*markdown_table(header, rows), ""] if rows else ["(quality not measured yet)", ""]
    if "query" in lines:
        out += ["**Query latency, searched as sbert searches by default.**", "", *lines["query"]]
    return out


def retrieval_mean(q: dict) -> float:
    """The mean of SciFact's NDCG@10 and openoffice-dups' MRR@10 (the plot's retrieval axis)."""
    return (q["scifact_ndcg10"] + q["openoffice_mrr10"]) / 2


def plot(facts: dict, path: Path) -> bool:
    """Quality against sentences per second (log x): STSb, and the mean of the two retrieval scores."""
    if not (facts.get("quality") and facts.get("speed")):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 6))
    for ax, (label, score) in zip(
        axes,
        (
            ("STSb test Spearman x 100", lambda q: q["stsb"]),
            ("retrieval: mean of SciFact NDCG@10\nand openoffice MRR@10", retrieval_mean),
        ),
        strict=True,
    ):
        markers = "osD^v<>pPX*"
        for n, name in enumerate(ROWS):
            if name in facts["quality"] and name in facts["speed"]:
                x, y = facts["speed"][name]["rate"], score(facts["quality"][name])
                ax.scatter(x, y, s=40, marker=markers[n % len(markers)], label=name, alpha=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("sentences per second, batch 32 (log)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Quality against speed on {cpu_name()}")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.22, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def speed_rounds(facts: dict) -> str:
    """How the speed column was timed: each row the median of the rounds the speed part's record holds."""
    rounds = [len(row["rounds"]) for row in facts.get("speed", {}).values()]
    return f", each row the median of {max(rounds)} rounds timing every row in turn" if rounds else ""


def scale_lines(facts: dict) -> list[str]:
    """The static row of scale-evidence.md's 40M plan, from the measured rates."""
    speed = facts.get("speed", {})
    static, torch_row = speed.get(list(ROWS)[6]), speed.get("sbert torch")
    if not static or not torch_row:
        return ["(benchmarks/static.py has not measured the static model's speed yet.)"]
    cores = os.cpu_count() or 1
    hours = QUORA / static["rate"] / 3600
    lines = [
        f"- **Static model** (benchmarks/static.py, {cpu_name()}, {cores} cores): the distilled and trained static "
        f"model embeds {static['rate']:,.0f} sentences/s at batch 32 here, {static['rate'] / torch_row['rate']:,.0f}x "
        f"sbert torch in the same run ({torch_row['rate']:,.0f}/s): 40M questions in {hours:,.2f} h on this one "
        f"machine, no cluster; {static['dim']} dimensions: {QUORA * static['dim'] * 4 / 2**30:.1f} GiB float32, "
        f"{QUORA * static['dim'] / 2**30:.1f} GiB int8. Its quality is in benchmarks/results/static.md's table.",
    ]
    if ONE_THREAD in speed:
        one = speed[ONE_THREAD]["rate"]
        lines[-1] += f" With one torch thread per process it ran {one:,.0f}/s: {QUORA / one / 3600:,.2f} h."
    return lines


def part_record(args, work: Path, name: str) -> Path:
    """Where a part's facts and lines are kept: committed records, or the quick runs' own work folder."""
    return work / f"{name}.json" if args.quick else RECORDS / "static" / f"{name}.json"


def part_facts(args, work: Path, name: str) -> dict:
    """The facts an earlier run of a part kept ({} when none has run)."""
    return load_record(part_record(args, work, name), {"facts": {}})["facts"]


def run_parts(args, work: Path) -> tuple[dict, dict]:
    """Each part run (``--parts``) or read back from its cache; returns (facts, lines) by part."""
    runs = {
        "models": models_part,
        "quality": quality_part,
        "speed": speed_part,
        "matryoshka": matryoshka_part,
        "query": query_part,
    }
    facts, lines, wanted = {}, {}, args.parts.split(",")
    if any(p in wanted for p in ("quality", "speed", "query")) and "models" not in wanted:
        build_models(args, work)  # whatever static model is missing (the Matryoshka ones are their part's)
    if "matryoshka" in wanted and "models" not in wanted:
        build_matryoshka_models(args, work)  # only its own models
    for name, part in runs.items():
        saved = part_record(args, work, name)
        if name in wanted:
            lines[name], facts[name] = part(args, work)
            write_record(saved, {"lines": lines[name], "facts": facts[name]})
        elif saved.is_file():
            earlier = json.loads(saved.read_text())
            lines[name], facts[name] = earlier["lines"], earlier["facts"]
    return facts, lines


def main() -> None:
    args = arguments()
    work = work_dir(args)
    began = time.perf_counter()
    facts, lines = run_parts(args, work)
    missing = [part for part in MAIN_PARTS if part not in lines]
    body = [
        f"One run on {cpu_name()} ({os.cpu_count()} logical cores), torch fp32 on the CPU. STSb: Spearman x 100 "
        "of cosine on STSb test; SciFact NDCG@10 on its test split; openoffice-dups MRR@10 on the newer part of "
        "its split in time; documents cut at each model's limit. Speed: STSb/SICK sentences, batch 32"
        f"{speed_rounds(facts)}; latency: one sentence per call. Index: computed, 1M vectors x dims x 4 (float32) "
        "or 1 (int8) bytes.",
        "",
        *main_table(facts),
        "",
    ]
    if "models" in lines:
        body += ["Building the models:", "", *lines["models"], ""]
    if "query" in lines:
        body += ["**Query latency with whole bug reports.**", "", *lines["query"], ""]
    if plot(facts, work / "static-speed-quality.png" if args.quick else PLOT):
        body += ["![quality against speed](../../docs/img/static-speed-quality.png)", ""]
    ending = [
        f"Wall time of this invocation {time.perf_counter() - began:,.0f} s (parts not run are read from "
        "benchmarks/results/records/static).",
        "",
        *environment_lines(
            __import__("torch").get_num_threads(),
            ("sbert", "torch", "onnxruntime", "sentence-transformers", "model2vec", "wordllama"),
        ),
    ]
    body += ending
    matryoshka = []  # its block is rewritten only by a run of its part: it keeps its own run's wall time and command
    if "matryoshka" in args.parts.split(","):
        matryoshka = ["**Matryoshka against truncation.**", "", *lines["matryoshka"], "", *ending]
    if args.quick:  # tiny sizes: never in benchmarks/results or the docs
        text = "\n".join(["# Static models: measured", "", *body, "", *matryoshka]) + "\n"
        (work / "static-quick.md").write_text(text, encoding="utf-8")
        print(text + f"wrote {work / 'static-quick.md'}")
        return
    if matryoshka:
        write_result("static-matryoshka.md", ["# Matryoshka against truncation: measured", "", *matryoshka[2:]])
        write_between_markers(DOC, MRL_BEGIN, MRL_END, matryoshka)
    if missing:  # never overwrite the committed tables with dashes
        print(f"the main table lacks the parts {', '.join(missing)} (not run, none cached): not written")
        return
    write_result("static.md", ["# Static models: measured", "", *body])
    write_between_markers(DOC, BEGIN, END, body)
    write_between_markers(SCALE_DOC, BEGIN, END, scale_lines(facts))
    write_between_markers(RETRIEVAL_DOC, BEGIN, END, retrieval_lines(facts, lines))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--data", default=None)
    parser.add_argument("--static-texts", type=int, default=None, help="cap the static model's training texts")
    parser.add_argument(
        "--teacher-sentences",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the static model's teacher texts: the two corpora's titles and sentences too, not only whole documents",
    )
    parser.add_argument("--static-epochs", type=int, default=3)
    parser.add_argument("--static-lr", type=float, default=1e-3)
    parser.add_argument("--static-batch", type=int, default=256)
    parser.add_argument("--matryoshka-steps", type=int, default=1000)
    parser.add_argument("--matryoshka-epochs", type=int, default=1)
    parser.add_argument("--matryoshka-batch", type=int, default=64)
    parser.add_argument("--device", default="cpu", help="where the Matryoshka models train and are scored (cpu, cuda)")
    parser.add_argument(
        "--matryoshka-pairs", choices=tuple(MRL_PAIRS), default="stsb", help="the Matryoshka models' training pairs"
    )
    parser.add_argument(
        "--matryoshka-rows",
        default="",
        help="the Matryoshka part's rows measured (folder names, comma-separated: default, mrl-control, mrl, "
        "mrl-rotated; default all); the others are read back from its record",
    )
    parser.add_argument("--speed-texts", type=int, default=10_000)
    parser.add_argument(
        "--min-seconds", type=float, default=5.0, help="each row's rate is timed this long in all (at least a pass)"
    )
    parser.add_argument("--speed-rounds", type=int, default=5, help="rounds of timing every row in turn")
    parser.add_argument("--latency", type=int, default=500, help="single-sentence calls for the batch-1 latency")
    parser.add_argument("--sts-pairs", type=int, default=None)
    parser.add_argument("--queries", type=int, default=None, help="quick runs: only the first N test queries")
    parser.add_argument("--documents", type=int, default=None, help="quick runs: relevant documents + N others")
    parser.add_argument("--window", type=int, default=128, help="query part: tokens per window")
    parser.add_argument("--query-latency", type=int, default=200, help="query part: queries timed")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, own cache (.work/static-quick), no docs")
    args = parser.parse_args()
    if args.quick:
        args.static_texts, args.static_epochs, args.matryoshka_steps = 2000, 1, 4
        args.speed_texts, args.min_seconds, args.latency, args.sts_pairs = 256, 0.2, 20, 100
        args.speed_rounds = 2
        args.queries, args.documents, args.query_latency = 10, 60, 10
    return args


if __name__ == "__main__":
    main()
