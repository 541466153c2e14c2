"""CrossEncoder: both sentences through one transformer, ``[CLS] a [SEP] b [SEP]``, and a head on top.

The paper's starting point (BERT for sentence-pair regression and classification): accurate, but it
scores pairs, not sentences, so comparing n sentences costs n(n-1)/2 passes. Here it re-ranks a
bi-encoder's candidates. The folder format is Hugging Face's sequence-classification one (config.json
with ``num_labels``, weights, tokenizer), which sentence-transformers' CrossEncoder also reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sbert.atomic import atomic_dir, recover
from sbert.batching import batches
from sbert.device import resolve_device
from sbert.errors import ModelFormatError, ModelNotFoundError
from sbert.eval_mode import evaluating
from sbert.modules.base import write_json
from sbert.modules.folder import check_finite, check_links, read_json, refuse_remote_code, weight_files
from sbert.modules.transformer import quiet_transformers
from sbert.progress import ENCODE_FROM, progress_bar
from sbert.versions import saved_versions

TextPair = tuple[str, str]
ACTIVATIONS = ("sigmoid", "softmax", "identity")
# How sentence-transformers names each activation ("torch.nn.modules.linear.Identity"): version 6 writes it
# to config_sentence_transformers.json ("activation_fn"), versions 4-5 to config.json
# ("sentence_transformers": {"activation_fn": ...}), older ones to "sbert_ce_default_activation_function".
ST_ACTIVATIONS = {
    "sigmoid": "torch.nn.modules.activation.Sigmoid",
    "softmax": "torch.nn.modules.activation.Softmax",
    "identity": "torch.nn.modules.linear.Identity",
}
ST_CONFIG = "config_sentence_transformers.json"


class CrossEncoder(nn.Module):
    """A sequence-classification transformer over sentence pairs: ``num_labels`` scores per pair.

    ``activation`` turns logits into scores in ``predict``: "sigmoid" (the default for one label, as
    sentence-transformers does), "softmax", or "identity" (the default for several labels).
    """

    def __init__(self, model, tokenizer, max_length: int | None = None, activation: str | None = None) -> None:
        super().__init__()
        self.model, self.tokenizer = model, tokenizer
        limit = getattr(tokenizer, "model_max_length", 512)
        self.max_length = int(max_length or min(limit if limit < 10**6 else 512, 512))
        activation = activation or ("sigmoid" if self.num_labels == 1 else "identity")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.path: Path | None = None
        self.settings: dict = {}  # config_sentence_transformers.json as read, written back by save

    @property
    def num_labels(self) -> int:
        return int(self.model.config.num_labels)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    # -- construction ----------------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        num_labels: int | None = None,
        max_length: int | None = None,
        activation: str | None = None,
        allow_pickle: bool = False,
        device: str | None = None,
    ) -> CrossEncoder:
        """Load a Hugging Face folder (or a shipped model name, e.g. "default": then the head is new).

        ``num_labels`` sets the head's width when the folder has none (a plain encoder's folder); given
        for a folder whose head has another width (say 3 NLI labels), it puts a new head on that
        transformer (NLI -> STSb). Never downloads; ``allow_pickle`` is needed for ``pytorch_model.bin``-only folders.
        """
        from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

        from sbert.model_names import resolve

        if Path(path).expanduser().parent.is_dir():
            recover(Path(path).expanduser())  # a replace killed between its two renames hid the old version
        folder = resolve(path)
        if (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
            raise ModelFormatError(f"{folder}: a sentence-transformers folder without config.json")
        if not (folder / "config.json").is_file():
            raise ModelNotFoundError(f"{folder}: no config.json; expected a Hugging Face model folder")
        check_links(folder)
        refuse_remote_code(folder)
        weights, has_safe = weight_files(folder, allow_pickle, "cross-encoder weights")
        settings = read_json(folder / ST_CONFIG) if (folder / ST_CONFIG).is_file() else {}
        try:
            config = AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
            has_head = any(a.endswith("ForSequenceClassification") for a in config.architectures or [])
            new_head = has_head and num_labels is not None and num_labels != config.num_labels
            kwargs = {"num_labels": num_labels, "ignore_mismatched_sizes": new_head} if num_labels else {}
            with quiet_transformers():
                model = AutoModelForSequenceClassification.from_pretrained(
                    folder, local_files_only=True, trust_remote_code=False, use_safetensors=has_safe, **kwargs
                )
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
        except (OSError, ValueError, KeyError, RuntimeError, EOFError) as err:  # RuntimeError: a damaged .bin
            raise ModelFormatError(f"{folder}: cannot load the cross-encoder or its tokenizer: {err}") from err
        check_finite(model, weights[0] if len(weights) == 1 else folder)
        if activation is None and not new_head:
            activation = _saved_activation(folder, model.config, settings)
        encoder = cls(model, tokenizer, max_length, activation)
        encoder.path = folder
        encoder.settings = settings
        return encoder.to(resolve_device(device))

    # -- inference -------------------------------------------------------------------------------------
    def tokenize(self, pairs: Sequence[TextPair]) -> dict[str, list[list[int]]]:
        """Token ids of each pair as ``[CLS] a [SEP] b [SEP]`` (with token type ids), cut to
        ``max_length`` by trimming the longer side first."""
        pairs = _check_pairs(pairs)
        return self.tokenizer(
            [a for a, _ in pairs],
            [b for _, b in pairs],
            truncation="longest_first",
            max_length=self.max_length,
            padding=False,
        )

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits (B, num_labels) of padded features."""
        return self.model(**features, return_dict=True).logits

    def _collate(self, encoded, rows: np.ndarray | Sequence[int]) -> dict[str, torch.Tensor]:
        batch = [{k: encoded[k][r] for k in encoded} for r in rows]
        padded = self.tokenizer.pad(batch, padding=True, return_tensors="pt")
        return {k: v.to(self.device) for k, v in padded.items()}

    @torch.inference_mode()
    def predict(
        self,
        pairs: Sequence[TextPair],
        batch_size: int = 32,
        show_progress: bool | None = None,
        activation: str | None = None,
    ) -> np.ndarray:
        """Scores of each pair, in input order: (n,) for one label, (n, num_labels) otherwise.

        Pairs are sorted by length and padded per batch (smart batching).
        """
        activation = activation or self.activation
        encoded = self.tokenize(pairs)
        lengths = [len(ids) for ids in encoded["input_ids"]]
        out = np.empty((len(lengths), self.num_labels), dtype=np.float32)
        with (
            evaluating(self),
            progress_bar(len(lengths), "predict", show_progress, "pair", from_items=ENCODE_FROM) as bar,
        ):
            for rows in batches(lengths, batch_size):
                logits = self(self._collate(encoded, rows)).float()
                out[rows] = _activate(logits, activation).cpu().numpy()
                bar.update(len(rows))
        return out[:, 0] if self.num_labels == 1 else out

    def rank(
        self, query: str, documents: Sequence[str], top_k: int | None = None, batch_size: int = 32
    ) -> list[tuple[int, float]]:
        """(document index, score) of the best ``top_k`` documents for ``query``, best first (ties: lower index)."""
        if self.num_labels != 1:
            raise ValueError(f"rank needs a one-label cross-encoder; this one has {self.num_labels} labels")
        from sbert.search.ranking import order

        scores = self.predict([(query, d) for d in documents], batch_size=batch_size)
        return [(int(i), float(scores[i])) for i in order(scores)[: top_k or None]]

    # -- disk ------------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the Hugging Face sequence-classification folder atomically; returns its path.

        The activation goes where each version of sentence-transformers reads it (config.json's
        ``sentence_transformers.activation_fn`` and config_sentence_transformers.json's ``activation_fn``);
        settings read from config_sentence_transformers.json that sbert does not use are written back.
        """
        self.model.config.sbert_activation = self.activation
        self.model.config.sentence_transformers = {"activation_fn": ST_ACTIVATIONS[self.activation]}
        settings = dict(self.settings)
        settings["__version__"] = {**settings.get("__version__", {}), **saved_versions()}
        settings.update({"activation_fn": ST_ACTIVATIONS[self.activation], "model_type": "CrossEncoder"})
        settings.setdefault("prompts", {})
        settings.setdefault("default_prompt_name", None)
        with atomic_dir(path) as tmp, quiet_transformers():
            self.model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            write_json(tmp / ST_CONFIG, settings)
        return Path(path)


def _activation_name(path: object, source: str) -> str:
    """``torch.nn.modules.linear.Identity`` (or ``torch.nn.Identity``) -> "identity"; others are refused."""
    name = str(path).rsplit(".", 1)[-1].lower()
    if not str(path).startswith("torch.") or name not in ACTIVATIONS:
        raise ModelFormatError(
            f"{source}: activation {path!r} is not one sbert applies ({', '.join(ST_ACTIVATIONS.values())}); "
            "pass activation='sigmoid', 'softmax' or 'identity' to choose one"
        )
    return name


def _saved_activation(folder: Path, config, settings: dict) -> str | None:
    """The activation saved with a folder, looked up in the order sentence-transformers 6 uses; None if none."""
    if (folder / "modules.json").is_file() and settings.get("activation_fn"):
        return _activation_name(settings["activation_fn"], f"{folder / ST_CONFIG} (activation_fn)")
    config_file = folder / "config.json"
    in_config = getattr(config, "sentence_transformers", None)
    if isinstance(in_config, dict) and in_config.get("activation_fn"):
        return _activation_name(in_config["activation_fn"], f"{config_file} (sentence_transformers.activation_fn)")
    legacy = getattr(config, "sbert_ce_default_activation_function", None)
    if legacy:
        return _activation_name(legacy, f"{config_file} (sbert_ce_default_activation_function)")
    saved = getattr(config, "sbert_activation", None)
    if saved is not None and saved not in ACTIVATIONS:
        raise ModelFormatError(f"{config_file}: sbert_activation {saved!r} is not one of {', '.join(ACTIVATIONS)}")
    return saved


def _activate(logits: torch.Tensor, activation: str) -> torch.Tensor:
    if activation == "sigmoid":
        return torch.sigmoid(logits)
    if activation == "softmax":
        return torch.softmax(logits, dim=-1)
    if activation == "identity":
        return logits
    raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")


def _check_pairs(pairs) -> list[TextPair]:
    if isinstance(pairs, tuple) and len(pairs) == 2 and all(isinstance(p, str) for p in pairs):
        raise TypeError("predict takes a list of (text_a, text_b) pairs; wrap a single pair in a list")
    items = list(pairs)
    for i, pair in enumerate(items):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
            raise TypeError(f"pairs[{i}] must be a (str, str) pair, got {pair!r}"[:200])
        if not pair[0].strip() or not pair[1].strip():
            raise ValueError(f"pairs[{i}] has an empty text")
    return [tuple(p) for p in items]
