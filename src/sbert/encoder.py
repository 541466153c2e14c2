"""Encoder: an ordered list of modules (Transformer, Pooling, [Dense], [Normalize]) -> sentence vectors.

It knows how to run its modules over many texts (``encode``) and how to read and write the
sentence-transformers folder format (``load``/``save``); the modules do the maths.
"""

from __future__ import annotations

import contextlib
import json
import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import numpy as np
import torch
from torch import nn

from sbert.adapter_folder import is_peft
from sbert.atomic import atomic_dir, recover
from sbert.backends.onnx import ExportSource
from sbert.device import resolve_device
from sbert.errors import ModelFormatError, ModelNotFoundError
from sbert.eval_mode import evaluating
from sbert.modules import MODULE_TYPES, Module, Normalize, Pooling, StaticEmbedding, Transformer, module_class
from sbert.modules.base import Features, write_json
from sbert.modules.folder import check_links, check_widths, module_folder, read_json, refuse_remote_code
from sbert.modules.static import is_model2vec_folder, model2vec_modules, save_model2vec
from sbert.pipeline import (
    PACKED_TOKENS,
    Batching,
    Runner,
    Tokenized,
    TorchRunner,
    VectorMemo,
    finish,
    token_vectors,
)
from sbert.progress import ENCODE_FROM, progress_bar
from sbert.prompts import Prompts, Task, prompt_length, prompted
from sbert.token_ids import collection_paused
from sbert.versions import saved_versions

if TYPE_CHECKING:
    from types import FrameType

    from sbert.protocols import IndexEncoder, TrainableEncoder

CHUNK = 65_536  # texts tokenised at a time: bounds the memory for ids, keeps sorting near-global
ST_CONFIG = "config_sentence_transformers.json"


def check_texts(texts: Any, allow_empty: bool = False) -> list[str]:
    """Return ``texts`` as a list of strings, or raise naming the first bad item."""
    if isinstance(texts, str):
        texts = [texts]
    elif texts is None or isinstance(texts, (bytes, dict)) or not isinstance(texts, Iterable):
        raise TypeError(f"texts must be a string or a sequence of strings, got {type(texts).__name__}")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, expected str")
        if not allow_empty and not text.strip():
            raise ValueError(f"texts[{i}] is empty or only whitespace; pass allow_empty=True to encode it anyway")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(
                f"texts[{i}] is not valid Unicode text: {text[err.start : err.end]!r} at character {err.start} "
                "is a lone surrogate, which cannot be tokenised"
            ) from None
    return items


