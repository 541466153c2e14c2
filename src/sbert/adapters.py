"""One base model, a small adapter per collection: LoRA on an encoder's transformer (``peft``).

``add_lora`` puts fresh low-rank layers on an encoder's transformer and freezes everything else, so training
changes only them; ``Encoder.save`` then writes an adapter folder (PEFT's ``adapter_config.json`` and
``adapter_model.safetensors``, the tokenizer, pooling and the rest of sbert's module files; none of the base's
weights), which ``sbert.load`` rebuilds over its base (``sbert.modules.lora``) and sentence-transformers loads
too. ``merge`` gives an ordinary whole model with the adapter folded into its weights. ``adapter_record``
(``sbert.adapter_folder``) is how an index names the adapter its vectors were made with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sbert.adapter_folder import ADAPTER_CONFIG, adapter_file, adapter_record, is_adapter_folder, is_peft

if TYPE_CHECKING:
    from sbert.encoder import Encoder

# The attention projections and both feed-forward layers of a BERT-family encoder (sentence-transformers'
# own examples target the same): the adapter reaches every linear layer the sentence vector passes through.
DEFAULT_TARGETS = ("query", "key", "value", "dense")
# the learning rate an adapter trains at by default in ``sbert adapt --lora``: its low-rank updates start at zero
# and at a whole model's 2e-5 barely move in 100 steps (chosen on openoffice-dups, benchmarks/adapters.py)
LORA_LR = 3e-4


@dataclass(frozen=True)
class LoraSettings:
    """A LoRA adapter's shape: ``rank`` of each low-rank update, scaled by ``alpha / rank``, on the linear layers
    whose names end in one of ``targets``; ``dropout`` on the adapter's input while training."""

    rank: int = 16
    alpha: float = 32.0
    targets: tuple[str, ...] = DEFAULT_TARGETS
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if type(self.rank) is not int or self.rank < 1:
            raise ValueError(f"LoRA rank must be a whole number >= 1, got {self.rank!r}")
        if not self.alpha > 0:
            raise ValueError(f"LoRA alpha must be above 0, got {self.alpha!r}")
        if not self.targets or not all(isinstance(t, str) and t.strip() for t in self.targets):
            raise ValueError(f"LoRA targets must name at least one layer, got {self.targets!r}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"LoRA dropout must be from 0 to below 1, got {self.dropout!r}")

    @staticmethod
    def parse_targets(text: str) -> tuple[str, ...]:
        """``"query,key,value"`` -> ``("query", "key", "value")``."""
        return tuple(part.strip() for part in text.split(",") if part.strip())

    @classmethod
    def chosen(
        cls, lora: bool | None, rank: int | None = None, alpha: float | None = None, targets: str | None = None
    ) -> LoraSettings | None:
        """The settings ``--lora [--lora-rank R --lora-alpha A --lora-targets T]`` give (None: no adapter, full
        training); a shape given without ``lora`` is refused rather than ignored."""
        given = {"lora_rank": rank, "lora_alpha": alpha, "lora_targets": targets}
        if not lora:
            named = [key for key, value in given.items() if value is not None]
            if named:
                raise ValueError(f"{named[0]} shapes a LoRA adapter: give lora (--lora) too, or leave it out")
            return None
        shape: dict[str, Any] = {"rank": rank, "alpha": float(alpha) if alpha is not None else None}
        shape["targets"] = cls.parse_targets(targets) if targets is not None else None
        return cls(**{key: value for key, value in shape.items() if value is not None})


def is_adapter(encoder: Encoder) -> bool:
    """Whether ``encoder``'s transformer carries a LoRA adapter over its base."""
    return is_peft(getattr(encoder.transformer, "model", None))


def adapter_shape(encoder) -> dict | None:
    """The shape of ``encoder``'s adapter (rank, alpha, targets), as a resumed run must find it again; None
    without one."""
    if not is_adapter(encoder):
        return None
    from sbert.modules.lora import active_config

    config = active_config(encoder.transformer.model)
    return {"rank": config.r, "alpha": config.lora_alpha, "targets": sorted(config.target_modules)}


def add_lora(encoder: Encoder, settings: LoraSettings, base: str, seed: int = 0) -> Encoder:
    """Put fresh LoRA layers on ``encoder``'s transformer (in place) and freeze every other weight: the base's
    and any module's after it. ``base`` is how the saved adapter names its base (``model_names.base_reference``
    of the name or folder the encoder was loaded from); ``seed`` draws the layers' first weights (the global
    random state is left as it was). Returns ``encoder``."""
    import torch

    from sbert.model_names import base_reference
    from sbert.modules.lora import wrap

    if encoder.is_static:
        raise ValueError("LoRA adapts a transformer; this is a static model (a table of token vectors)")
    if is_adapter(encoder):
        raise ValueError("this model already carries an adapter: train it on (continue_adapter) or merge it first")
    for param in encoder.parameters():
        param.requires_grad = False
    transformer = encoder.transformer
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        transformer.model = wrap(
            transformer.model, settings.rank, settings.alpha, settings.targets, base_reference(base), settings.dropout
        )
    return encoder


def continue_adapter(encoder: Encoder) -> Encoder:
    """Let a loaded adapter's LoRA weights train on (everything else frozen); returns ``encoder``."""
    from sbert.modules.lora import trainable

    for param in encoder.parameters():
        param.requires_grad = False
    trainable(encoder.transformer.model)
    return encoder


def for_training(encoder: Encoder, lora: LoraSettings | None, base: str, seed: int = 0) -> Encoder:
    """The encoder a run trains: with ``lora``, fresh LoRA layers drawn from ``seed`` (or, on an adapter model,
    its own adapter trained on); without, an adapter model merged into a whole model (full fine-tuning), else
    as it is."""
    if lora is None:
        return merge(encoder) if is_adapter(encoder) else encoder
    if not is_adapter(encoder):
        return add_lora(encoder, lora, base, seed)
    own = adapter_shape(encoder) or {}
    if (own.get("rank"), own.get("alpha"), own.get("targets")) != (lora.rank, lora.alpha, sorted(lora.targets)):
        import warnings

        warnings.warn(
            f"the model carries a LoRA adapter already (rank {own.get('rank')}, alpha {own.get('alpha')}, targets "
            f"{','.join(own.get('targets') or [])}): that one trains on, in its own shape",
            UserWarning,
            stacklevel=2,
        )
    return continue_adapter(encoder)


def merge(encoder: Encoder) -> Encoder:
    """A whole model equal to ``encoder``: its adapter's low-rank products folded into a copy of the base's
    weights (``encoder`` is left as it is). An encoder without an adapter is returned unchanged."""
    from sbert.encoder import Encoder
    from sbert.modules import Module, Transformer

    first = encoder.transformer
    if not is_adapter(encoder) or not isinstance(first, Transformer):
        return encoder
    modules = [first.merged(), *cast("list[Module]", list(encoder)[1:])]
    merged = Encoder(modules, encoder.similarity_fn_name, encoder.truncate_dim, encoder.settings)
    merged.prompts, merged.default_prompt_name = encoder.prompts, encoder.default_prompt_name
    merged.path = encoder.path
    merged.train(encoder.training)
    return merged.to(encoder.device)


def merge_folder(folder: str | Path, out: str | Path, *, overwrite: bool = False) -> Path:
    """Write the adapter model at ``folder`` (over its base) as an ordinary whole model to ``out``; returns it.
    Refuses a ``folder`` that holds no adapter, and an ``out`` that holds a model unless ``overwrite``."""
    import sbert
    from sbert.atomic import check_model_target
    from sbert.model_names import resolve

    source = resolve(folder)
    if adapter_file(source) is None:
        raise ValueError(f"{source}: holds no adapter ({ADAPTER_CONFIG}); it is a whole model already")
    check_model_target(out, overwrite=overwrite)
    return merge(sbert.load(source)).save(out)


__all__ = [
    "DEFAULT_TARGETS",
    "LoraSettings",
    "adapter_record",
    "adapter_shape",
    "add_lora",
    "continue_adapter",
    "for_training",
    "is_adapter",
    "is_adapter_folder",
    "merge",
    "merge_folder",
]
