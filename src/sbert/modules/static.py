"""StaticEmbedding: token ids -> rows of a table -> their mean (optionally each row times a per-token weight).

No attention, no layers: a static model is a lookup table and a tokenizer, hundreds of times cheaper than a
transformer on a CPU and less accurate. It takes the first place of an encoder (instead of a Transformer)
and writes ``token_embeddings`` (the rows) and ``sentence_embedding`` (their mean); Normalize and Dense
compose after it as after a Pooling.

Two folder formats are read, and written:

- sentence-transformers' ``StaticEmbedding`` module folder: ``model.safetensors`` holding
  ``embedding.weight`` (vocab, dim) and ``tokenizer.json`` (what ``Encoder.save`` writes, in
  ``0_StaticEmbedding``, with sbert's own ``config.json`` beside them: ``skip_unknown``, ``max_seq_length``);
- model2vec's folder: ``config.json`` (``"model_type": "model2vec"``, ``normalize``, ``max_length``, ...),
  ``model.safetensors`` holding ``embeddings`` and optionally per-token ``weights`` and a token ``mapping``
  (vocabulary quantisation: the row of token i is ``embeddings[mapping[i]]``), and ``tokenizer.json``
  (``save_model2vec``; what ``sbert distill`` writes).

Texts are tokenised without special tokens, as both libraries do. Read from a model2vec folder, the module
behaves as model2vec's ``StaticModel.encode``: unknown tokens are dropped and texts are cut at ``max_length``
tokens (model2vec also cuts each text at ``max_length`` x the median token length in characters first,
which sbert does not: texts that long differ). Read from a sentence-transformers folder it behaves as
sentence-transformers: unknown tokens count, no length limit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from sbert.errors import ModelFormatError
from sbert.modules.base import Features, Module, load_weights, write_json
from sbert.modules.folder import MAX_WIDTH, read_json
from sbert.token_ids import encode_ids

if TYPE_CHECKING:
    from tokenizers import Tokenizer

NO_LIMIT = 1_000_000  # max_seq_length of a static model without a length limit (sentence-transformers: inf)
NUMPY_ROWS = 1 << 21  # floats (8 MiB): the largest (batch, tokens, dim) rows StaticEmbedding.mean_rows makes
MODEL2VEC_MAX_LENGTH = 512  # model2vec's default when its config names no max_length
ST_KEY, M2V_KEY = "embedding.weight", "embeddings"


class TokenRows(dict):
    """A static model's features, whose ``token_embeddings`` are made on first read: a sentence vector never
    needs them, and making them was most of the module's forward pass."""

    def __init__(self, features: Features, module: StaticEmbedding) -> None:
        super().__init__(features)
        self._module = module

    def __missing__(self, key: str) -> Tensor:
        if key != "token_embeddings":
            raise KeyError(key)
        self[key] = rows = self._module.token_rows(self["input_ids"])
        return rows


