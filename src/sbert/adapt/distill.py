"""Teacher-scored candidates for pseudo-queries (GPL without its query generator).

For each pseudo-query, candidates come from the student (its best-ranked other documents, by
``mine_hard_negatives``) and from BM25 (its best-ranked other documents); a teacher (any local bi-encoder
or cross-encoder) scores the query against its own document and each candidate. The student then learns
the teacher's margins (MarginMSE) or its ranking (KL over the candidates).

Finding and scoring the candidates is the long part of a teacher method (SciFact's 10k pseudo-queries: an
hour and more on two CPU cores, before the first step), so ``keep_scored`` writes each query's candidates and
scores beside the checkpoints and ``kept_scored`` reads them back for a resumed run with the same inputs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sbert.adapt.pseudo_queries import PseudoQuery
from sbert.data.beir import Document
from sbert.data.examples import DistillationExample


def candidates(
    student,
    documents: Sequence[Document],
    queries: Sequence[PseudoQuery],
    dense: int = 2,
    lexical: int = 2,
    show_progress: bool | None = False,
) -> list[list[str]]:
    """For each query, up to ``dense`` student-ranked and ``lexical`` BM25-ranked document ids other than its
    own (and other than copies of its own text), student's first. ``show_progress``: the student's encode
    bars."""
    from sbert.search.lexical import BM25
    from sbert.search.negatives import NegativeFilters, mine_hard_negatives

    corpus = {d.id: d.joined() for d in documents}
    found: list[list[str]] = [[] for _ in queries]
    if dense:
        mined = mine_hard_negatives(
            student,
            {str(i): q.query for i, q in enumerate(queries)},
            corpus,
            {str(i): {q.document: 1} for i, q in enumerate(queries)},
            NegativeFilters(num_negatives=dense),
            keep_incomplete=True,
            show_progress=show_progress,
        )
        for row in mined.rows:
            found[int(row.query_id)] = list(row.negative_ids)
    if lexical:
        ids = list(corpus)
        top = BM25.build([corpus[i] for i in ids]).search([q.query for q in queries], k=lexical + dense + 8)
        for n, query in enumerate(queries):
            fresh = [ids[r] for r in top.indices[n] if r >= 0 and ids[r] != query.document and ids[r] not in found[n]]
            found[n] += [i for i in fresh if corpus[i] != corpus[query.document]][:lexical]
    return found


def teacher_rows(
    teacher,
    documents: Sequence[Document],
    queries: Sequence[PseudoQuery],
    negatives: Sequence[Sequence[str]],
    show_progress: bool | None = False,
) -> list[DistillationExample]:
    """One row per query that has candidates: (query, its document, the candidates, the teacher's scores)."""
    corpus = {d.id: d.joined() for d in documents}
    rows = [
        (q.query, [corpus[q.document], *(corpus[i] for i in ids)])
        for q, ids in zip(queries, negatives, strict=True)
        if ids
    ]
    scores = teacher_scores(teacher, rows, show_progress)
    return [
        DistillationExample(query, texts[0], tuple(texts[1:]), tuple(s))
        for (query, texts), s in zip(rows, scores, strict=True)
    ]


def scored_key(queries: Sequence[PseudoQuery], **inputs) -> dict:
    """What decides a run's candidates and scores: ``inputs`` (model, corpus, teacher, seed, ...) and a digest
    of the pseudo-queries (each query's text and document)."""
    digest = hashlib.sha256(json.dumps([(q.query, q.document) for q in queries]).encode()).hexdigest()
    return {**{k: str(v) if isinstance(v, Path) else v for k, v in inputs.items()}, "queries": digest}


def keep_scored(
    path: Path, key: dict, queries: Sequence[PseudoQuery], negatives: Sequence[Sequence[str]], rows
) -> None:
    """Write (atomically) each query's candidate ids and the teacher's scores (its own document's first) to
    ``path`` (JSON lines: ``key`` first), for ``kept_scored``."""
    from sbert.atomic import atomic_file

    scored = iter(rows)
    with atomic_file(path, "w", encoding="utf-8") as out:
        out.write(json.dumps({"key": key}) + "\n")
        for ids in negatives:
            scores = list(next(scored).scores) if ids else []
            out.write(json.dumps({"ids": list(ids), "scores": scores}) + "\n")


def kept_scored(
    path: Path, key: dict, documents: Sequence[Document], queries: Sequence[PseudoQuery]
) -> list[DistillationExample] | None:
    """The rows ``keep_scored`` wrote to ``path`` for these ``queries``, if it was written with ``key``; else None
    (no file, other inputs, or a file that does not read: the caller scores again)."""
    try:
        with open(path, encoding="utf-8") as lines:
            if json.loads(next(lines)).get("key") != key:
                return None
            kept = [json.loads(line) for line in lines]
    except (OSError, StopIteration, ValueError, AttributeError):
        return None
    corpus = {d.id: d.joined() for d in documents}
    if len(kept) != len(queries) or any(i not in corpus for row in kept for i in row["ids"]):
        return None
    return [
        DistillationExample(q.query, corpus[q.document], tuple(corpus[i] for i in row["ids"]), tuple(row["scores"]))
        for q, row in zip(queries, kept, strict=True)
        if row["ids"]
    ]


def teacher_scores(
    teacher, rows: Sequence[tuple[str, Sequence[str]]], show_progress: bool | None = False
) -> list[list[float]]:
    """The teacher's score of each (query, candidate) of each row: a cross-encoder's raw output, or a
    bi-encoder's similarity of vectors computed once for each distinct text (``show_progress``: its bar)."""
    import torch

    device = torch.device("cpu")
    if teacher.cross:
        queries, texts = [q for q, c in rows for _ in c], [t for _, c in rows for t in c]
        flat = teacher.scores(queries, texts, device, show_progress).tolist()
        out, at = [], 0
        for _, texts in rows:
            out.append(flat[at : at + len(texts)])
            at += len(texts)
        return out
    texts = list(dict.fromkeys([q for q, _ in rows] + [t for _, c in rows for t in c]))
    vectors = teacher.vectors(texts, device, show_progress).cpu().numpy()
    if teacher.similarity == "cosine":
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    where = {t: i for i, t in enumerate(texts)}
    return [[float(vectors[where[q]] @ vectors[where[t]]) for t in c] for q, c in rows]
