"""One base model in memory and many LoRA adapters over it, each used by its name: an adapter per collection
without a whole model each.

``SharedBase.load("default", {"tracker-a": "models/tracker-a", ...})`` loads the base once and each adapter's
small weights beside it (every adapter must name that base); ``encoder(name)`` is an ``Encoder`` for that
adapter (``None``: the base alone) with the adapter folder's own pooling, normalisation and prompts, sharing
the base's transformer and tokenizer. Each forward pass runs one adapter, never mixing two in one pass;
passes of different adapters run side by side, each on its own thread (``sbert.modules.lora.route``). The
torch backend only (an ONNX export is a snapshot of one set of weights: merge an adapter to export it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from sbert.adapter_folder import DEFAULT_MAX_ADAPTERS, adapter_file
from sbert.encoder import Encoder
from sbert.modules.base import Features

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # PEFT keeps adapters in module dicts: no dots


class AdapterEncoder(Encoder):
    """An ``Encoder`` over a ``SharedBase``'s transformer that runs its own adapter (``adapter``; None: the
    base alone) in each forward pass."""

    adapter: str | None = None

    def forward(self, features: Features, packed: bool = False) -> Features:
        from sbert.modules import lora

        with lora.running(self.adapter):
            return super().forward(features, packed)

    def use_backend(self, backend="torch", precision: str = "fp32", cache_dir=None) -> Encoder:
        if backend != "torch":
            raise ValueError(
                f"adapters over a shared base run on torch; for backend {backend!r}, merge the adapter into a whole "
                "model first (sbert merge)"
            )
        return super().use_backend(backend, precision, cache_dir)


class SharedBase:
    """A base model and the adapters loaded over it by name (see the module's notes)."""

    def __init__(self, base: Encoder, base_name: str, max_adapters: int = DEFAULT_MAX_ADAPTERS) -> None:
        from sbert.adapters import is_adapter

        if is_adapter(base) or base.is_static:
            raise ValueError(f"{base_name}: the shared base must be a whole transformer model, not an adapter")
        self.base_name, self.max_adapters = base_name, max_adapters
        self._base = base
        self._encoders: dict[str, AdapterEncoder] = {}
        self._folder = _transformer_folder(base)

    @classmethod
    def load(
        cls,
        base: str | Path = "default",
        adapters: Mapping[str, str | Path] | None = None,
        *,
        max_adapters: int = DEFAULT_MAX_ADAPTERS,
        device: str | None = None,
        allow_pickle: bool = False,
    ) -> SharedBase:
        """The base model ``base`` (a name or folder) with each adapter folder of ``adapters`` (name -> folder)."""
        import sbert

        shared = cls(sbert.load(base, device=device, allow_pickle=allow_pickle), str(base), max_adapters)
        for name, folder in (adapters or {}).items():
            shared.add(name, folder)
        return shared

    @property
    def names(self) -> list[str]:
        """The adapters' names, in the order they were added."""
        return list(self._encoders)

    def add(self, name: str, folder: str | Path) -> AdapterEncoder:
        """Load the adapter at ``folder`` over the base as ``name``; returns its encoder. Refused: a bad or taken
        name, more than ``max_adapters``, a folder that holds no adapter or one made over another base."""
        from sbert.modules import Transformer, lora

        if not isinstance(name, str) or not _NAME.fullmatch(name) or "lora_" in name or name in self._encoders:
            taken = " (taken)" if name in self._encoders else ": letters, digits, '-' and '_'"
            raise ValueError(f"adapter name {name!r} is not usable{taken}")
        if len(self._encoders) >= self.max_adapters:
            raise ValueError(f"at most {self.max_adapters} adapters over one base (max_adapters); {folder} is one more")
        weights = adapter_file(folder)
        if weights is None:
            raise ValueError(f"{folder}: holds no LoRA adapter (adapter_config.json)")
        path = weights.parent
        fields = lora.adapter_config(path)
        named = fields.pop("base_model_name_or_path")
        if lora.transformer_folder(lora.base_folder(path, named), path).resolve() != self._folder:
            raise ValueError(f"{folder}: its adapter was made over {named}, not over the base served, {self.base_name}")
        transformer = self._base.transformer
        assert isinstance(transformer, Transformer)  # checked in __init__: not a static model
        unshared = lora.unshareable(fields)
        if unshared:
            raise ValueError(f"{folder}: cannot run over a shared base: {unshared}; serve it merged (sbert merge)")
        transformer.model = lora.attach(transformer.model, fields, path, named, name)
        try:
            lora.route(transformer.model, name)
        except ValueError as err:
            transformer.model.delete_adapter(name)
            if not self._encoders:  # the first adapter: the base's own layers back, as loaded
                transformer.model = transformer.model.unload()
            raise ValueError(f"{folder}: cannot run over a shared base: {err}; serve it merged (sbert merge)") from None
        encoder = AdapterEncoder.load(folder, device=str(self._base.device), transformer=transformer)
        assert isinstance(encoder, AdapterEncoder)
        encoder.adapter = name
        self._encoders[name] = encoder
        return encoder

    def encoder(self, name: str | None = None) -> Encoder:
        """The encoder of adapter ``name``, or with None the base alone; KeyError naming the adapters there are."""
        if name is None:  # a thread that runs no adapter runs the base alone, through the same layers
            return self._base
        if name not in self._encoders:
            raise KeyError(f"no adapter {name!r} here; the adapters are: {', '.join(self._encoders) or 'none'}")
        return self._encoders[name]

    def memory(self) -> dict:
        """Bytes of weights held: ``{"base": n, "adapters": {name: n, ...}}`` (an adapter's: its low-rank
        matrices)."""
        base, adapters = 0, dict.fromkeys(self._encoders, 0)
        for param_name, param in self._base.named_parameters():
            owner = next((n for n in adapters if f".{n}." in param_name and "lora_" in param_name), None)
            size = param.numel() * param.element_size()
            if owner is None:
                base += size
            else:
                adapters[owner] += size
        return {"base": base, "adapters": adapters}


def _transformer_folder(encoder: Encoder) -> Path:
    """Where ``encoder``'s transformer was read from, resolved (what an adapter's base must be)."""
    from sbert.modules import lora

    if encoder.path is None:
        raise ValueError("the shared base must be a model loaded from a folder or a name")
    return lora.transformer_folder(Path(encoder.path), Path(encoder.path)).resolve()


__all__ = ["DEFAULT_MAX_ADAPTERS", "AdapterEncoder", "SharedBase"]
