"""What ``sbert eval`` measures is what ``sbert search`` serves: for every combination of chunking, scoring
mode, hybrid fusion and re-ranking, the run file of ``sbert eval --retrieval --run`` holds the same ranked
ids and scores as ``sbert index build`` + ``sbert search`` over the same collection."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from sbert.cli import main

pytestmark = pytest.mark.slow  # loads the default model and a cross-encoder, many times

FILLER = "The committee met on Tuesday and discussed the budget, the roads and the new library at length."
DOCS = {
    "a1": ("Bread", "Knead the dough, let it rise for an hour and bake it in a hot oven until brown."),
    "a2": ("Football", "The match ended in a draw after extra time; both goalkeepers saved penalties."),
    "a3": ("", "A cat sleeps on the warm windowsill all afternoon while the rain falls outside."),
    "a4": ("Sourdough", "Sourdough bread needs a starter of flour and water, fed every day for a week."),
    "a5": ("Town news", f"{FILLER} {FILLER} Late in the evening the baker explained how to bake rye bread."),
    "a6": ("Comets", f"{FILLER} The telescope found a new comet near Jupiter. {FILLER}"),
    "a7": ("Trains", "The night train to the coast leaves at ten and arrives before dawn."),
    "a8": ("Weather", f"Storms and heavy rain are expected over the weekend. {FILLER}"),
}
QUERIES = {"q1": "how do I bake bread", "q2": "new comet seen by a telescope", "q3": "rain at the weekend"}
QRELS = {"q1": ["a1", "a4"], "q2": ["a6"], "q3": ["a8", "a3"]}
CHUNK = ["--chunk", "--window", "24", "--overlap", "6"]


def _collection(folder):
    (folder / "qrels").mkdir(parents=True)
    lines = [json.dumps({"_id": i, "title": t, "text": x}) for i, (t, x) in DOCS.items()]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps({"_id": q, "text": t}) for q, t in QUERIES.items()))
    rows = [f"{q}\t{d}\t1" for q, docs in QRELS.items() for d in docs]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    # what `sbert index build` reads: the documents as the evaluation joins them, in id order
    texts = [json.dumps({"id": i, "text": f"{t} {x}" if t else x}) for i, (t, x) in sorted(DOCS.items())]
    (folder.parent / "corpus.jsonl").write_text("\n".join(texts) + "\n")
    return folder


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from sbert.cross_encoder import CrossEncoder

    root = tmp_path_factory.mktemp("equivalence")
    folder = _collection(root / "tiny")
    torch.manual_seed(0)
    CrossEncoder.load("default", num_labels=1, device="cpu").save(root / "cross")
    for name, options in (("whole", []), ("chunked", CHUNK)):
        _run(["index", "build", str(root / "corpus.jsonl"), "--out", str(root / name), *options])  # BM25 kept
    return root, folder


def _run(args):
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def _read_run(path):
    run: dict[str, list[tuple[str, float]]] = {}
    for line in path.read_text().splitlines():
        qid, q0, doc, position, score, tag = line.split()
        assert q0 == "Q0" and tag == "sbert-tiny"
        run.setdefault(qid, []).append((doc, float(score), int(position)))
    for hits in run.values():
        assert [p for _, _, p in hits] == list(range(1, len(hits) + 1))
    return {q: [(d, s) for d, s, _ in hits] for q, hits in run.items()}


COMBINATIONS = [
    (chunk, mode, hybrid, rerank)
    for chunk in (False, True)
    for mode in ((None,) if not chunk else ("maxp", "mean"))
    for hybrid in (False, True, None)  # None: neither --hybrid nor --dense, as a user who passes no option
    for rerank in ((False, True) if hybrid is not None else (False,))
]


@pytest.mark.parametrize(("chunk", "mode", "hybrid", "rerank"), COMBINATIONS)
def test_eval_run_file_equals_index_build_and_search(setup, tmp_path, chunk, mode, hybrid, rerank):
    root, folder = setup
    fused = {True: ["--hybrid"], False: ["--dense"], None: []}[hybrid]
    shared = fused + (["--rerank", str(root / "cross")] if rerank else [])
    modes = ["--mode", mode] if mode else []
    run_file = tmp_path / "run.txt"
    evaluated = [*(CHUNK if chunk else []), *modes, *shared]
    _run(["eval", "--retrieval", str(folder), "--run", str(run_file), *evaluated])
    run = _read_run(run_file)
    index = root / ("chunked" if chunk else "whole")
    out = _run(["search", str(index), *QUERIES.values(), "-k", "100", "--json", *modes, *shared]).output
    served = {qid: found["hits"] for qid, found in zip(QUERIES, json.loads(out), strict=True)}
    assert set(run) == set(served)
    for qid, hits in served.items():
        assert [doc for doc, _ in run[qid]] == [hit["id"] for hit in hits], qid
        for (_, score), hit in zip(run[qid], hits, strict=True):
            assert score == pytest.approx(hit["score"], rel=1e-6, abs=1e-7)
    if chunk and hybrid is False:
        assert len(served["q2"]) == len(DOCS)  # every document ranked, each once