class StaticEmbedding(Module):
    """``sentence_embedding[b] = mean_t(table[ids[b, t]] * weights[ids[b, t]])`` over each text's tokens."""

    type_name = "sentence_transformers.models.StaticEmbedding"
    token_weights: Tensor | None  # a buffer: (vocabulary,) per-token weights, or None

    def __init__(
        self,
        tokenizer: Tokenizer,
        table: Tensor | np.ndarray,
        weights: Tensor | np.ndarray | None = None,
        *,
        skip_unknown: bool = False,
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__()
        from tokenizers import Tokenizer

        table = torch.as_tensor(np.asarray(table, dtype=np.float32) if isinstance(table, np.ndarray) else table)
        if table.ndim != 2:
            raise ValueError(f"a static embedding table is (vocabulary, dim), got shape {tuple(table.shape)}")
        self.embedding = nn.Embedding(*table.shape)
        with torch.no_grad():
            self.embedding.weight.copy_(table.float())
        if weights is not None:
            weights = torch.as_tensor(np.asarray(weights) if isinstance(weights, np.ndarray) else weights).float()
            if weights.shape != (table.shape[0],):
                raise ValueError(f"per-token weights must be ({table.shape[0]},), got {tuple(weights.shape)}")
        self.register_buffer("token_weights", weights)
        self._fast = Tokenizer.from_str(tokenizer.to_str())  # a private copy: its truncation is ours
        self._fast.no_padding()
        self.skip_unknown = skip_unknown
        self._unknown = _unknown_id(self._fast) if skip_unknown else None
        self.do_lower_case = False  # the tokenizer's own normaliser lower-cases where the model wants it
        self._max_seq_length = NO_LIMIT
        # None: the tokenizer's own truncation, as sentence-transformers keeps it (else no limit)
        self.max_seq_length = max_seq_length or (self._fast.truncation or {}).get("max_length") or NO_LIMIT
        self._tokenizer_view = None

    # -- sizes -------------------------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return int(self.embedding.embedding_dim)

    @property
    def vocab_size(self) -> int:
        return int(self.embedding.num_embeddings)

    @property
    def max_seq_length(self) -> int:
        """Most tokens of a text that count (``NO_LIMIT``: practically none); longer texts are cut."""
        return self._max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"max_seq_length must be a positive integer, got {value!r}")
        self._max_seq_length = value
        if value >= NO_LIMIT:
            self._fast.no_truncation()
        else:
            self._fast.enable_truncation(value)

    @property
    def tokenizer(self):
        """The tokenizer as transformers' fast tokenizer (what document splitting reads), built on first use."""
        if self._tokenizer_view is None:
            from transformers import PreTrainedTokenizerFast

            self._tokenizer_view = PreTrainedTokenizerFast(tokenizer_object=self.backend_tokenizer)
        return self._tokenizer_view

    @property
    def backend_tokenizer(self) -> Tokenizer:
        """A copy of the Rust tokenizer, without truncation."""
        from tokenizers import Tokenizer

        copy = Tokenizer.from_str(self._fast.to_str())
        copy.no_truncation()
        return copy

    # -- text -> ids -> batch ------------------------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], list[int]]:
        """Token ids of each text (no special tokens; unknown ones dropped if ``skip_unknown``), and the
        positions of the texts cut at ``max_seq_length``."""
        encodings = encode_ids(self._fast, texts, add_special_tokens=False)
        ids = [e.ids for e in encodings]
        if self._unknown is not None:
            ids = [[i for i in row if i != self._unknown] for row in ids]
        return ids, [i for i, e in enumerate(encodings) if e.overflowing]

    def collate(self, batch: Sequence[Sequence[int]]) -> Features:
        """Pad a batch of id lists to its longest one: ``input_ids``, ``attention_mask`` (B, T), T >= 1."""
        width = max(1, max((len(ids) for ids in batch), default=1))
        input_ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        return {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask)}

    can_pack = False

    def check_packable(self) -> None:
        raise ValueError("packing is for transformer models; a static model has no attention and no padding cost")

    def forward(self, features: Features) -> Features:
        """The mean of each text's rows (times their weights) as ``sentence_embedding`` (zeros for a text
        without tokens, as in both reference libraries), summed by ``embedding_bag`` without making the
        (batch, tokens, dim) rows; those, ``token_embeddings``, are made only when read (``TokenRows``)."""
        ids, mask = features["input_ids"], features["attention_mask"]
        weights = mask.to(self.embedding.weight.dtype)
        if self.token_weights is not None:
            weights = weights * self.token_weights[ids]
        summed = F.embedding_bag(ids, self.embedding.weight, per_sample_weights=weights, mode="sum")
        features = TokenRows(features, self)
        features["sentence_embedding"] = summed / mask.sum(dim=1, keepdim=True).to(summed.dtype).clamp(min=1.0)
        return features

    def mean_rows(self, features: Features) -> np.ndarray | None:
        """``forward``'s ``sentence_embedding`` computed in numpy, (batch, dim) float32, the same to float
        rounding: for inference on the CPU, where torch's per-call costs (device moves, module calls,
        ``embedding_bag``'s checks) were most of a short batch's time. None where it does not apply: the
        table not on the CPU, autograd on, or a batch whose (batch, tokens, dim) rows would pass
        ``NUMPY_ROWS`` floats (``embedding_bag`` never makes them)."""
        ids, mask = features["input_ids"], features["attention_mask"]
        table = self.embedding.weight
        if table.device.type != "cpu" or torch.is_grad_enabled() or ids.numel() * table.shape[1] > NUMPY_ROWS:
            return None
        rows, present = ids.numpy(), mask.numpy()
        weights = present.astype(np.float32)
        if self.token_weights is not None:
            weights *= self.token_weights.numpy()[rows]
        summed = np.matmul(weights[:, None, :], table.detach().numpy()[rows])[:, 0]
        return summed / np.maximum(present.sum(axis=1, keepdims=True), 1).astype(np.float32)

    def token_rows(self, ids: Tensor) -> Tensor:
        """Each token's row (times its weight): (batch, tokens, dim)."""
        rows = self.embedding(ids)
        return rows if self.token_weights is None else rows * self.token_weights[ids].unsqueeze(-1)

    def folded_table(self) -> Tensor:
        """One row per token with its weight multiplied in: what sentence-transformers' format stores."""
        table = self.embedding.weight.detach()
        if self.token_weights is not None:
            table = table * self.token_weights.unsqueeze(-1)
        return table.float().cpu().contiguous()

    def reinitialized(self, seed: int = 0) -> StaticEmbedding:
        """Same tokenizer and shape, a random table (N(0, 1/dim)): the "no pre-training" control."""
        generator = torch.Generator().manual_seed(seed)
        table = torch.randn(self.vocab_size, self.dim, generator=generator) / self.dim**0.5
        return StaticEmbedding(self._fast, table, skip_unknown=self.skip_unknown, max_seq_length=self.max_seq_length)

    # -- disk ----------------------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """sentence-transformers' layout (``embedding.weight``, weights folded in) and sbert's ``config.json``."""
        from safetensors.torch import save_file

        path.mkdir(parents=True, exist_ok=True)
        save_file({ST_KEY: self.folded_table()}, str(path / "model.safetensors"))
        self.backend_tokenizer.save(str(path / "tokenizer.json"))
        limit = None if self.max_seq_length >= NO_LIMIT else self.max_seq_length
        write_json(path / "config.json", {"skip_unknown": self.skip_unknown, "max_seq_length": limit})

    @classmethod
    def load(cls, path: Path, *, allow_pickle: bool = False) -> StaticEmbedding:
        """Read either format (see the module's docstring); a missing or mismatched file is named."""
        tokenizer = read_tokenizer(path / "tokenizer.json")
        config = read_json(path / "config.json") if (path / "config.json").is_file() else {}
        state = load_weights(path, allow_pickle=allow_pickle)
        source = path / ("model.safetensors" if (path / "model.safetensors").is_file() else "pytorch_model.bin")
        table, weights = _table(state, source, tokenizer.get_vocab_size(with_added_tokens=True))
        if M2V_KEY in state:  # model2vec's tensors: model2vec's behaviour (its config may name no model_type)
            skip, max_length = True, config.get("max_length", MODEL2VEC_MAX_LENGTH)
        else:
            skip, max_length = bool(config.get("skip_unknown", False)), config.get("max_seq_length")
        if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
            raise ModelFormatError(f"{path / 'config.json'}: max length {max_length!r} is not a positive integer")
        return cls(tokenizer, table, weights, skip_unknown=skip, max_seq_length=max_length)

    def extra_repr(self) -> str:
        weighted = ", weighted" if self.token_weights is not None else ""
        return f"vocabulary={self.vocab_size}, dim={self.dim}{weighted}"


