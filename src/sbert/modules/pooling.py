"""Pooling: token vectors (batch, seq, hidden) and their mask -> one sentence vector (batch, dim).

Sentence-BERT §3 uses MEAN (default), CLS or MAX. Padding never counts: MEAN averages real tokens
only and MAX is taken over real tokens only. Several modes may be combined; their vectors are then
concatenated in the order given, as sentence-transformers 6 does with its ``pooling_mode`` list.

On disk, modes in the order of ``MODES`` are written as the ``pooling_mode_*`` flags every version of
sentence-transformers reads (in that order); any other order as sentence-transformers 6's
``pooling_mode`` list, which older versions refuse rather than read in another order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from sbert.errors import ModelFormatError
from sbert.modules.base import Features, Module, write_json
from sbert.modules.folder import check_width, read_json

MODES = ("cls", "max", "mean", "mean_sqrt_len", "weightedmean", "lasttoken")
_CONFIG_KEYS = {
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean": "pooling_mode_mean_tokens",
    "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
    "weightedmean": "pooling_mode_weightedmean_tokens",
    "lasttoken": "pooling_mode_lasttoken",
}
_ST_NAMES = {"mean_sqrt_len": "mean_sqrt_len_tokens"}  # sentence-transformers 6's names where they differ


def pool(
    token_embeddings: torch.Tensor, attention_mask: torch.Tensor, mode: str, origin: torch.Tensor | None = None
) -> torch.Tensor:
    """Pool ``token_embeddings`` (B, T, H) under ``attention_mask`` (B, T; 1 = real token) to (B, H).

    ``origin`` (B,): where each text starts, for "weightedmean"'s positions (default: its first real token).
    """
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    rows = torch.arange(token_embeddings.shape[0], device=token_embeddings.device)
    first = attention_mask.to(torch.int32).argmax(dim=1)  # first real token: 0 unless padded on the left
    origin = first if origin is None else origin
    if mode == "cls":
        return token_embeddings[rows, first]
    if mode == "max":
        fill = torch.finfo(token_embeddings.dtype).min
        return token_embeddings.masked_fill(mask == 0, fill).max(dim=1).values
    if mode == "lasttoken":
        # Index of the last real token, whichever side the padding is on.
        seq_len = attention_mask.shape[1]
        last = seq_len - 1 - attention_mask.to(torch.int32).flip(dims=[1]).argmax(dim=1)
        return token_embeddings[rows, last]
    if mode == "weightedmean":
        # Weights 1, 2, ... by position among the real tokens (Muennighoff, 2022).
        positions = torch.arange(1, token_embeddings.shape[1] + 1, device=mask.device, dtype=mask.dtype)
        mask = mask * (positions.view(1, -1) - origin.view(-1, 1).to(mask.dtype)).unsqueeze(-1)
    summed = (token_embeddings * mask).sum(dim=1)
    counts = mask.sum(dim=1).clamp(min=1e-9)
    if mode in ("mean", "weightedmean"):
        return summed / counts
    if mode == "mean_sqrt_len":
        return summed / counts.sqrt()
    raise ValueError(f"unknown pooling mode {mode!r}; expected one of {', '.join(MODES)}")


def without_prompt(attention_mask: torch.Tensor, prompt_length: torch.Tensor) -> torch.Tensor:
    """``attention_mask`` (B, T) with each row's first ``prompt_length`` (B,) real tokens set to 0: they are
    the prompt's (its leading special token included), which ``include_prompt=False`` leaves out of pooling."""
    first = attention_mask.to(torch.int32).argmax(dim=1, keepdim=True)  # 0 unless padded on the left
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device).unsqueeze(0)
    keep = positions >= first + prompt_length.to(attention_mask.device).view(-1, 1)
    return attention_mask * keep.to(attention_mask.dtype)


class Pooling(Module):
    """Pools token vectors into ``features['sentence_embedding']``."""

    type_name = "sentence_transformers.models.Pooling"
    input_field = "word_embedding_dimension"  # the config's name for ``input_dim``

    def __init__(self, dim: int, modes: str | Sequence[str] = "mean", include_prompt: bool = True) -> None:
        super().__init__()
        modes = [modes] if isinstance(modes, str) else list(modes)
        unknown = [m for m in modes if m not in MODES]
        if unknown or not modes:
            raise ValueError(f"pooling modes {modes!r}: expected one or more of {', '.join(MODES)}")
        self.word_dim = dim
        self.modes = modes  # concatenated in this order
        self.include_prompt = include_prompt

    @property
    def dim(self) -> int:
        """Width of the pooled vector: the token width times the number of modes."""
        return self.word_dim * len(self.modes)

    def forward(self, features: Features) -> Features:
        tokens, mask = features["token_embeddings"], features["attention_mask"]
        origin = mask.to(torch.int32).argmax(dim=1)  # each text's first token, the prompt's if it has one
        if not self.include_prompt and "prompt_length" in features:
            mask = without_prompt(mask, features["prompt_length"])
        pooled = [pool(tokens, mask, m, origin) for m in self.modes]
        features["sentence_embedding"] = pooled[0] if len(pooled) == 1 else torch.cat(pooled, dim=1)
        return features

    def config(self) -> dict:
        """The config.json sentence-transformers reads with the same concatenation order."""
        if self.modes == [m for m in MODES if m in self.modes]:  # the flags' own order, no repeats
            config: dict = {"word_embedding_dimension": self.word_dim}
            config.update({key: mode in self.modes for mode, key in _CONFIG_KEYS.items()})
        else:
            names = [_ST_NAMES.get(m, m) for m in self.modes]
            config = {"embedding_dimension": self.word_dim, "pooling_mode": names}
        config["include_prompt"] = self.include_prompt
        return config

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        write_json(path / "config.json", self.config())

    @classmethod
    def load(cls, path: Path, *, allow_pickle: bool = False) -> Pooling:
        """Read both config forms: sentence-transformers < 6 (``pooling_mode_*`` flags) and >= 6."""
        file = path / "config.json"
        config = read_json(file)
        field = "word_embedding_dimension" if "word_embedding_dimension" in config else "embedding_dimension"
        if field not in config:
            raise ModelFormatError(f"{file}: missing 'word_embedding_dimension'")
        dim = check_width(config[field], file, field)
        mode = config.get("pooling_mode")
        if mode is not None:  # {"pooling_mode": "mean"} or {"pooling_mode": ["cls", "mean"]}
            modes = [mode] if isinstance(mode, str) else mode
            if not isinstance(modes, list) or not all(isinstance(m, str) for m in modes):
                raise ModelFormatError(f"{file}: 'pooling_mode' must be a mode or a list of modes, got {mode!r}")
            modes = ["mean_sqrt_len" if m == "mean_sqrt_len_tokens" else m for m in modes]
        else:
            modes = [mode for mode, key in _CONFIG_KEYS.items() if config.get(key)]
        if not modes:
            raise ModelFormatError(f"{file}: no pooling mode is set to true")
        include_prompt = config.get("include_prompt", True)
        if not isinstance(include_prompt, bool):
            raise ModelFormatError(f"{file}: 'include_prompt' must be true or false, got {include_prompt!r}")
        try:
            return cls(dim, modes, include_prompt)
        except ValueError as err:
            raise ModelFormatError(f"{file}: {err}") from err

    @property
    def input_dim(self) -> int:
        """Width of the token vectors it pools (what the module before it must give)."""
        return self.word_dim

    def extra_repr(self) -> str:
        return f"dim={self.word_dim}, modes={self.modes}"
