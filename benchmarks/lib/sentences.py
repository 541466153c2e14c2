"""Sentences of the shared data: distinct ones and their embeddings (cached in benchmarks/.work), and the
STSb test pairs as one list with the score of their embeddings."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.lib.paths import WORK
from sbert.data.nli import read_nli
from sbert.data.sts import read_semeval_sts, read_sick, read_stsb
from sbert.data.transfer import TASKS, read_transfer_task


def _pairs_texts(pairs) -> list[str]:
    return [t for p in pairs for t in (p.sentence1, p.sentence2)]


def sentences(data: Path, sources: tuple[str, ...] = ("stsb", "sick", "snli")) -> list[str]:
    """Distinct non-empty sentences, in first-seen order: stsb, sick, snli, sts12, senteval."""
    texts: list[str] = []
    if "stsb" in sources:
        for split in ("train", "dev", "test"):
            texts += _pairs_texts(read_stsb(data / "stsbenchmark" / f"sts-{split}.csv"))
    if "sick" in sources:
        for split in ("train", "trial", "test_annotated"):
            texts += _pairs_texts(read_sick(data / "sick" / f"SICK_{split}.txt.gz"))
    if "snli" in sources:
        texts += _pairs_texts(read_nli(data / "nli" / "snli_senteval"))
    if "sts12" in sources:
        for pairs in read_semeval_sts(data / "sts12-16" / "raw" / "STS12-en-test").values():
            texts += _pairs_texts(pairs)
    if "senteval" in sources:
        for name in TASKS:
            for split in read_transfer_task(data / "senteval_transfer", name).splits.values():
                for t in split.texts:
                    texts += list(t) if isinstance(t, tuple) else [t]
    return [t for t in dict.fromkeys(s.strip() for s in texts) if t]


def embedded(data: Path, sources: tuple[str, ...], model: str = "default") -> tuple[list[str], np.ndarray]:
    """``sentences(data, sources)`` and their float32 embeddings by ``model``, cached by name and count."""
    import sbert

    texts = sentences(data, sources)
    cache = WORK / f"emb-{model}-{'-'.join(sources)}-{len(texts)}.npy"
    if cache.is_file():
        return texts, np.load(cache)
    emb = sbert.load(model, device="cpu").encode(texts, batch_size=64, show_progress=True, on_truncation="ignore")
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, emb)
    return texts, emb


def stsb_test_sentences(folder: Path) -> list[str]:
    """STSb test's pairs as one list: sentence 1, sentence 2, sentence 1 of the next pair, ..."""
    pairs = read_stsb(folder / "stsbenchmark" / "sts-test.csv")
    return [s for p in pairs for s in (p.sentence1, p.sentence2)]


def stsb_spearman(emb: np.ndarray, gold: list[float]) -> float:
    """Spearman x 100 of the cosine of each pair's rows (0 and 1, 2 and 3, ...) against the gold scores."""
    from scipy.stats import spearmanr

    a, b = emb[0::2], emb[1::2]
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return 100 * spearmanr(cos, gold).statistic
