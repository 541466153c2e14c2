"""Teacher-scored candidates for pseudo-queries (GPL without its query generator).

For each pseudo-query, candidates come from the student (its best-ranked other documents, by
``mine_hard_negatives``) and from BM25 (its best-ranked other documents); a teacher (any local bi-encoder
or cross-encoder) scores the query against its own document and each candidate. The student then learns
the teacher's margins (MarginMSE) or its ranking (KL over the candidates).

Finding and scoring the candidates is a long part of a teacher method (``adapt`` scores only the
pseudo-queries its steps train on, ``sbert.adapt.recipe.trained_queries``: 3,200 at 100 steps of 32, which
took 27 minutes over SciFact on two CPU cores before the first step), so ``scored_rows`` writes each query's
candidates and, chunk by chunk, their scores beside the checkpoints, and a resumed run with the same inputs
reads them back and scores only what is missing (Ctrl-C while scoring: ``ScoringInterrupted``).
"""

from __future__ import annotations

import hashlib
import json
import os
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


CHUNK = 512  # pseudo-queries the teacher scores between two writes of the kept file


class ScoringInterrupted(KeyboardInterrupt):
    """Ctrl-C while the teacher scored: ``done`` of ``total`` pseudo-queries' scores are kept in ``path``.

    A ``KeyboardInterrupt`` (as ``TrainingInterrupted``), ``exit_code`` 130; ``explain`` gives the command
    that goes on."""

    exit_code = 130

    def __init__(self, done: int, total: int, path: Path | None) -> None:
        self.done, self.total, self.path = done, total, path
        super().__init__(
            f"{self._headline()}; to go on, run the same command again with --resume (in Python: resume=True)"
        )

    def _headline(self) -> str:
        kept = f", kept in {self.path}" if self.path else ""
        return f"stopped while the teacher scored: {self.done:,} of {self.total:,} pseudo-queries scored{kept}"

    def explain(self, argv: Sequence[str]) -> str:
        """The message, with the command line ``argv`` (``sys.argv``) turned into the one that resumes."""
        from sbert.training.trainer import resume_command

        return f"{self._headline()}\ngo on with:\n  {resume_command(argv)}"


def scored_rows(
    student,
    teacher: str,
    documents: Sequence[Document],
    queries: Sequence[PseudoQuery],
    dense: int = 2,
    lexical: int = 2,
    *,
    path: Path | None = None,
    key: dict | None = None,
    resume: bool = False,
    show_progress: bool | None = False,
    max_seq_length: int | None = None,
) -> list[DistillationExample]:
    """Each query's ``candidates`` scored by the ``teacher`` (a model folder or name; ``teacher_rows``; a
    bi-encoder reading at most ``max_seq_length`` tokens of a text, the student's training length),
    ``CHUNK`` queries at a time. With a ``path``, the candidates and then each chunk's scores are written
    there as they are made (JSON lines: ``key`` and every query's candidate ids, then one line of scores a
    query); with ``resume``, a file written with the same ``key`` is read back and only the queries it lacks
    are scored. Ctrl-C while scoring raises ``ScoringInterrupted``."""
    from sbert.losses.teachers import Teacher
    from sbert.progress import progress_bar

    found, done = _kept(path, key, documents, len(queries)) if path and resume else (None, [])
    if found is None:
        found, done = candidates(student, documents, queries, dense, lexical, show_progress), []
    if path:
        _write(path, key, found, done)  # the candidates, and any scores read back (not a line cut by a kill)
    if len(done) < len(queries):
        model = Teacher(teacher, max_seq_length=max_seq_length)
        with progress_bar(len(queries), "teacher", show_progress, "query", initial=len(done)) as bar:
            for start in range(len(done), len(queries), CHUNK):
                part = slice(start, start + CHUNK)
                try:
                    scored = iter(teacher_rows(model, documents, queries[part], found[part]))
                except KeyboardInterrupt as stop:
                    raise ScoringInterrupted(len(done), len(queries), path) from stop
                fresh = [list(next(scored).scores) if ids else [] for ids in found[part]]
                if path:
                    with open(path, "a", encoding="utf-8") as out:
                        out.write("".join(json.dumps(row) + "\n" for row in fresh))
                        out.flush()
                        os.fsync(out.fileno())
                done += fresh
                bar.update(len(fresh))
    corpus = {d.id: d.joined() for d in documents}
    return [
        DistillationExample(q.query, corpus[q.document], tuple(corpus[i] for i in ids), tuple(scores))
        for q, ids, scores in zip(queries, found, done, strict=True)
        if ids
    ]


def _write(path: Path, key: dict | None, found: Sequence[Sequence[str]], done: Sequence[Sequence[float]]) -> None:
    from sbert.atomic import atomic_file

    with atomic_file(path, "w", encoding="utf-8") as out:
        out.write(json.dumps({"key": key, "candidates": [list(ids) for ids in found]}) + "\n")
        out.write("".join(json.dumps(list(row)) + "\n" for row in done))


def _kept(
    path: Path, key: dict | None, documents: Sequence[Document], total: int
) -> tuple[list[list[str]] | None, list[list[float]]]:
    """The candidates and the scores so far that ``scored_rows`` wrote to ``path`` with ``key``; (None, [])
    where there is no such file, it was written for other inputs, or its candidates do not read."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
        head = json.loads(lines[0])
    except (OSError, ValueError):
        return None, []
    found = head.get("candidates") if isinstance(head, dict) and head.get("key") == key else None
    ids = {d.id for d in documents}
    if not isinstance(found, list) or len(found) != total or any(i not in ids for row in found for i in row):
        return None, []
    done: list[list[float]] = []
    for line in lines[1 : total + 1]:
        try:
            row = json.loads(line)
        except ValueError:
            break  # a line cut short by a kill: that query is scored again
        if not isinstance(row, list) or len(row) != (1 + len(found[len(done)]) if found[len(done)] else 0):
            break
        done.append(row)
    return found, done


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
        for _, candidates in rows:
            out.append(flat[at : at + len(candidates)])
            at += len(candidates)
        return out
    texts = list(dict.fromkeys([q for q, _ in rows] + [t for _, c in rows for t in c]))
    vectors = teacher.vectors(texts, device, show_progress).cpu().numpy()
    if teacher.similarity == "cosine":
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    where = {t: i for i, t in enumerate(texts)}
    return [[float(vectors[where[q]] @ vectors[where[t]]) for t in c] for q, c in rows]