class Encoder(nn.Sequential):
    """A sentence encoder: ``features -> modules[0] -> modules[1] -> ...`` as in Sentence-BERT §3."""

    def __init__(
        self,
        modules: Sequence[Module],
        similarity_fn_name: str = "cosine",
        truncate_dim: int | None = None,
        settings: dict[str, Any] | None = None,
        prompts: Prompts | None = None,
    ) -> None:
        super().__init__(*modules)
        if not modules or not isinstance(modules[0], (Transformer, StaticEmbedding)):
            raise ValueError("an Encoder starts with a Transformer or a StaticEmbedding module")
        self.similarity_fn_name = similarity_fn_name
        self._truncate_dim: int | None = None
        self.truncate_dim = truncate_dim
        # config_sentence_transformers.json as read (keys sbert does not use too): save writes it back.
        self.settings: dict[str, Any] = dict(settings or {})
        self._prompts = prompts if prompts is not None else Prompts.from_settings(self.settings)
        self.path: Path | None = None
        self._torch = TorchRunner(self, shortcut=self.table_sentences)  # token output and packing: always torch
        self._runner: Runner = self._torch  # sentence vectors: this, or the ONNX backend (see use_backend)

    # -- shape -----------------------------------------------------------------------------------------
    @property
    def transformer(self) -> Transformer | StaticEmbedding:
        """The first module, which turns texts into token ids and those into vectors (a static model's table)."""
        first = next(iter(self._modules.values()))  # not self[0]: nn.Sequential's indexing costs microseconds a call
        return cast("Transformer | StaticEmbedding", first)

    @property
    def is_static(self) -> bool:
        """Whether this is a static model (a table of token vectors, no transformer)."""
        return isinstance(self.transformer, StaticEmbedding)

    @property
    def model_dim(self) -> int:
        """Width of the vectors the modules compute (what training sees), before ``truncate_dim``."""
        first, *rest = self._modules.values()
        dim = cast(int, first.dim)
        for module in rest:
            dim = getattr(module, "dim", dim)
        return dim

    @property
    def dim(self) -> int:
        """Width of the sentence vectors ``encode`` returns: ``truncate_dim`` if set, else ``model_dim``."""
        return self._truncate_dim or self.model_dim

    @property
    def truncate_dim(self) -> int | None:
        """Keep only the first ``truncate_dim`` coordinates of each sentence vector (Matryoshka models), or None."""
        return self._truncate_dim

    @truncate_dim.setter
    def truncate_dim(self, value: int | None) -> None:
        self._truncate_dim = self._check_truncate_dim(value)

    def _check_truncate_dim(self, value: int | None) -> int | None:
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= self.model_dim:
            raise ValueError(f"truncate_dim must be an integer from 1 to {self.model_dim} (or None), got {value!r}")
        return value

    # -- prompts (sbert.prompts) --------------------------------------------------------------------------
    @property
    def prompts(self) -> dict[str, str]:
        """The model's prompts, name -> text put before each input, as its folder stores them (a copy)."""
        return dict(self._prompts.saved)

    @prompts.setter
    def prompts(self, value: dict[str, str]) -> None:
        self._prompts = Prompts(value, self._prompts.default_name)

    @property
    def default_prompt_name(self) -> str | None:
        """The prompt ``encode`` uses when given none (not ``encode_query``/``encode_document``), or None."""
        return self._prompts.default_name

    @default_prompt_name.setter
    def default_prompt_name(self, value: str | None) -> None:
        self._prompts = Prompts(self._prompts.saved, value)

    def resolve_prompt(
        self, prompt_name: str | None = None, prompt: str | None = None, task: Task | None = None
    ) -> str | None:
        """The text ``encode`` puts before each input (None: nothing), chosen as sentence-transformers does.

        ``prompt`` wins (``""``: no prompt), with a warning if ``prompt_name`` is given too; else the
        prompt called ``prompt_name`` (ValueError naming the model's prompts if none is); else for
        ``task`` "query"/"document" the prompt ``encode_query``/``encode_document`` use; else the default.
        """
        if prompt is not None and prompt_name is not None:
            warnings.warn(
                f"both prompt and prompt_name={prompt_name!r} were given: the prompt is used, prompt_name ignored",
                UserWarning,
                stacklevel=_caller_stacklevel(),
            )
        if task is not None and prompt is None and prompt_name is None:
            prompt_name = self._prompts.task_name(task)
        return self._prompts.resolve(prompt, prompt_name)

    @property
    def max_seq_length(self) -> int:
        return self.transformer.max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self.transformer.max_seq_length = value

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def can_pack(self) -> bool:
        """Whether ``encode(..., packing=True)`` runs on this model and backend (BERT-family, torch)."""
        return self.backend_name == "torch" and self.transformer.can_pack

    def with_pooling(self, mode: str) -> Encoder:
        """This encoder's transformer (shared, not copied) with plain ``mode`` pooling and nothing after."""
        return Encoder([self.transformer, Pooling(self.transformer.dim, mode)])

    def reinitialize_transformer(self, seed: int = 0) -> None:
        """Replace the transformer's weights by fresh random ones (same architecture and tokenizer)."""
        self[0] = self.transformer.reinitialized(seed).to(self.device)

    # -- backends ----------------------------------------------------------------------------------------
    @property
    def backend_name(self) -> str:
        """What computes the sentence vectors of ``encode``: "torch" or "onnx" (see ``use_backend``)."""
        return self._runner.name

    @property
    def precision(self) -> str:
        """The number format of ``encode``: "fp32", or "bf16" (torch) or "int8" (ONNX)."""
        return self._runner.precision

    @property
    def runtime(self) -> str:
        """Backend and precision as an index records them: "torch/fp32", "onnx/int8", ..."""
        return f"{self.backend_name}/{self.precision}"

    @property
    def onnx_path(self) -> Path | None:
        """The ONNX file ``encode`` runs on the ONNX backend; None on torch."""
        return getattr(self._runner, "path", None)

    def export_source(self) -> ExportSource:
        """What the ONNX backend needs to export this encoder: itself (a LoRA adapter folded into a copy of its
        base's weights), an example batch, its settings, its folder."""
        ids, _ = self.transformer.tokenize(["an example sentence to trace", "a second, longer example sentence here"])
        settings = {"modules": [_describe_module(m) for m in self], "max_seq_length": self.max_seq_length}
        module, first = self, self.transformer
        if isinstance(first, Transformer) and is_peft(first.model):
            module = Encoder([first.merged(), *cast("list[Module]", list(self)[1:])]).to(self.device)
        return ExportSource(module, self.transformer.collate(ids), settings, self.path)

    def use_backend(
        self,
        backend: Literal["torch", "onnx"] = "torch",
        precision: str = "fp32",
        cache_dir: str | Path | None = None,
    ) -> Encoder:
        """Choose how ``encode`` computes sentence vectors; returns self.

        ``torch`` with ``fp32`` or ``bf16`` (autocast; fast only where the CPU has AMX/AVX512-BF16: on
        others it warns, as bf16 is then emulated and several times slower than fp32), or
        ``onnx`` with ``fp32`` or ``int8`` (ONNX Runtime on the CPU; the export is cached, see
        ``sbert.backends.onnx``). Token output and training always use torch. Call it again after
        changing the weights: an ONNX session is a snapshot of the weights it was exported from. The
        choices are ``sbert.backends.BACKENDS``'.
        """
        from sbert.backends import backend as backend_named

        runner = backend_named(backend, precision).runner(self, precision, cache_dir)
        if backend != "torch":
            self._torch.precision = "fp32"  # token output, which stays on torch
        self._runner = runner
        return self

    def torch_runner(self, precision: str = "fp32") -> TorchRunner:
        """The torch runner at ``precision`` (``sbert.backends.BACKENDS["torch"]``): bf16 warns on a CPU
        without native bfloat16."""
        if precision == "bf16" and self.device.type == "cpu" and cpu_has_native_bf16() is False:
            warnings.warn(
                "precision='bf16' on a CPU without native bfloat16 (no AVX512-BF16 or AMX in /proc/cpuinfo) is "
                "emulated and several times slower than fp32 (docs/cpu-inference.md); use "
                "fp32, or backend='onnx' with precision='int8' for speed",
                UserWarning,
                stacklevel=_caller_stacklevel(),
            )
        self._torch.precision = precision
        return self._torch

    # -- inference: tokenise -> collate (padded or packed) -> run (torch or ONNX) -> finish ----------------
    def tokenize(self, texts: Sequence[str], prompt_name: str | None = None, prompt: str | None = None) -> Tokenized:
        """Token ids of each text, its prompt before it (special tokens added, cut to ``max_seq_length``), and which
        were cut; the prompt is chosen as in ``encode``.

        ``encode_tokenized`` embeds the result: tokenise once, and take token counts and truncation from it.
        """
        return self._tokens(check_texts(texts, allow_empty=True), self.resolve_prompt(prompt_name, prompt))

    def _tokens(self, texts: list[str], prompt: str | None) -> Tokenized:
        """Token ids of ``prompt`` + each text, and the prompt's length where a Pooling leaves it out."""
        with collection_paused():
            ids, truncated = self.transformer.tokenize(prompted(texts, prompt))
        excluded = prompt and any(not getattr(m, "include_prompt", True) for m in self)
        if not excluded or prompt is None:
            return Tokenized(ids, truncated)
        special = set(self.transformer.tokenizer.all_special_ids)
        length = prompt_length(self.transformer.tokenize([prompt])[0][0], special)
        return Tokenized(ids, truncated, [length] * len(texts))

    @overload
    def encode(
        self,
        texts: str | Iterable[str],
        batch_size: int = 32,
        normalize: bool = False,
        convert_to: Literal["numpy"] = "numpy",
        show_progress: bool | None = None,
        output: Literal["sentence"] = "sentence",
        sort_by_length: bool = True,
        allow_empty: bool = False,
        on_truncation: Literal["warn", "error", "ignore"] = "warn",
        max_tokens: int | None = None,
        packing: bool = False,
        truncate_dim: int | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
    ) -> np.ndarray: ...

    @overload
    def encode(
        self,
        texts: str | Iterable[str],
        batch_size: int = 32,
        normalize: bool = False,
        convert_to: Literal["numpy", "torch"] = "numpy",
        show_progress: bool | None = None,
        output: Literal["sentence", "token"] = "sentence",
        sort_by_length: bool = True,
        allow_empty: bool = False,
        on_truncation: Literal["warn", "error", "ignore"] = "warn",
        max_tokens: int | None = None,
        packing: bool = False,
        truncate_dim: int | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
    ) -> np.ndarray | torch.Tensor | list[Any]: ...

    def encode(
        self,
        texts: str | Iterable[str],
        batch_size: int = 32,
        normalize: bool = False,
        convert_to: Literal["numpy", "torch"] = "numpy",
        show_progress: bool | None = None,
        output: Literal["sentence", "token"] = "sentence",
        sort_by_length: bool = True,
        allow_empty: bool = False,
        on_truncation: Literal["warn", "error", "ignore"] = "warn",
        max_tokens: int | None = None,
        packing: bool = False,
        truncate_dim: int | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
    ) -> np.ndarray | torch.Tensor | list[Any]:
        """Embed texts: (n, dim) float32 for a list, (dim,) for one string, (0, dim) for an empty list.

        ``output="token"`` gives instead, per text, its token vectors (n_tokens, hidden) without padding.
        ``normalize`` scales each vector to unit length. ``sort_by_length`` is smart batching; the
        result is in input order either way. Texts longer than ``max_seq_length`` tokens are
        truncated, with a warning, an error or silently as ``on_truncation`` says. ``max_tokens``
        caps each batch at that many padded token slots (``batch_size`` still caps the count).

        ``packing`` runs each batch without padding: its texts are laid end to end in rows with
        attention kept within each text (same results to float rounding; BERT-family models, torch
        backend). ``max_tokens`` then caps the real tokens per pass (default 8,192); it pays when
        batches mix lengths, e.g. with a large ``batch_size`` or ``sort_by_length=False``.

        ``truncate_dim`` keeps the first that many coordinates of each sentence vector (default: the
        model's ``truncate_dim``, from config_sentence_transformers.json); ``normalize`` applies after
        truncating, as in sentence-transformers.

        ``prompt`` is put before each text (``prompt_name``: the model's prompt of that name; neither: its
        ``default_prompt_name``'s, if any); see ``resolve_prompt``. Its tokens count towards ``max_seq_length``.
        """
        _check_options(convert_to, on_truncation)
        batching = self._batching(batch_size, sort_by_length, max_tokens, packing, output)  # before any tokenising
        width = self._check_truncate_dim(truncate_dim) or self.dim
        items = check_texts(texts, allow_empty)
        prompt = self.resolve_prompt(prompt_name, prompt)
        out = _empty_output(len(items), width, output)
        truncated = 0
        # A context, not a decorator: a decorator's wrapper would sit between this frame and the
        # caller's, and the truncation warning below would point into torch instead of the caller.
        with (
            self._inference(),
            progress_bar(len(items), "encode", show_progress, "text", from_items=ENCODE_FROM) as bar,
        ):
            for start in range(0, len(items), CHUNK):
                tokens = self._tokenize_chunk(items[start : start + CHUNK], start, on_truncation, prompt)
                truncated += len(tokens.truncated)
                self._run(tokens, batching, normalize, width, out, start, bar)
        if truncated and on_truncation == "warn":
            self._warn_truncated(truncated, len(items), prompt)
        return _converted(out, isinstance(texts, str), convert_to)

    @overload
    def encode_query(
        self,
        texts: str | Iterable[str],
        prompt_name: str | None = None,
        prompt: str | None = None,
        *,
        convert_to: Literal["numpy"] = "numpy",
        output: Literal["sentence"] = "sentence",
        **options: Any,
    ) -> np.ndarray: ...

    @overload
    def encode_query(
        self, texts: str | Iterable[str], prompt_name: str | None = None, prompt: str | None = None, **options: Any
    ) -> np.ndarray | torch.Tensor | list[Any]: ...

    def encode_query(
        self, texts: str | Iterable[str], prompt_name: str | None = None, prompt: str | None = None, **options: Any
    ) -> np.ndarray | torch.Tensor | list[Any]:
        """``encode`` for search queries: given no prompt, the model's "query" prompt (empty if it has none),
        never the default one; as sentence-transformers' ``encode_query``."""
        if prompt_name is None and prompt is None:
            prompt_name = self._prompts.task_name("query")
        out: np.ndarray | torch.Tensor | list[Any] = self.encode(
            texts, prompt_name=prompt_name, prompt=prompt, **options
        )
        return out

    @overload
    def encode_document(
        self,
        texts: str | Iterable[str],
        prompt_name: str | None = None,
        prompt: str | None = None,
        *,
        convert_to: Literal["numpy"] = "numpy",
        output: Literal["sentence"] = "sentence",
        **options: Any,
    ) -> np.ndarray: ...

    @overload
    def encode_document(
        self, texts: str | Iterable[str], prompt_name: str | None = None, prompt: str | None = None, **options: Any
    ) -> np.ndarray | torch.Tensor | list[Any]: ...

    def encode_document(
        self, texts: str | Iterable[str], prompt_name: str | None = None, prompt: str | None = None, **options: Any
    ) -> np.ndarray | torch.Tensor | list[Any]:
        """``encode`` for the documents searched: given no prompt, the model's "document" prompt (empty if it has
        none; as in sentence-transformers 6.2, "passage" is not used unless named), never the default one."""
        if prompt_name is None and prompt is None:
            prompt_name = self._prompts.task_name("document")
        out: np.ndarray | torch.Tensor | list[Any] = self.encode(
            texts, prompt_name=prompt_name, prompt=prompt, **options
        )
        return out

    def encode_tokenized(
        self,
        tokens: Tokenized,
        *,
        batch_size: int = 32,
        normalize: bool = False,
        max_tokens: int | None = None,
        packing: bool = False,
        show_progress: bool | None = None,
        truncate_dim: int | None = None,
        sort_by_length: bool = True,
    ) -> np.ndarray:
        """Sentence vectors (n, dim) of texts already tokenised by ``tokenize``: what ``encode`` gives for them."""
        batching = self._batching(batch_size, sort_by_length, max_tokens, packing)
        width = self._check_truncate_dim(truncate_dim) or self.dim
        out = np.empty((len(tokens), width), dtype=np.float32)
        with (
            self._inference(),
            progress_bar(len(tokens), "encode", show_progress, "text", from_items=ENCODE_FROM) as bar,
        ):
            self._run(tokens, batching, normalize, width, out, 0, bar)
        return out

    def _batching(
        self, batch_size: int, sort_by_length: bool, max_tokens: int | None, packing: bool, output: str = "sentence"
    ) -> Batching:
        """The one place that chooses padded or packed batches (and checks, once, that packing is right)."""
        if output not in ("sentence", "token"):
            raise ValueError(f"output must be 'sentence' or 'token', got {output!r}")
        if not packing:
            return Batching(self.transformer.collate, False, batch_size, sort_by_length, max_tokens)
        if self.backend_name != "torch" and output == "sentence":
            raise ValueError("packing runs on the torch backend only; call use_backend('torch') or drop packing")
        transformer = cast(Transformer, self.transformer)  # check_packable refuses a static model
        transformer.check_packable()
        tokens = PACKED_TOKENS if max_tokens is None else max_tokens
        return Batching(transformer.collate_packed, True, batch_size, sort_by_length, tokens)

    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        """Evaluation mode without autograd, for one ``encode``; each module's mode is restored after
        (``sbert.eval_mode.evaluating``)."""
        with evaluating(self), torch.inference_mode():
            yield

    def _warn_truncated(self, truncated: int, total: int, prompt: str | None) -> None:
        warnings.warn(
            f"{truncated} of {total} texts were longer than max_seq_length={self.max_seq_length} "
            f"tokens{_with_prompt(prompt)} and were truncated",
            stacklevel=_caller_stacklevel(),
        )

    def _tokenize_chunk(self, texts: list[str], start: int, on_truncation: str, prompt: str | None) -> Tokenized:
        tokens = self._tokens(texts, prompt)
        if tokens.truncated and on_truncation == "error":
            raise ValueError(
                f"texts[{start + tokens.truncated[0]}] is longer than max_seq_length={self.max_seq_length} "
                f"tokens{_with_prompt(prompt)} ({len(tokens.truncated)} such texts in this chunk); shorten it or "
                "pass on_truncation='warn'"
            )
        return tokens

    @contextlib.contextmanager
    def reusing_vectors(self) -> Iterator[VectorMemo]:
        """Within this context a text or document window embedded once (the same token ids, prompt, width
        and normalisation, on the same backend) is not run again: its sentence vector is looked up (``sbert
        index build --auto`` embeds the corpus to choose, then to index). Its memory: one vector a distinct
        text. Nested contexts share the outer one's memo; change no weights inside it."""
        outer = getattr(self, "_memo", None)
        self._memo = outer if outer is not None else VectorMemo()
        try:
            yield self._memo
        finally:
            self._memo = outer

    def _run(
        self,
        tokens: Tokenized,
        batching: Batching,
        normalize: bool,
        width: int,
        out: np.ndarray | list[Any],
        start: int,
        bar: Any,
    ) -> None:
        """Embed ``tokens`` into ``out[start:]``: an (n, width) array, or a list for token vectors."""
        memo: VectorMemo | None = getattr(self, "_memo", None)
        if memo is not None and isinstance(out, np.ndarray):
            keys = memo.keys(tokens, f"{self._runner.name}|{self._runner.precision}|{width}|{normalize}")
            missing = memo.fill(keys, out[start : start + len(tokens)])
            bar.update(len(tokens) - len(missing))
            rest = np.asarray(missing, dtype=np.int64)
            self._run_rows(tokens.select(missing), batching, normalize, width, out, start + rest, bar)
            memo.store([keys[r] for r in missing], out[start + rest])
            return
        self._run_rows(tokens, batching, normalize, width, out, start + np.arange(len(tokens)), bar)

    def _run_rows(
        self,
        tokens: Tokenized,
        batching: Batching,
        normalize: bool,
        width: int,
        out: np.ndarray | list[Any],
        positions: np.ndarray,
        bar: Any,
    ) -> None:
        """Embed ``tokens`` into the rows ``positions`` of ``out`` (one per text)."""
        if tokens.prompt_lengths is not None and isinstance(out, np.ndarray) and self._runner is not self._torch:
            raise ValueError(
                "this model's pooling leaves prompt tokens out (include_prompt=false), which the ONNX backend "
                "cannot do: call use_backend('torch') to encode with a prompt"
            )
        for rows in batching.batches(tokens.lengths):
            features = batching.collate([tokens.ids[r] for r in rows])
            if tokens.prompt_lengths is not None:
                features["prompt_length"] = torch.tensor([tokens.prompt_lengths[r] for r in rows])
            if isinstance(out, np.ndarray):
                out[positions[rows]] = finish(self._runner.sentences(features, batching.packed), width, normalize)
            else:  # token vectors: always torch
                vectors = token_vectors(self._torch.features(features, batching.packed), normalize)
                for row, text_vectors in zip(positions[rows], vectors, strict=True):
                    out[row] = text_vectors
            bar.update(len(rows))

    def table_sentences(self, features: Features) -> torch.Tensor | None:
        """A static model's sentence vectors of a padded batch without running the modules: its table's mean
        in numpy (``StaticEmbedding.mean_rows``), unit length where a Normalize follows, as ``forward`` gives
        them to float rounding (one sentence: 0.23 ms against 0.33, benchmarks/static_latency.py). None for a
        transformer, a module after the table other than Normalize (a Dense), and where ``mean_rows`` does
        not apply."""
        table, *rest = self._modules.values()  # not self[i]: nn.Sequential's indexing costs microseconds a call
        if not isinstance(table, StaticEmbedding) or any(not isinstance(module, Normalize) for module in rest):
            return None
        vectors = table.mean_rows(features)
        if vectors is None:
            return None
        if rest:  # F.normalize's eps
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return torch.from_numpy(vectors)

    def forward(self, features: Features, packed: bool = False) -> Features:
        """Run the modules in order; ``packed`` features (``Transformer.collate_packed``) take the transformer's
        packed path."""
        transformer = self.transformer
        features = cast(Transformer, transformer).forward_packed(features) if packed else transformer(features)
        for module in list(self)[1:]:
            features = module(features)
        return features

    def embed_with_grad(
        self, *groups: Sequence[str], roles: Task | Sequence[Task | None] | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Sentence vectors with gradients, for training: one forward pass per group, as sentence-transformers
        does (each group padded to its own longest text: short queries are not padded to their documents).

        ``embed_with_grad(firsts, seconds)`` gives ``(u, v)``, each (len(group), dim). ``roles`` says which
        side each group is on, so that a model with prompts is trained with them: "query" (the prompt
        ``encode_query`` uses), "document" (``encode_document``'s), None (``encode``'s default prompt); one
        role for every group or one per group. Truncation is silent here.
        """
        if isinstance(roles, (list, tuple)):
            per_group: list[Task | None] = list(roles)
        else:
            per_group = [cast("Task | None", roles)] * len(groups)
        if len(per_group) != len(groups):
            raise ValueError(f"{len(per_group)} roles for {len(groups)} groups of texts")
        out = []
        for group, role in zip(groups, per_group, strict=True):
            if not len(group):
                out.append(torch.zeros(0, self.model_dim, device=self.device))
                continue
            tokens = self._tokens(list(group), self.resolve_prompt(task=role))
            features = self.transformer.collate(tokens.ids)
            if tokens.prompt_lengths and any(tokens.prompt_lengths):  # a pooling that leaves the prompt out
                features["prompt_length"] = torch.tensor(tokens.prompt_lengths)
            out.append(self({k: v.to(self.device) for k, v in features.items()})["sentence_embedding"])
        return tuple(out)

    # -- disk ------------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the sentence-transformers folder format atomically; returns the folder's path. A static model
        that drops unknown tokens (model2vec's behaviour), with at most Normalize after it, is written in
        model2vec's layout, which sentence-transformers reads too.

        config_sentence_transformers.json keeps every setting read from the loaded folder (keys sbert does not
        use too), with this encoder's ``prompts``, ``default_prompt_name``, similarity and ``truncate_dim``.
        """
        if self._model2vec_layout():
            return self._save_model2vec(path)
        with atomic_dir(path) as tmp:
            entries = []
            for idx, module in enumerate(self):
                name = type(module).__name__
                folder = "" if idx == 0 and isinstance(module, Transformer) else f"{idx}_{name}"
                cast(Module, module).save(tmp / folder)
                entries.append({"idx": idx, "name": str(idx), "path": folder, "type": module.type_name})
            write_json(tmp / "modules.json", entries)
            write_json(tmp / ST_CONFIG, self._settings_to_save())
        return Path(path)

    def _model2vec_layout(self) -> bool:
        """Whether this is a static model with model2vec's behaviour (unknown tokens dropped) and nothing but
        Normalize after its table: saved in model2vec's layout, which model2vec reads the same (and
        sentence-transformers and sbert too)."""
        rest = list(self)[1:]
        only_normalize = len(rest) <= 1 and all(isinstance(m, Normalize) for m in rest)
        table = self.transformer
        return isinstance(table, StaticEmbedding) and table.skip_unknown and only_normalize

    def _save_model2vec(self, path: str | Path) -> Path:
        with atomic_dir(path) as tmp:
            save_model2vec(
                cast(StaticEmbedding, self.transformer), tmp, normalize=len(self) == 2, config={"saved_by": "sbert"}
            )
            write_json(tmp / ST_CONFIG, self._settings_to_save())
        return Path(path)

    def _settings_to_save(self) -> dict[str, Any]:
        settings = dict(self.settings)
        settings["__version__"] = {**(settings.get("__version__") or {}), **saved_versions()}
        settings["prompts"] = self.prompts
        settings["default_prompt_name"] = self.default_prompt_name
        settings["similarity_fn_name"] = self.similarity_fn_name
        settings.pop("truncate_dim", None)
        if self.truncate_dim is not None:
            settings["truncate_dim"] = self.truncate_dim
        return settings

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        allow_pickle: bool = False,
        device: str | None = None,
        truncate_dim: int | None = None,
        transformer: Transformer | None = None,
    ) -> Encoder:
        """Load a sentence-transformers folder, a model2vec folder, or a plain Hugging Face folder (mean pooling).

        Never runs code from the folder (``auto_map`` is refused) and never reads a file outside it, but for a
        LoRA adapter folder's base, which it names (``sbert.modules.lora``: a known model or an absolute folder).
        ``truncate_dim`` overrides the one saved in config_sentence_transformers.json. ``transformer``: use it
        (shared, not copied) instead of the folder's first module (``sbert.shared_base``: adapters over one base).
        """
        path, device = Path(path), resolve_device(device)  # an unknown or absent device fails before any work
        recover(path)  # a replace killed between its two renames left the old version hidden beside it
        if not path.is_dir():
            raise ModelNotFoundError(f"{path}: no such model folder")
        check_links(path)
        refuse_remote_code(path)
        if (path / "modules.json").is_file():
            modules = _load_modules(path, allow_pickle, transformer)
        elif is_model2vec_folder(path):
            modules = model2vec_modules(path, allow_pickle)
        elif (path / "config.json").is_file():
            transformer = Transformer.load(path, allow_pickle=allow_pickle)
            modules = [transformer, Pooling(transformer.dim, "mean")]
        else:
            raise ModelFormatError(
                f"{path}: not a model folder (expected modules.json of a sentence-transformers model, "
                "or config.json of a Hugging Face model)"
            )
        settings = read_json(path / ST_CONFIG) if (path / ST_CONFIG).is_file() else {}
        try:
            prompts = Prompts.from_settings(settings)
        except ValueError as err:
            raise ModelFormatError(f"{path / ST_CONFIG}: {err}") from None
        similarity = settings.get("similarity_fn_name") or "cosine"
        encoder = cls(modules, similarity_fn_name=similarity, settings=settings, prompts=prompts)
        try:
            encoder.truncate_dim = settings.get("truncate_dim")
        except ValueError as err:
            raise ModelFormatError(f"{path / ST_CONFIG}: {err}") from None
        if truncate_dim is not None:
            encoder.truncate_dim = truncate_dim
        encoder.path = path
        encoder.eval()
        return encoder.to(device)

    def describe(self) -> dict[str, Any]:
        """A summary for people: modules, dimension, maximum length, similarity."""
        return {
            "path": str(self.path) if self.path else None,
            "modules": [_describe_module(m) for m in self],
            "dim": self.dim,
            **({"truncate_dim": self.truncate_dim, "model_dim": self.model_dim} if self.truncate_dim else {}),
            "max_seq_length": self.max_seq_length,
            "similarity": self.similarity_fn_name,
            **({"prompts": self.prompts} if self.prompts else {}),
            **({"default_prompt_name": self.default_prompt_name} if self.default_prompt_name else {}),
            "parameters": sum(p.numel() for p in self.parameters()),
            "device": str(self.device),
        }


