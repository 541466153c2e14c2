"""Teacher-scored candidates for pseudo-queries (GPL without its query generator).

For each pseudo-query, candidates come from the student (its best-ranked other documents, by
``mine_hard_negatives``) and from BM25 (its best-ranked other documents); a teacher (any local bi-encoder
or cross-encoder) scores the query against its own document and each candidate. The student then learns
the teacher's margins (MarginMSE) or its ranking (KL over the candidates).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sbert.adapt.pseudo_queries import PseudoQuery
from sbert.data.beir import Document
from sbert.data.examples import DistillationExample


def candidates(
    student, documents: Sequence[Document], queries: Sequence[PseudoQuery], dense: int = 2, lexical: int = 2
) -> list[list[str]]:
    """For each query, up to ``dense`` student-ranked and ``lexical`` BM25-ranked document ids other than its
    own (and other than copies of its own text), student's first."""
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
            show_progress=False,
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
    teacher, documents: Sequence[Document], queries: Sequence[PseudoQuery], negatives: Sequence[Sequence[str]]
) -> list[DistillationExample]:
    """One row per query that has candidates: (query, its document, the candidates, the teacher's scores)."""
    corpus = {d.id: d.joined() for d in documents}
    rows = [
        (q.query, [corpus[q.document], *(corpus[i] for i in ids)])
        for q, ids in zip(queries, negatives, strict=True)
        if ids
    ]
    scores = teacher_scores(teacher, rows)
    return [
        DistillationExample(query, texts[0], tuple(texts[1:]), tuple(s))
        for (query, texts), s in zip(rows, scores, strict=True)
    ]


def teacher_scores(teacher, rows: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
    """The teacher's score of each (query, candidate) of each row: a cross-encoder's raw output, or a
    bi-encoder's similarity of vectors computed once for each distinct text."""
    import torch

    device = torch.device("cpu")
    if teacher.cross:
        flat = teacher.scores([q for q, c in rows for _ in c], [t for _, c in rows for t in c], device).tolist()
        out, at = [], 0
        for _, texts in rows:
            out.append(flat[at : at + len(texts)])
            at += len(texts)
        return out
    texts = list(dict.fromkeys([q for q, _ in rows] + [t for _, c in rows for t in c]))
    vectors = teacher.vectors(texts, device).cpu().numpy()
    if teacher.similarity == "cosine":
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    where = {t: i for i, t in enumerate(texts)}
    return [[float(vectors[where[q]] @ vectors[where[t]]) for t in c] for q, c in rows]
