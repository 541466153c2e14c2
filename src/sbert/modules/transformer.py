"""Transformer: texts -> token ids -> token vectors (batch, seq, hidden) from a local Hugging Face folder.

Tokenisation and padding are split on purpose: ``tokenize`` turns texts into unpadded id lists
(truncated to ``max_seq_length``), and ``collate`` pads one batch only to its own longest text.
That split is what smart batching (``sbert.batching``) needs.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from sbert.adapter_folder import is_adapter_folder, is_peft
from sbert.batching import pack_rows
from sbert.errors import ModelFormatError
from sbert.modules import lora
from sbert.modules.base import Features, Module, write_json
from sbert.modules.folder import check_finite, pickle_refusal, read_json, refuse_remote_code, weight_files
from sbert.token_ids import encode_ids

CONFIG_FILE = "sentence_bert_config.json"
PACK_WIDTH = 64  # tokens per packed row (or the batch's longest text, if longer)
# Architectures whose position embeddings are read from explicit ``position_ids`` counted from 0,
# so several texts can share a row (checked against padded batching in tests/unit/test_packing.py).
PACKABLE_TYPES = ("bert",)
# The files a tokenizer is built from: the Rust tokenizer's own file, or a WordPiece, BPE or SentencePiece vocabulary.
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)


@contextlib.contextmanager
def _no_transformers_progress() -> Iterator[None]:
    """Silence transformers' own "Loading weights" / "Writing shards" bars, which are noise here."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """No progress bars and no load report (e.g. "newly initialized" heads, which are expected here)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with _no_transformers_progress():
            yield
    finally:
        hf_logging.set_verbosity(level)


