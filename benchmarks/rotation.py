"""Truncation after ``sbert rotate``: today's model turned onto the principal axes of a corpus's texts (no
training, no labels), cut to 384/256/128/64 dimensions, against plain truncation of today's model, in one
run; the Matryoshka-trained rows of benchmarks/static.py's record beside them (not re-run here).

Each rotation is built by the command a user runs, ``sbert rotate default --corpus ... --max-texts N``,
fitted on: SciFact's documents, openoffice-dups' documents, both, and STSb's train sentences (no scores).
Then the same evaluation as benchmarks/static.py's Matryoshka part (STSb test Spearman, SciFact NDCG@10,
openoffice-dups MRR@10 on the newer part of its split in time). A fit on the texts a user searches is what
``sbert rotate`` is for (no fit reads a query, a judgment or a score); the fits on the other collections
show what it does to data it never saw.

Scored as today's model's vectors (embedded once, cached) times each folder's own rotation matrix: the run
checks, on texts it evaluates, that each rotated folder's ``encode`` gives those vectors (the largest
difference is in the table's notes), so the rotation scored is the one served.

    python -m benchmarks.rotation [--max-texts 2000] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from benchmarks.lib import (
    RECORDS,
    WORK,
    cpu_name,
    environment_lines,
    load_record,
    markdown_table,
    write_between_markers,
    write_record,
)
from benchmarks.static import (
    DOC,
    MRL_DIMS,
    Embedder,
    collection_texts,
    collections,
    quality,
    sbert_cli,
    slug,
    stsb_pairs,
    vector_cache,
    write_jsonl,
)

BEGIN, END = "<!-- benchmarks/rotation.py: begin -->", "<!-- benchmarks/rotation.py: end -->"
RECORD = RECORDS / "static" / "rotation.json"
MATRYOSHKA = RECORDS / "static" / "matryoshka.json"
METRICS = ("stsb", "scifact_ndcg10", "openoffice_mrr10")
FITS = {  # row label -> the corpus `sbert rotate` reads (a collection's folder, or "both": a file of the two)
    "rotated on SciFact's documents": "scifact",
    "rotated on openoffice-dups' documents": "openoffice-dups",
    "rotated on both collections' documents": "both",
    "rotated on STSb's train sentences": "stsb-train",
}
MRL = WORK / "static" / "models" / "mrl"  # benchmarks/static.py's Matryoshka model (its recipe beside it)
TRUNCATED = "truncated"
BASES = {  # row prefix -> (the model rotated, the fits it gets): the Matryoshka model only where it is built
    "": ("default", tuple(FITS)),
    "Matryoshka-trained, ": (
        str(MRL),
        (
            "rotated on SciFact's documents",
            "rotated on openoffice-dups' documents",
            "rotated on STSb's train sentences",
        ),
    ),
}
OWN = {  # each evaluation's own fit: what a user who rotates on the texts they search gets
    "stsb": "rotated on STSb's train sentences",
    "scifact_ndcg10": "rotated on SciFact's documents",
    "openoffice_mrr10": "rotated on openoffice-dups' documents",
}


class Rotated:
    """Today's model's unit vectors (an ``Embedder``, cached) turned by ``rotation`` and cut to ``dim``."""

    similarity_fn_name = "cosine"

    def __init__(self, base: Embedder, rotation: np.ndarray | None, dim: int) -> None:
        self.base, self.rotation, self.dim = base, rotation, dim

    def encode(self, texts, batch_size: int = 32, convert_to: str = "numpy", **_) -> np.ndarray:
        vectors = self.base.encode(texts)
        if self.rotation is not None:
            vectors = vectors @ self.rotation.T
        vectors = vectors[:, : self.dim]
        vectors = (vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)).astype(np.float32)
        if convert_to == "torch":
            import torch

            return torch.from_numpy(np.ascontiguousarray(vectors))
        return vectors

    encode_query = encode_document = encode


def build(args, work: Path, prefix: str, model: str, fits: tuple[str, ...]) -> dict[str, dict]:
    """Each rotated folder of ``model`` (``sbert rotate``, skipped when there) and what it cost."""
    from sbert.data.paths import data_dir

    built = {}
    for label in fits:
        source, name = FITS[label], slug(prefix + label)
        folder, made = work / "models" / name, work / "models" / f"{name}.json"
        if not folder.is_dir():
            corpus = data_dir(args.data) / "retrieval" / source
            if source == "both":
                corpus = write_jsonl(work / "both.jsonl", collection_texts(args))
            elif source == "stsb-train":
                corpus = write_jsonl(work / "stsb-train.jsonl", stsb_train_sentences(args))
            seconds = sbert_cli(
                "rotate", model, "--corpus", str(corpus), "--out", str(folder), "--device", "cpu",
                "--max-texts", str(args.max_texts), "--no-progress",
            )  # fmt: skip
            made.write_text(json.dumps({"seconds": seconds, "load": os.getloadavg()[0]}))
        built[prefix + label] = {"folder": folder, **json.loads(made.read_text())}
    return built


def stsb_train_sentences(args) -> list[str]:
    """Every distinct sentence of STSb's train split (no scores): the texts an STS user would rotate on."""
    from sbert.data.paths import data_dir
    from sbert.data.sts import read_stsb

    pairs = read_stsb(data_dir(args.data) / "stsbenchmark" / "sts-train.csv")
    return list(dict.fromkeys(t for p in pairs for t in (p.sentence1, p.sentence2)))