def _unknown_id(tokenizer: Tokenizer) -> int | None:
    """The id of the tokenizer model's unknown token, or None where it has none."""
    model = json.loads(tokenizer.to_str()).get("model", {})
    token = model.get("unk_token")
    return tokenizer.token_to_id(token) if isinstance(token, str) else None


def read_tokenizer(path: Path) -> Tokenizer:
    """A ``tokenizer.json``, with an error that names it when it is missing or unreadable."""
    from tokenizers import Tokenizer

    if not path.is_file():
        raise ModelFormatError(f"{path}: file not found (a static model needs its tokenizer.json)")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises a bare Exception for malformed files
        raise ModelFormatError(f"{path}: not a readable tokenizer.json ({err})") from None


def _table(state: dict[str, Tensor], source: Path, vocab: int) -> tuple[Tensor, Tensor | None]:
    """The (vocab, dim) table and the per-token weights (or None) of either format's tensors, checked."""
    if ST_KEY in state:
        table, weights, mapping = state[ST_KEY], None, None
    elif M2V_KEY in state:
        table, weights, mapping = state[M2V_KEY], state.get("weights"), state.get("mapping")
    else:
        raise ModelFormatError(
            f"{source}: holds {', '.join(sorted(state)) or 'no tensors'}; a static model needs "
            f"'{ST_KEY}' (sentence-transformers) or '{M2V_KEY}' (model2vec)"
        )
    if table.ndim != 2:
        raise ModelFormatError(f"{source}: the embedding table has shape {tuple(table.shape)}, expected (tokens, dim)")
    if not 1 <= table.shape[1] <= MAX_WIDTH:
        raise ModelFormatError(
            f"{source}: the embedding table has {table.shape[1]} columns; a vector width is from 1 to {MAX_WIDTH:,}"
        )
    table = table.float()
    if mapping is not None:
        if mapping.ndim != 1 or mapping.is_floating_point() or len(mapping) != vocab:
            raise ModelFormatError(f"{source}: 'mapping' must be {vocab} integer row numbers, one per token")
        if len(mapping) and (int(mapping.min()) < 0 or int(mapping.max()) >= len(table)):
            raise ModelFormatError(f"{source}: 'mapping' names rows outside the {len(table)} of 'embeddings'")
        table = table[mapping.long()]
    if len(table) != vocab:
        raise ModelFormatError(
            f"{source}: the table has {len(table)} rows but tokenizer.json has {vocab} tokens; they must match"
        )
    if weights is not None and tuple(weights.shape) != (vocab,):
        raise ModelFormatError(f"{source}: 'weights' has shape {tuple(weights.shape)}, expected ({vocab},)")
    return table, None if weights is None else weights.float()