class Transformer(Module):
    """A Hugging Face encoder and its tokenizer; writes ``features['token_embeddings']``."""

    type_name = "sentence_transformers.models.Transformer"

    def __init__(self, model, tokenizer, max_seq_length: int | None = None, do_lower_case: bool = False):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.do_lower_case = do_lower_case
        # A private copy of the Rust tokenizer, so truncation settings never leak into the caller's.
        self._fast = None
        if getattr(tokenizer, "is_fast", False):
            from tokenizers import Tokenizer

            self._fast = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
            self._fast.no_padding()
        self._max_seq_length = 0
        self.max_seq_length = max_seq_length or self._model_limit()

    # -- sizes -------------------------------------------------------------------------------------
    def _model_limit(self) -> int:
        limits = [
            getattr(self.model.config, "max_position_embeddings", None),
            self.tokenizer.model_max_length,
        ]
        limits = [int(n) for n in limits if isinstance(n, int) and 0 < n < 1_000_000]
        return min(limits) if limits else 512

    @property
    def max_seq_length(self) -> int:
        """Longest input in tokens (special tokens included); longer texts are truncated."""
        return self._max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        if not isinstance(value, int) or value < 2:
            raise ValueError(f"max_seq_length must be an integer >= 2, got {value!r}")
        if value > self._model_limit():
            raise ValueError(f"max_seq_length {value} exceeds what this model supports ({self._model_limit()})")
        self._max_seq_length = value
        if self._fast is not None:
            side = getattr(self.tokenizer, "truncation_side", "right")
            self._fast.enable_truncation(value, stride=0, strategy="longest_first", direction=side)

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def reinitialized(self, seed: int = 0) -> Transformer:
        """Same architecture and tokenizer, freshly random weights: the "no pre-training" control."""
        from transformers import AutoModel

        torch.manual_seed(seed)
        model = AutoModel.from_config(self.model.config, trust_remote_code=False)
        return Transformer(model, self.tokenizer, self.max_seq_length, self.do_lower_case)

    # -- text -> ids -> padded batch -----------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], list[int]]:
        """Token ids of each text (special tokens added, truncated), and the positions of truncated texts."""
        if self.do_lower_case:
            texts = [t.lower() for t in texts]
        if self._fast is not None:
            encodings = encode_ids(self._fast, texts, add_special_tokens=True)
            return [e.ids for e in encodings], [i for i, e in enumerate(encodings) if e.overflowing]
        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_seq_length)["input_ids"]
        # Slow tokenizers do not report truncation: texts that fill the limit are counted (an upper bound).
        return ids, [i for i, t in enumerate(ids) if len(t) >= self.max_seq_length]

    def collate(self, batch: Sequence[Sequence[int]]) -> Features:
        """Pad a batch of id lists to its own longest one: ``input_ids``, ``attention_mask`` (B, T)."""
        width = max(len(ids) for ids in batch)
        input_ids = np.full((len(batch), width), self.tokenizer.pad_token_id or 0, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        for row, ids in enumerate(batch):
            span = slice(width - len(ids), width) if left else slice(0, len(ids))
            input_ids[row, span] = ids
            mask[row, span] = 1
        features = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask)}
        if "token_type_ids" in self.tokenizer.model_input_names:
            features["token_type_ids"] = torch.zeros_like(features["input_ids"])
        return features

    @property
    def can_pack(self) -> bool:
        """Whether ``collate_packed`` batches give this model's exact results (its architecture is known)."""
        return getattr(self.model.config, "model_type", None) in PACKABLE_TYPES

    def check_packable(self) -> None:
        """Raise a clear error where ``collate_packed`` would give wrong results."""
        if not self.can_pack:
            model_type = getattr(self.model.config, "model_type", "unknown")
            raise ValueError(f"packing supports BERT-family models; this one is {model_type!r}")

    def collate_packed(self, batch: Sequence[Sequence[int]], width: int | None = None) -> Features:
        """A batch without padding: texts laid end to end in rows of ``width`` tokens.

        Each text keeps its own positions (from 0) and attends only to itself (a block-diagonal
        mask), so results equal ``collate``'s up to float rounding while no compute goes to padding.
        ``forward_packed`` gives back ``token_embeddings`` (B, T, H) and ``attention_mask`` (B, T) in
        the padded layout, so pooling is unchanged.
        Callers check ``can_pack`` first (``Encoder`` does, once per run).
        """
        lengths = [len(ids) for ids in batch]
        longest = max(lengths)
        width = max(width or PACK_WIDTH, longest)
        rows = pack_rows(lengths, width)
        input_ids = np.full((len(rows), width), self.tokenizer.pad_token_id or 0, dtype=np.int64)
        positions = np.zeros((len(rows), width), dtype=np.int64)
        segment = np.full((len(rows), width), -1, dtype=np.int64)
        unpack = np.full((len(batch), longest), len(rows) * width, dtype=np.int64)  # -> a zero row
        mask = np.zeros((len(batch), longest), dtype=np.int64)
        for r, members in enumerate(rows):
            offset = 0
            for k, i in enumerate(members):
                n = lengths[i]
                input_ids[r, offset : offset + n] = batch[i]
                positions[r, offset : offset + n] = np.arange(n)
                segment[r, offset : offset + n] = k
                unpack[i, :n] = r * width + offset + np.arange(n)
                mask[i, :n] = 1
                offset += n
        segment_t = torch.from_numpy(segment)
        # Padding slots attend to themselves only: finite values, never seen by a real token.
        attend = (segment_t[:, :, None] == segment_t[:, None, :]) | torch.eye(width, dtype=torch.bool)
        return {
            "input_ids": torch.from_numpy(input_ids),
            "position_ids": torch.from_numpy(positions),
            "token_type_ids": torch.zeros_like(torch.from_numpy(input_ids)),
            "packed_attention": attend[:, None],
            "unpack_index": torch.from_numpy(unpack),
            "attention_mask": torch.from_numpy(mask),
        }

    def forward(self, features: Features) -> Features:
        """Token vectors of a padded batch (``collate``)."""
        inputs = {k: features[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in features}
        output = self.model(**inputs, return_dict=True)
        features["token_embeddings"] = output.last_hidden_state
        return features

    def forward_packed(self, features: Features) -> Features:
        """Token vectors of a packed batch (``collate_packed``), in the padded layout."""
        attend = features["packed_attention"]
        if getattr(self.model.config, "_attn_implementation", "eager") != "sdpa":  # additive for eager attention
            dtype = next(self.model.parameters()).dtype
            attend = torch.zeros(attend.shape, dtype=dtype, device=attend.device).masked_fill(
                ~attend, torch.finfo(dtype).min
            )
        output = self.model(
            input_ids=features["input_ids"],
            position_ids=features["position_ids"],
            token_type_ids=features["token_type_ids"],
            attention_mask=attend,
            return_dict=True,
        )
        hidden = output.last_hidden_state
        flat = torch.cat([hidden.reshape(-1, hidden.shape[-1]), hidden.new_zeros(1, hidden.shape[-1])])
        features["token_embeddings"] = flat[features["unpack_index"]]
        return features

    # -- disk ----------------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        with _no_transformers_progress():
            if is_peft(self.model):  # the adapter only (sbert.modules.lora); the base stays where it is
                lora.save_adapter(self.model, path)
            else:
                self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        write_json(path / CONFIG_FILE, {"max_seq_length": self.max_seq_length, "do_lower_case": self.do_lower_case})

    @classmethod
    def load(cls, path: Path, *, allow_pickle: bool = False, max_seq_length: int | None = None) -> Transformer:
        """Load a Hugging Face model folder (config.json, weights, tokenizer), or a LoRA adapter folder over its
        base (``sbert.modules.lora``); never downloads."""
        from transformers import AutoModel, AutoTokenizer

        if is_adapter_folder(path) and not (path / "config.json").is_file():
            return cls.load_adapter(path, allow_pickle=allow_pickle, max_seq_length=max_seq_length)
        if not (path / "config.json").is_file():
            raise ModelFormatError(
                f"{path}: not a transformer folder (expected config.json, tokenizer files and model.safetensors)"
            )
        refuse_remote_code(path)
        weights, has_safe = weight_files(path, allow_pickle, "transformer weights")
        settings = read_json(path / CONFIG_FILE) if (path / CONFIG_FILE).is_file() else {}
        saved_length = settings.get("max_seq_length")
        if saved_length is not None and (type(saved_length) is not int or saved_length < 2):
            raise ModelFormatError(
                f"{path / CONFIG_FILE}: 'max_seq_length' must be a whole number of tokens >= 2, got {saved_length!r}"
            )
        try:
            with _no_transformers_progress():
                tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
                model = AutoModel.from_pretrained(
                    str(path), local_files_only=True, trust_remote_code=False, use_safetensors=has_safe
                )
        except pickle.UnpicklingError as err:  # a .bin (read with allow_pickle) holding more than tensors
            raise ModelFormatError(pickle_refusal(weights[0], err)) from None
        except (OSError, ValueError, KeyError, RuntimeError, EOFError) as err:  # RuntimeError: a damaged .bin
            raise ModelFormatError(f"{path}: cannot load the transformer or its tokenizer: {err}") from err
        check_tokenizer(path, tokenizer, model)
        check_finite(model, weights[0] if len(weights) == 1 else path)
        model.eval()
        try:
            return cls(
                model,
                tokenizer,
                max_seq_length=max_seq_length or saved_length,
                do_lower_case=bool(settings.get("do_lower_case", False)),
            )
        except ValueError as err:
            source = "" if max_seq_length else f"{path / CONFIG_FILE if saved_length else path / 'config.json'}: "
            raise ModelFormatError(f"{source}{err}") from err

    @classmethod
    def load_adapter(cls, path: Path, *, allow_pickle: bool = False, max_seq_length: int | None = None) -> Transformer:
        """An adapter folder's Transformer: its base (by name or folder, ``sbert.modules.lora.base_folder``) with
        the adapter's LoRA layers on top, frozen; the tokenizer and length settings are the folder's own (the
        base's where it has none)."""
        config = lora.adapter_config(path)
        name = config.pop("base_model_name_or_path")
        base = cls.load(lora.transformer_folder(lora.base_folder(path, name), path), allow_pickle=allow_pickle)
        model = lora.attach(base.model, config, path, base=name)
        refuse_remote_code(path)
        tokenizer = load_tokenizer(path, model) if (path / "tokenizer_config.json").is_file() else base.tokenizer
        settings = read_json(path / CONFIG_FILE) if (path / CONFIG_FILE).is_file() else {}
        length = max_seq_length or settings.get("max_seq_length") or base.max_seq_length
        try:
            return cls(model, tokenizer, length, bool(settings.get("do_lower_case", False)))
        except ValueError as err:
            raise ModelFormatError(f"{path / CONFIG_FILE}: {err}") from err

    def merged(self) -> Transformer:
        """This Transformer with its LoRA adapter folded into a copy of the base's weights (itself without one)."""
        if not is_peft(self.model):
            return self
        return Transformer(lora.merged_model(self.model), self.tokenizer, self.max_seq_length, self.do_lower_case)

    def extra_repr(self) -> str:
        if is_peft(self.model):  # a LoRA adapter over its base
            kind = f"{type(self.model.get_base_model()).__name__} + LoRA adapter over {lora.base_name(self.model)}"
        else:
            kind = type(self.model).__name__
        return f"{kind}, max_seq_length={self.max_seq_length}, dim={self.dim}"


def load_tokenizer(path: Path, model):
    """The tokenizer of ``path``'s own files (no code run, nothing downloaded), checked against ``model``."""
    from transformers import AutoTokenizer

    try:
        with _no_transformers_progress():
            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError, KeyError) as err:
        raise ModelFormatError(f"{path}: cannot load the tokenizer: {err}") from err
    check_tokenizer(path, tokenizer, model)
    return tokenizer