def _empty_output(n: int, width: int, output: str) -> np.ndarray | list[Any]:
    """Where ``encode`` writes: an (n, width) array of sentence vectors, or a list for token vectors."""
    return np.empty((n, width), dtype=np.float32) if output == "sentence" else [None] * n


def _converted(out: np.ndarray | list[Any], single: bool, convert_to: str) -> np.ndarray | torch.Tensor | list[Any]:
    """``encode``'s result in the form asked for: one item for a single text; numpy or torch."""
    convert = torch.from_numpy if convert_to == "torch" else (lambda array: array)
    if isinstance(out, list):
        tokens = [convert(t) for t in out]
        return tokens[0] if single else tokens
    return convert(out[0] if single else out)


def _describe_module(module: nn.Module) -> str:
    details = module.extra_repr()
    return f"{type(module).__name__}({details})" if details else type(module).__name__


def _load_modules(path: Path, allow_pickle: bool, transformer: Transformer | None = None) -> list[Module]:
    modules_file = path / "modules.json"
    try:
        entries = json.loads(modules_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ModelFormatError(f"{modules_file}: not valid JSON ({err})") from err
    if not isinstance(entries, list) or not entries:
        raise ModelFormatError(f"{modules_file}: expected a non-empty list of modules")
    modules: list[Module] = []
    folders: list[Path] = []
    for i, entry in enumerate(sorted(entries, key=lambda e: e.get("idx", 0) if isinstance(e, dict) else 0)):
        if not isinstance(entry, dict) or "type" not in entry or "path" not in entry:
            raise ModelFormatError(f"{modules_file}: entry {i} needs 'type' and 'path', found {entry!r}")
        cls = module_class(entry["type"])
        if cls is None:
            raise ModelFormatError(
                f"{modules_file}: module type {entry['type']!r} is not supported; sbert reads "
                f"{', '.join(MODULE_TYPES)} (and never runs code named in a model folder)"
            )
        folder = module_folder(path, entry["path"], modules_file)
        if transformer is not None and i == 0 and cls is Transformer:
            modules.append(transformer)  # shared, not read again
        else:
            modules.append(cls.load(folder, allow_pickle=allow_pickle))
        folders.append(folder)
    check_widths(modules, folders)
    return modules


def _check_options(convert_to: str, on_truncation: str) -> None:
    if convert_to not in ("numpy", "torch"):
        raise ValueError(f"convert_to must be 'numpy' or 'torch', got {convert_to!r}")
    if on_truncation not in ("warn", "error", "ignore"):
        raise ValueError(f"on_truncation must be 'warn', 'error' or 'ignore', got {on_truncation!r}")


def _with_prompt(prompt: str | None) -> str:
    """What a truncation message adds when a prompt was put before the texts (its tokens count too)."""
    return f" (prompt {prompt!r} included)" if prompt else ""


def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool | None:
    """Whether this CPU computes bfloat16 natively (x86: AVX512-BF16 or AMX-BF16; Arm: BF16); None if unknown.

    Read from the CPU flags in ``cpuinfo`` (Linux): torch's own ``get_cpu_capability()`` says "AVX512"
    on CPUs that have AVX-512 without its BF16 instructions, so it cannot tell.
    """
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    flags = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    if not flags:
        return None
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the first frame outside sbert (the user's line)."""
    import sys

    frame: FrameType | None = sys._getframe(1)
    level = 1
    package = str(Path(__file__).parent)
    while frame is not None and (frame.f_code.co_filename.startswith(package) or _is_wrapper(frame)):
        frame, level = frame.f_back, level + 1
    return level


def _is_wrapper(frame: FrameType) -> bool:
    return bool(re.search(r"[/\\](torch|contextlib)[/\\]", frame.f_code.co_filename))


if TYPE_CHECKING:  # mypy (.ci/run) checks that an Encoder keeps the contracts search and training rely on

    def _keeps_the_contracts(encoder: Encoder) -> tuple[IndexEncoder, TrainableEncoder]:
        return encoder, encoder
