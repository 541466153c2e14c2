"""Distil a static model from any sbert model, by model2vec's published method (sbert's own code).

1. **Vocabulary**: every token of the model's tokenizer (tokens matching ``remove_pattern``, BERT's
   ``[unused...]``, get a zero row and take no part), plus whole words of the user's own corpus that the
   tokenizer splits apart (``corpus_words``: identifiers of bug reports, product names, ...), appended in
   order of frequency.
2. **Token vectors**: each token, between the tokenizer's special tokens (``[CLS] token [SEP]``), through
   the transformer; the mean of its output vectors is the token's row. A corpus word runs as its subword
   tokens (``[CLS] get ##user ##by ##id [SEP]``).
3. **PCA** to ``dim`` dimensions (centred; each component's sign chosen so that its largest score is
   positive, as model2vec does).
4. **Weighting** (SIF with Zipf frequencies, as model2vec 0.10 does): the token of rank r (the token order)
   is taken to have probability p_r proportional to 1 / (r + 2), and its row is multiplied by
   ``sif / (sif + p_r)``: frequent tokens count less in the mean.

The result is a ``StaticEmbedding`` followed by ``Normalize`` (model2vec normalises its output), written in
model2vec's folder format (``sbert.modules.static.save_model2vec``) so that model2vec, sentence-transformers
and sbert all load it. model2vec itself is not needed: its ``distill`` extra pins transformers < 5.4.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import torch

from sbert.atomic import atomic_dir
from sbert.data.corpus import Columns, corpus_file, read_corpus
from sbert.encoder import Encoder
from sbert.eval_mode import evaluating
from sbert.modules import Normalize, StaticEmbedding, Transformer
from sbert.modules.static import save_model2vec
from sbert.progress import progress_bar

UNUSED = r"\[unused\d+\]"  # BERT's placeholder tokens: never seen in text, left out as model2vec does
SIF = 1e-4  # model2vec's default SIF coefficient


@dataclass(frozen=True)
class Vocabulary:
    """The distilled model's tokenizer, and for each of its tokens the base model's token ids to run
    (None: a token left out, whose row stays zero)."""

    tokenizer: object  # tokenizers.Tokenizer
    runs: list[list[int] | None]
    added: list[str]


def corpus_words(texts: Iterable[str], tokenizer, min_count: int = 2, limit: int = 20_000) -> list[str]:
    """Words of ``texts`` (as the tokenizer normalises and pre-splits them) that it does not know whole and
    that hold a letter, seen at least ``min_count`` times: the ``limit`` most frequent, most frequent first."""
    normalizer, splitter = tokenizer.normalizer, tokenizer.pre_tokenizer
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    counts: Counter[str] = Counter()
    for text in texts:
        text = normalizer.normalize_str(text) if normalizer else text
        pieces = splitter.pre_tokenize_str(text) if splitter else [(w, None) for w in text.split()]
        counts.update(word for word, _ in pieces if word not in vocab and any(c.isalpha() for c in word))
    ranked = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
    return ranked[:limit]


def build_vocabulary(transformer: Transformer, words: Sequence[str] = (), remove_pattern: str | None = UNUSED):
    """The static model's tokenizer (the base one, without special tokens, padding or truncation, and with
    ``words`` added whole) and what to run through the transformer for each of its tokens."""
    from tokenizers import Tokenizer

    fast = getattr(transformer.tokenizer, "backend_tokenizer", None)
    if fast is None:
        raise ValueError("distilling needs a fast (Rust) tokenizer: this model's tokenizer is a slow one")
    base = Tokenizer.from_str(fast.to_str())  # a copy without padding or truncation
    base.no_padding()
    base.no_truncation()
    spec = json.loads(base.to_str())
    spec.update(padding=None, truncation=None, post_processor=None)
    size = base.get_vocab_size(with_added_tokens=True)
    added = [w for w in dict.fromkeys(words) if base.token_to_id(w) is None]
    if added and spec.get("model", {}).get("type") == "WordPiece":
        spec["model"]["vocab"].update({w: size + k for k, w in enumerate(added)})  # matched as whole words
        tokenizer = Tokenizer.from_str(json.dumps(spec))
    else:
        from tokenizers import AddedToken

        tokenizer = Tokenizer.from_str(json.dumps(spec))
        tokenizer.add_tokens([AddedToken(w, single_word=True, normalized=True) for w in added])
    prefix, suffix = _specials(base)
    special = set(transformer.tokenizer.all_special_ids)
    pattern = re.compile(remove_pattern) if remove_pattern else None
    runs: list[list[int] | None] = []
    for token_id in range(size):
        token = base.id_to_token(token_id)
        left_out = token_id in special or token is None or (pattern is not None and pattern.fullmatch(token))
        runs.append(None if left_out else [*prefix, token_id, *suffix])
    runs += [base.encode(w, add_special_tokens=True).ids for w in added]
    if tokenizer.get_vocab_size(with_added_tokens=True) != len(runs):
        raise ValueError("the extended tokenizer's size does not match its rows (words clashing with added tokens?)")
    return Vocabulary(tokenizer, runs, added)


def _specials(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens a tokenizer puts before and after a text ([CLS] and [SEP] for BERT)."""
    probe = tokenizer.encode("a", add_special_tokens=True)
    content = [i for i, special in enumerate(probe.special_tokens_mask) if not special]
    return probe.ids[: content[0]], probe.ids[content[-1] + 1 :]


