"""A model that scores for a loss without being trained by it: a distillation teacher or a GISTEmbed guide.

``Teacher`` wraps any local bi-encoder (scores: its vectors' similarity) or cross-encoder (scores: its
raw output for each (query, candidate) pair). It is held outside the loss's modules, so the trainer
neither trains nor checkpoints it; it runs without gradients on the device of the model being trained.
A frozen bi-encoder gives a text the same vector every time it sees it, so ``vectors`` keeps each text's
vector (on the CPU, up to ``cache_size`` texts): a second epoch, or a master report in many rows, costs
the teacher nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from sbert.cross_encoder import CrossEncoder
    from sbert.encoder import Encoder


def is_cross_encoder_folder(folder: Path) -> bool:
    """A Hugging Face sequence-classification folder without sentence-transformers modules."""
    import json

    config = folder / "config.json"
    if (folder / "modules.json").is_file() or not config.is_file():
        return False
    try:
        architectures = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
    except (ValueError, AttributeError):
        return False
    return any(str(a).endswith("ForSequenceClassification") for a in architectures)


class Teacher:
    """Scores (query, candidate) pairs and embeds texts with a frozen model (``model``: a loaded bi-encoder,
    cross-encoder or the path of either).

    ``max_seq_length``: a bi-encoder reads at most that many tokens of a text (the student's training length,
    so that it scores the text the student reads; a long document then costs it a fraction of its own limit's
    time); None, or a cross-encoder: the model's own limit. A loaded model passed in is cut in place."""

    def __init__(
        self, model: Any, batch_size: int = 32, cache_size: int = 100_000, max_seq_length: int | None = None
    ) -> None:
        if isinstance(model, (str, Path)):
            model = load_teacher(model)
        self.model, self.batch_size = model, int(batch_size)
        self.cache_size = int(cache_size)
        self._cached: dict[Any, Any] = {}
        self.cross = hasattr(model, "predict") and not hasattr(model, "embed_with_grad")
        # a text cut to the student's length is cut on purpose: no truncation warning at every step
        self._cut = max_seq_length is not None and not self.cross
        if max_seq_length is not None and self._cut:
            model.max_seq_length = min(model.max_seq_length, int(max_seq_length))
        if self.cross and model.num_labels != 1:
            raise ValueError(f"a cross-encoder teacher must give one score per pair; this one gives {model.num_labels}")
        self.similarity = getattr(model, "similarity_fn_name", None) or "cosine"
        if self.similarity not in ("cosine", "dot"):
            raise ValueError(f"teacher similarity {self.similarity!r}: only cosine and dot products are supported")

    def _follow(self, device: torch.device) -> None:
        if isinstance(self.model, torch.nn.Module) and next(self.model.parameters()).device != device:
            self.model.to(device)

    def vectors(self, texts: Sequence[str], device: torch.device, show_progress: bool | None = False) -> torch.Tensor:
        """(len(texts), teacher's dim): the teacher's vectors, without gradients (bi-encoders only);
        ``show_progress``: the encode bar of the texts not yet kept."""
        if self.cross:
            raise ValueError("a cross-encoder has no vectors: embedding distillation needs a bi-encoder teacher")
        fresh: dict[str, torch.Tensor] = {}
        new = [t for t in dict.fromkeys(texts) if t not in self._cached]
        if new:
            self._follow(device)
            quiet = {"on_truncation": "ignore"} if self._cut else {}
            out = self.model.encode(new, batch_size=self.batch_size, show_progress=show_progress, **quiet)
            fresh = dict(zip(new, torch.as_tensor(out, dtype=torch.float32).cpu(), strict=True))
            room = max(self.cache_size - len(self._cached), 0)
            self._cached.update(list(fresh.items())[:room])
        rows = [fresh[t] if t in fresh else self._cached[t] for t in texts]
        return torch.stack(rows).to(device) if rows else torch.empty(0, device=device)

    def remember(self, texts: Sequence[str], vectors: torch.Tensor) -> None:
        """Keep ``vectors`` (one row per text, from this teacher: e.g. an earlier run's ``vectors``, saved) as
        the vectors of ``texts``, so that ``vectors`` returns them without encoding (up to ``cache_size``)."""
        if self.cross:
            raise ValueError("a cross-encoder has no vectors to remember")
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise ValueError(
                f"expected one vector per text: {len(texts)} texts, vectors of shape {tuple(vectors.shape)}"
            )
        room = max(self.cache_size - len(self._cached), 0)
        fresh = [
            (t, v)
            for t, v in zip(texts, vectors.detach().to("cpu", torch.float32), strict=True)
            if t not in self._cached
        ]
        self._cached.update(fresh[:room])

    def scores(
        self,
        queries: Sequence[str],
        candidates: Sequence[str],
        device: torch.device,
        show_progress: bool | None = False,
    ) -> torch.Tensor:
        """(n,): the teacher's score of each (queries[i], candidates[i]) (``show_progress``: its bars)."""
        self._follow(device)
        if self.cross:
            pairs = list(zip(queries, candidates, strict=True))
            out = self.model.predict(
                pairs, batch_size=self.batch_size, show_progress=show_progress, activation="identity"
            )
            return torch.as_tensor(out, dtype=torch.float32, device=device).reshape(-1)
        q, c = self.vectors(queries, device, show_progress), self.vectors(candidates, device, show_progress)
        if self.similarity == "cosine":
            q, c = F.normalize(q, dim=-1), F.normalize(c, dim=-1)
        return (q * c).sum(-1)

    def similarity_matrix(self, a: Sequence[str], b: Sequence[str], device: torch.device) -> torch.Tensor:
        """(len(a), len(b)) cosine similarities of the teacher's vectors (bi-encoders: the GISTEmbed guide)."""
        return F.normalize(self.vectors(a, device), dim=-1) @ F.normalize(self.vectors(b, device), dim=-1).T


def teacher_folder(path: str | Path) -> Path:
    """The local folder of a teacher or guide (a folder or a shipped name); ``ModelNotFoundError`` if none."""
    from sbert.errors import ModelNotFoundError
    from sbert.model_names import resolve

    folder = resolve(path)
    if not folder.is_dir():
        raise ModelNotFoundError(f"{path}: no such model folder (a teacher or guide must be a local model)")
    return folder


def load_teacher(path: str | Path, device: str | None = None) -> Any:
    """A bi-encoder or cross-encoder from a local folder (or a shipped name), read without training state."""
    folder = teacher_folder(path)
    if is_cross_encoder_folder(folder):
        from sbert.cross_encoder import CrossEncoder

        model: CrossEncoder | Encoder = CrossEncoder.load(folder, device=device or "cpu")
    else:
        import sbert

        model = sbert.load(folder, device=device or "cpu")
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def teacher_from(setting: str, max_seq_length: int | None = None) -> Teacher | None:
    """The ``Teacher`` a loss setting names (a model path), or None for an empty setting; a bi-encoder reads
    at most ``max_seq_length`` tokens of a text (the student's training length)."""
    return Teacher(setting, max_seq_length=max_seq_length) if setting else None