def check_tokenizer(path: Path, tokenizer, model) -> None:
    """Refuse a tokenizer that its folder's files could not build (one that knows only its special tokens
    and so turns every word into the unknown token), or whose ids do not fit the model's embedding table."""
    special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}))
    vocab = tokenizer.get_vocab()
    if not any(i not in special for i in vocab.values()):
        found = [name for name in TOKENIZER_FILES if (path / name).is_file()]
        what = (
            f"its tokenizer files ({', '.join(found)}) hold no word pieces, only"
            if found
            else "tokenizer.json is missing (and no vocab.txt, vocab.json with merges.txt, or SentencePiece .model "
            "is there to build one from), so the tokenizer knows only"
        )
        raise ModelFormatError(
            f"{path}: cannot build the tokenizer from the folder's own files: {what} its {len(vocab)} special "
            f"tokens, and every word would become {tokenizer.unk_token or 'the unknown token'}; copy the model's "
            "tokenizer files into the folder"
        )
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    rows = getattr(embeddings, "num_embeddings", None)
    words = getattr(tokenizer, "vocab_size", None)  # without added tokens, which ordinary text never gives
    if isinstance(rows, int) and isinstance(words, int) and words > rows:
        raise ModelFormatError(
            f"{path}: the tokenizer has {words:,} word pieces, but the model's embedding table has {rows:,} rows "
            "(config.json 'vocab_size'): ids past its end would fail; the tokenizer files belong to another model"
        )