def token_vectors(transformer: Transformer, runs: Sequence[Sequence[int]], batch_size: int = 256, show_progress=None):
    """(len(runs), hidden) float32: the mean of the transformer's output vectors over each id list."""
    out = np.zeros((len(runs), transformer.dim), dtype=np.float32)
    order = np.argsort([len(r) for r in runs], kind="stable")
    device = next(transformer.parameters()).device
    with (
        evaluating(transformer),
        torch.inference_mode(),
        progress_bar(len(runs), "distil", show_progress, "token") as bar,
    ):
        for start in range(0, len(runs), batch_size):
            rows = order[start : start + batch_size]
            features = transformer.collate([runs[r] for r in rows])
            features = transformer({k: v.to(device) for k, v in features.items()})
            mask = features["attention_mask"].unsqueeze(-1).float()
            mean = (features["token_embeddings"].float() * mask).sum(1) / mask.sum(1).clamp(min=1)
            out[rows] = mean.cpu().numpy()
            bar.update(len(rows))
    return out


@dataclass(frozen=True)
class Projection:
    """A PCA fitted once: ``apply(x) = (x - mean) @ components`` (``components``: (width, dim))."""

    mean: np.ndarray
    components: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.components.shape[1])

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        """``vectors`` (n, width) projected to (n, dim), float32."""
        return ((vectors.astype(np.float64) - self.mean) @ self.components).astype(np.float32)


def fit_pca(vectors: np.ndarray, dim: int) -> Projection:
    """The ``dim`` leading principal components of ``vectors`` (eigenvectors of the covariance, float64), each
    component's sign such that its largest-magnitude score on ``vectors`` is positive (model2vec's rule)."""
    if not 1 <= dim <= min(vectors.shape):
        raise ValueError(f"dim must be from 1 to {min(vectors.shape)} (the model's width and the rows), got {dim}")
    mean = vectors.astype(np.float64).mean(axis=0)
    centred = vectors.astype(np.float64) - mean
    values, vectors_ = np.linalg.eigh(centred.T @ centred)
    components = vectors_[:, np.argsort(values)[::-1][:dim]]
    scores = centred @ components
    signs = np.sign(scores[np.abs(scores).argmax(axis=0), np.arange(dim)])
    return Projection(mean, components * np.where(signs == 0, 1, signs))


def pca(vectors: np.ndarray, dim: int) -> np.ndarray:
    """``vectors`` centred and projected on their ``dim`` leading principal components (``fit_pca``)."""
    return fit_pca(vectors, dim).apply(vectors)


def zipf_weights(n: int, sif: float = SIF) -> np.ndarray:
    """``sif / (sif + p_r)`` for ranks r = 0..n-1, with p_r = (1 / (r + 2)) / sum: increasing with rank."""
    if not 0 < sif < 1:
        raise ValueError(f"the SIF coefficient must be between 0 and 1, got {sif}")
    inverse = 1.0 / np.arange(2, n + 2)
    return sif / (sif + inverse / inverse.sum())