# -- model2vec's own folder ------------------------------------------------------------------------------------
def is_model2vec_folder(path: Path) -> bool:
    """Whether ``path`` is a model2vec folder: ``config.json`` says ``"model_type": "model2vec"``, or (older
    folders, and models built in Python) ``model.safetensors`` holds model2vec's ``embeddings`` beside a
    ``tokenizer.json``."""
    config = path / "config.json"
    try:
        if json.loads(config.read_text(encoding="utf-8")).get("model_type") == "model2vec":
            return True
    except (OSError, ValueError, AttributeError):
        return False
    weights = path / "model.safetensors"
    if not (weights.is_file() and (path / "tokenizer.json").is_file()):
        return False
    try:
        with open(weights, "rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            return M2V_KEY in json.loads(handle.read(min(size, 2**20)))
    except (OSError, ValueError, TypeError):
        return False


def model2vec_modules(path: Path, allow_pickle: bool = False) -> list[Module]:
    """The modules of a model2vec folder without ``modules.json``: its table, and Normalize if it normalises."""
    from sbert.modules.normalize import Normalize

    static = StaticEmbedding.load(path, allow_pickle=allow_pickle)
    return [static, Normalize()] if read_json(path / "config.json").get("normalize") else [static]


def save_model2vec(
    static: StaticEmbedding, path: Path, *, normalize: bool = True, config: dict[str, Any] | None = None
) -> None:
    """Write ``static`` into ``path`` as model2vec writes a model (``StaticModel.save_pretrained``): loadable by
    model2vec, by sentence-transformers (its ``modules.json``) and by sbert, with equal embeddings."""
    from safetensors.torch import save_file

    tensors = {M2V_KEY: static.embedding.weight.detach().float().cpu().contiguous()}
    if static.token_weights is not None:
        tensors["weights"] = static.token_weights.detach().float().cpu().contiguous()
    save_file(tensors, str(path / "model.safetensors"))
    static.backend_tokenizer.save(str(path / "tokenizer.json"))
    limit = None if static.max_seq_length >= NO_LIMIT else static.max_seq_length
    settings = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        **(config or {}),
        "hidden_dim": static.dim,
        "normalize": normalize,
        "max_length": limit,
        "embedding_dtype": "float32",
    }
    write_json(path / "config.json", settings)
    modules = [{"idx": 0, "name": "0", "path": ".", "type": StaticEmbedding.type_name}]
    if normalize:
        modules.append({"idx": 1, "name": "1", "path": "1_Normalize", "type": "sentence_transformers.models.Normalize"})
        (path / "1_Normalize").mkdir(exist_ok=True)
    write_json(path / "modules.json", modules)