def served_difference(folder: Path, base: Embedder, rotation: np.ndarray, texts: list[str]) -> float:
    """The largest difference between the folder's own unit vectors of ``texts`` and the scored ones."""
    import sbert

    model = sbert.load(folder, device="cpu")
    served = model.encode(texts, normalize=True, on_truncation="ignore")
    return float(np.abs(served - base.encode(texts) @ rotation.T).max())


def measure(args, work: Path) -> dict:
    import sbert

    parts = collections(args)
    sample = stsb_pairs(args)[0][:100] + collection_texts(args)[:100]
    rows, notes = {}, {}
    for prefix, (name, fits) in BASES.items():
        if name != "default" and not Path(name).is_dir():
            print(f"rotation: {name} is not built (python -m benchmarks.static --parts matryoshka): rows skipped")
            continue
        model = sbert.load(name, device="cpu")
        cache = work / "vectors" if name == "default" else vector_cache(work, prefix, Path(name))

        def encode(texts, m=model):
            return m.encode(texts, batch_size=32, on_truncation="ignore")

        base = Embedder(prefix or "default", encode, cache)
        built = build(args, work, prefix, name, fits)
        for label in (TRUNCATED, *fits):
            rotation = None
            if label in fits:
                folder = built[prefix + label]["folder"]
                rotation = sbert.load(folder, device="cpu")[-1].linear.weight.detach().double().numpy()
                notes[prefix + label] = {
                    "seconds": built[prefix + label]["seconds"],
                    "load": built[prefix + label]["load"],
                    "max_difference": served_difference(folder, base, rotation, sample),
                }
            for dim in MRL_DIMS:
                print(f"rotation: {prefix}{label} at {dim}", flush=True)
                rows[f"{row_label(prefix, label)}|{dim}"] = quality(Rotated(base, rotation, dim), args, parts)
    return {"rows": rows, "notes": notes, "max_texts": args.max_texts, "cpu": cpu_name()}


def row_label(prefix: str, label: str) -> str:
    """A row's label: "today's model, truncated", "rotated on ...", "Matryoshka-trained, truncated", ..."""
    return ("today's model, " if label == TRUNCATED else "") + label if not prefix else prefix + label