def distill(
    encoder: Encoder,
    *,
    words: Sequence[str] = (),
    dim: int | None = 256,
    sif: float | None = SIF,
    remove_pattern: str | None = UNUSED,
    batch_size: int = 256,
    show_progress: bool | None = None,
) -> Encoder:
    """A static model (``StaticEmbedding`` + ``Normalize``) distilled from ``encoder`` (see the module's
    docstring); ``dim=None`` keeps the transformer's width without PCA, ``sif=None`` weights nothing."""
    check_dim(encoder, dim)
    transformer = cast(Transformer, encoder.transformer)  # check_dim refused a static model
    vocab = build_vocabulary(transformer, words, remove_pattern)
    kept = np.array([i for i, run in enumerate(vocab.runs) if run is not None])
    rows = token_vectors(transformer, [vocab.runs[i] for i in kept], batch_size, show_progress)
    if dim is not None:
        rows = pca(rows, dim)
    if sif is not None:
        rows = rows * zipf_weights(len(rows), sif)[:, None].astype(np.float32)
    table = np.zeros((len(vocab.runs), rows.shape[1]), dtype=np.float32)
    table[kept] = rows
    static = StaticEmbedding(vocab.tokenizer, table, skip_unknown=True)
    return Encoder([static, Normalize()])


def check_dim(encoder: Encoder, dim: int | None) -> None:
    """Refuse, before any work, a model that is already static or a ``dim`` outside 1 to its width (PCA
    keeps at most as many dimensions as the token vectors have)."""
    if not isinstance(encoder.transformer, Transformer):
        raise ValueError("this model is already a static model; distil from a transformer model")
    width = encoder.transformer.dim
    if dim is not None and not 1 <= dim <= width:
        raise ValueError(
            f"dim {dim}: a static model distilled from this one keeps from 1 to {width} dimensions (the width of "
            "its token vectors); dim=None (--dim 0) keeps them all"
        )


def save_distilled(model: Encoder, path: str | Path, base: str = "") -> Path:
    """Write a distilled model atomically in model2vec's folder format (model2vec, sentence-transformers and
    sbert load it); ``base`` names the model it came from in ``config.json``."""
    with atomic_dir(path) as tmp:
        normalize = any(isinstance(m, Normalize) for m in model)
        save_model2vec(
            cast(StaticEmbedding, model.transformer),
            tmp,
            normalize=normalize,
            config={"tokenizer_name": base, "distilled_by": "sbert"},
        )
    return Path(path)


def distill_model(
    base: str | Path,
    out: str | Path,
    *,
    corpus: str | Path | None = None,
    dim: int | None = 256,
    min_count: int = 2,
    max_words: int = 20_000,
    sif: float | None = SIF,
    device: str | None = None,
    allow_pickle: bool = False,
    show_progress: bool | None = None,
    columns: Columns | None = None,
    overwrite: bool = True,
) -> dict:
    """``sbert distill``: load ``base``, add the words of ``corpus`` (a BEIR folder or a corpus file read as
    ``sbert index build`` reads it, ``columns`` naming its fields; see ``corpus_words``), distil, write ``out``
    (a model already there is refused, before any work, unless ``overwrite``); returns a summary (vocabulary,
    added, dim)."""
    import sbert
    from sbert.atomic import check_model_target
    from sbert.model_names import canonical_name

    check_model_target(out, overwrite)

    encoder = sbert.load(base, device=device, allow_pickle=allow_pickle)
    check_dim(encoder, dim)  # before the corpus is read and the tokens run
    words: list[str] = []
    if corpus is not None:
        texts = read_corpus(corpus_file(corpus), skip_empty=True, columns=columns).joined()
        words = corpus_words(texts, encoder.transformer.tokenizer.backend_tokenizer, min_count, max_words)
    model = distill(encoder, words=words, dim=dim, sif=sif, show_progress=show_progress)
    save_distilled(model, out, canonical_name(base))
    static = model.transformer
    return {
        "out": str(out),
        "vocabulary": static.vocab_size,
        "added_words": words[:20],
        "added": len(words),
        "dim": static.dim,
    }