def lines(record: dict) -> list[str]:
    matryoshka = load_record(MATRYOSHKA, {"facts": {}})["facts"]
    header = ["model", "dims", "STSb Spearman", "SciFact NDCG@10", "openoffice MRR@10", "measured"]
    table = [
        [label, dim, *(f"{scores[m]:.2f}" for m in METRICS), "this run"]
        for key, scores in record["rows"].items()
        for label, dim in [key.split("|")]
    ]
    table += [
        [f"{label} (benchmarks/static.py)", dim, *(f"{scores[m]:.2f}" for m in METRICS), "its Matryoshka run"]
        for key, scores in matryoshka.items()
        for label, dim in [key.split("|")]
        if label != "today's model, truncated"
    ]
    gains = []
    plain = record["rows"]
    for label in FITS:
        for dim in (128, 64):
            delta = [plain[f"{label}|{dim}"][m] - plain[f"today's model, truncated|{dim}"][m] for m in METRICS]
            gains.append(f"{label} at {dim}: " + ", ".join(f"{d:+.2f}" for d in delta))
    today = "today's model, truncated"
    for prefix in (p for p in BASES if f"{row_label(p, TRUNCATED)}|128" in plain):
        for dim in (384, 128, 64) if prefix else (128, 64):
            own = [plain[f"{prefix}{OWN[m]}|{dim}"][m] for m in METRICS]
            against = [(today, [o - plain[f"{today}|{dim}"][m] for o, m in zip(own, METRICS, strict=True)])]
            if prefix:
                itself = row_label(prefix, TRUNCATED)
                against.append((itself, [o - plain[f"{itself}|{dim}"][m] for o, m in zip(own, METRICS, strict=True)]))
            gains.append(
                f"**{prefix}each collection rotated on its own texts** at {dim}: "
                + "; ".join(f"against {name}: " + ", ".join(f"{d:+.2f}" for d in delta) for name, delta in against)
            )
    notes = [
        f"- {label}: fitted on at most {record['max_texts']:,} texts drawn at random"
        + f", `sbert rotate` {n['seconds']:,.0f} s (load average {n['load']:.1f} after)"
        + f"; the folder's own vectors differ from the scored ones by at most {n['max_difference']:.1e}"
        for label, n in record["notes"].items()
    ]
    return [
        f"One run on {record['cpu']} (2 logical cores). Rows of this run: today's model cut to each width (and "
        "re-normalised), and the same model after `sbert rotate` on each collection's documents (STSb: its train "
        "split's sentences, no scores)"
        + (
            "; the Matryoshka-trained model that benchmarks/static.py builds (its recipe: its table), cut and "
            "rotated the same way"
            if any(key.startswith("Matryoshka") for key in record["rows"])
            else ""
        )
        + ". The rows marked otherwise are benchmarks/static.py's Matryoshka table (not re-run here). A rotation "
        "reads no query and no judgment (nor a score, nor STSb's test split); each collection is seen only by its "
        "own fit and the fit on both retrieval collections.",
        "",
        *markdown_table(header, table),
        "",
        "Change over plain truncation (STSb, SciFact, openoffice-dups):",
        "",
        *(f"- {g}" for g in gains),
        "",
        *notes,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None)
    parser.add_argument("--max-texts", type=int, default=2000, help="documents each `sbert rotate` embeds")
    parser.add_argument("--tables", action="store_true", help="only rewrite the tables from the record")
    args = parser.parse_args()
    args.queries = args.documents = args.sts_pairs = None  # what static.py's evaluation reads: everything
    work = WORK / "rotation"
    work.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    if not args.tables:
        record = measure(args, work)
        record["seconds"] = time.perf_counter() - began
        record["environment"] = environment_lines(__import__("torch").get_num_threads(), ("sbert", "torch"))
        write_record(RECORD, record)
    record = json.loads(RECORD.read_text())
    body = ["**Truncation after `sbert rotate`.**", "", *lines(record), ""]
    body += [f"Wall time {record['seconds']:,.0f} s.", "", *record["environment"]]
    write_between_markers(DOC, BEGIN, END, body)
    print("\n".join(body))


if __name__ == "__main__":
    main()
