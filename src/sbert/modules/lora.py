"""LoRA adapters on a Transformer's Hugging Face model, through ``peft``: wrap, save, load, merge.

An adapter folder holds PEFT's ``adapter_config.json`` (which names its base in ``base_model_name_or_path``)
and ``adapter_model.safetensors``, beside the tokenizer files and ``sentence_bert_config.json``; none of the
base's weights. The base is found by name, never downloaded:

- a model name sbert knows (``sentence-transformers/all-MiniLM-L6-v2``, ``default``; ``sbert.model_names``), or
- an absolute path to a local model folder (a sentence-transformers or a plain Hugging Face folder).

A relative path is refused: it would mean another folder depending on where the program runs (PEFT reads it
from the working directory). The base is loaded with the same checks as any model folder (no code, no pickle
without ``allow_pickle``); ``adapter_config.json`` is read field by field, and a field sbert does not
understand (one that would change the model beyond plain low-rank layers) is refused naming it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import threading
import types
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from sbert.adapter_folder import ADAPTER_CONFIG, ADAPTER_WEIGHTS, is_adapter_folder, is_peft
from sbert.errors import ModelFormatError, ModelNotFoundError
from sbert.modules.folder import (
    check_finite_tensors,
    check_safetensors,
    module_folder,
    read_json,
)

# Fields of adapter_config.json that sbert passes on to peft's LoraConfig: plain low-rank layers.
PASSED = (
    "r",
    "lora_alpha",
    "lora_dropout",
    "target_modules",
    "exclude_modules",
    "bias",
    "use_rslora",
    "use_dora",
    "fan_in_fan_out",
    "lora_bias",
    "rank_pattern",
    "alpha_pattern",
    "layers_to_transform",
    "layers_pattern",
)
# Fields read elsewhere (the base) or that say nothing about the weights' maths.
IGNORED = ("peft_type", "base_model_name_or_path", "task_type", "inference_mode", "init_lora_weights", "revision")
IGNORED_TOO = ("peft_version", "auto_mapping")
# sbert's own pooling ignores the pooler layer: an adapter on it would be dead weight.
EXCLUDED = ("pooler.dense",)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Without the deprecation notice peft's own calls into transformers raise (nothing the user can change)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
        yield


def _peft():
    try:
        import peft
    except ImportError as err:
        raise ImportError("LoRA adapters need peft: pip install 'sbert[lora]'") from err
    return peft


def wrap(
    model,
    rank: int,
    alpha: float,
    targets: Sequence[str],
    base: str,
    dropout: float = 0.0,
):
    """``model`` (a Hugging Face encoder) with fresh LoRA layers of ``rank`` on the linear layers named
    ``targets``; only they train. ``base`` is what ``adapter_config.json`` will name as the base."""
    peft = _peft()
    config = peft.LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(targets),
        exclude_modules=[name for name in EXCLUDED if _has_module(model, name)] or None,
    )
    try:
        with _quiet():
            wrapped = peft.get_peft_model(model, config)
    except ValueError as err:
        linear = sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules() if _is_linear(m)})
        raise ValueError(
            f"LoRA targets {', '.join(targets)}: {str(err).splitlines()[0]}; this model's linear layers are "
            f"named {', '.join(linear)}"
        ) from None
    wrapped.peft_config["default"].base_model_name_or_path = base
    fuse(wrapped)
    return wrapped


def _has_module(model, name: str) -> bool:
    return any(full == name or full.endswith("." + name) for full, _ in model.named_modules())


def _is_linear(module) -> bool:
    return isinstance(module, torch.nn.Linear)


def base_name(model) -> str:
    """The base a PEFT model's adapter names (``base_model_name_or_path``)."""
    return str(active_config(model).base_model_name_or_path)


def active_config(model):
    """The LoraConfig of a PEFT model's active adapter (the only one, but over a shared base)."""
    return model.peft_config.get(model.active_adapter) or next(iter(model.peft_config.values()))


def save_adapter(model, path: Path) -> None:
    """The adapter's config and weights (safetensors) into ``path``; nothing of the base."""
    model.save_pretrained(path, safe_serialization=True, save_embedding_layers=False)  # no look-up of the base online
    card = path / "README.md"  # peft's blank model card template
    if card.is_file():
        card.unlink()


def merged_model(model):
    """A plain Hugging Face model: a copy of the base with the adapter's low-rank products added in (``model`` is
    left as it is)."""
    return copy.deepcopy(model).merge_and_unload()


def trainable(model) -> None:
    """Let a loaded adapter train on (its LoRA weights only)."""
    active_config(model).inference_mode = False
    for name, param in model.named_parameters():
        param.requires_grad = "lora_" in name


# -- reading an adapter folder -------------------------------------------------------------------------------
def adapter_config(path: Path) -> dict[str, Any]:
    """``adapter_config.json`` of ``path``, checked: a LoRA adapter naming its base, with no field sbert does not
    understand. Returns the fields for ``LoraConfig`` plus ``base_model_name_or_path``."""
    file = path / ADAPTER_CONFIG
    config = read_json(file)
    if config.get("peft_type") != "LORA":
        raise ModelFormatError(f"{file}: 'peft_type' is {config.get('peft_type')!r}; sbert reads LoRA adapters")
    base = config.get("base_model_name_or_path")
    if not isinstance(base, str) or not base.strip():
        raise ModelFormatError(f"{file}: 'base_model_name_or_path' must name the base model, got {base!r}")
    if config.get("task_type") not in (None, "FEATURE_EXTRACTION"):
        raise ModelFormatError(f"{file}: 'task_type' {config['task_type']!r}: sbert reads adapters of an encoder")
    defaults = dataclasses.asdict(_peft().LoraConfig())
    for key, value in config.items():
        if key in PASSED or key in IGNORED or key in IGNORED_TOO:
            continue
        if value in (None, False, {}, []) or (key in defaults and value == defaults[key]):
            continue
        raise ModelFormatError(
            f"{file}: field {key!r} ({str(value)[:60]}) is not read by sbert, which loads plain LoRA layers; "
            "merge the adapter where it was made and load the merged model instead"
        )
    return {"base_model_name_or_path": base, **{key: config[key] for key in PASSED if key in config}}


def base_folder(path: Path, base: str) -> Path:
    """The folder of the base an adapter at ``path`` names: a known model name or an absolute folder path."""
    from sbert.model_names import is_known_name, resolve

    file = path / ADAPTER_CONFIG
    if is_known_name(base):
        try:
            return resolve(base)
        except ModelNotFoundError as err:
            raise ModelNotFoundError(f"{path}: the adapter's base model {base!r} is not here: {err}") from None
    if not Path(base).is_absolute():
        raise ModelFormatError(
            f"{file}: base model {base!r} is neither a model name sbert knows nor an absolute folder path; "
            "sbert does not read a relative path (its meaning would depend on the working directory)"
        )
    if not Path(base).is_dir():
        raise ModelNotFoundError(
            f"{path}: the adapter's base model {base} is not here; put the base model there, or write where it "
            f"is into {ADAPTER_CONFIG}'s 'base_model_name_or_path' (sbert never downloads models)"
        )
    return Path(base)


def transformer_folder(base: Path, adapter: Path) -> Path:
    """The folder of ``base``'s transformer: the base itself, or where its ``modules.json`` puts it."""
    if is_adapter_folder(base):
        raise ModelFormatError(
            f"{adapter}: its base {base} is itself an adapter; merge that one first (sbert merge) and name the result"
        )
    if (base / "config.json").is_file() or not (base / "modules.json").is_file():
        return base
    import json

    entries = json.loads((base / "modules.json").read_text(encoding="utf-8"))
    first = min(entries, key=lambda e: e.get("idx", 0)) if isinstance(entries, list) and entries else {}
    return module_folder(base, first.get("path", "") if isinstance(first, dict) else "", base / "modules.json")


def attach(model, fields: dict[str, Any], path: Path, base: str, name: str = "default"):
    """``model`` with the LoRA layers ``fields`` describe, their weights read from ``path``'s safetensors; the
    weights must be exactly the adapter's (none missing, none extra, finite). A PEFT ``model`` gets them as one
    more adapter called ``name`` beside its others (the active one stays active)."""
    from peft.utils import get_peft_model_state_dict, set_peft_model_state_dict

    state = _adapter_weights(path)
    wrapped = _add_layers(model, fields, path, name)
    wrapped.peft_config[name].base_model_name_or_path = base
    expected = set(get_peft_model_state_dict(wrapped, adapter_name=name, save_embedding_layers=False))
    missing, extra = sorted(expected - set(state)), sorted(set(state) - expected)
    weights = path / ADAPTER_WEIGHTS
    if missing or extra:
        what = f"lacks {missing[0]!r}" if missing else f"holds {extra[0]!r}, which the config names no layer for"
        raise ModelFormatError(f"{weights}: the weights do not match {ADAPTER_CONFIG}: it {what}")
    try:
        set_peft_model_state_dict(wrapped, state, adapter_name=name)
    except RuntimeError as err:  # a shape that does not fit
        raise ModelFormatError(f"{weights}: {str(err).splitlines()[0]}") from None
    wrapped.eval()
    for param in wrapped.parameters():
        param.requires_grad = False
    fuse(wrapped)
    return wrapped


# -- the LoRA sum, fused -----------------------------------------------------------------------------------
def fuse(model) -> None:
    """Make ``model``'s LoRA linear layers run base layer and low-rank update as one autograd step
    (``_LowRankLinear``): the update is added into the base layer's output in place, and the gradient of the
    input is summed into one tensor, where PEFT's ``result + B(A(x)) * scaling`` allocates two more tensors of
    the output's size per layer going forward and one of the input's coming back. The same numbers up to float
    rounding; PEFT's own forward still runs where it does more (adapters disabled or merged, mixed-adapter
    batches, several active adapters, DoRA, a bias on B, dropout on the adapter's input, a base that trains)."""
    lora = _peft().tuners.lora
    for layer in model.modules():
        if type(layer) is lora.Linear and layer.forward.__func__ is not _routed_forward:
            layer.forward = types.MethodType(_fused_forward, layer)


def _fused_forward(layer, x, *args, **kwargs):
    """PEFT's forward of a LoRA linear layer, through ``_LowRankLinear`` where that computes the same."""
    plain = not (layer.disable_adapters or layer.merged)
    active = [name for name in layer.active_adapters if name in layer.lora_A]
    if plain and len(active) == 1 and not args and not kwargs and _fusable(layer, active[0], x):
        return _low_rank_linear(layer, active[0], x)
    return type(layer).forward(layer, x, *args, **kwargs)


def _fusable(layer, name: str, x) -> bool:
    """Whether ``_LowRankLinear`` computes what PEFT does for ``layer``'s adapter ``name`` on ``x``: a plain
    frozen linear base, plain LoRA (no bias on B, no dropout, no variant), one float dtype, no autocast."""
    base, lora_a, lora_b = layer.base_layer, layer.lora_A[name], layer.lora_B[name]
    frozen = not base.weight.requires_grad and (base.bias is None or not base.bias.requires_grad)
    plain = (
        name not in layer.lora_variant
        and lora_b.bias is None
        and isinstance(layer.lora_dropout[name], torch.nn.Identity)
    )
    dtypes = {x.dtype, base.weight.dtype, lora_a.weight.dtype, lora_b.weight.dtype}
    autocast = torch.is_autocast_enabled(x.device.type) if x.device.type in ("cpu", "cuda") else True
    return (
        type(base) is torch.nn.Linear
        and frozen
        and plain
        and len(dtypes) == 1
        and x.is_floating_point()
        and not autocast
    )


def _low_rank_linear(layer, name: str, x):
    """``layer``'s output for ``x`` with adapter ``name``'s update (``_fusable``), in one autograd step."""
    base = layer.base_layer
    weights = (base.weight, base.bias, layer.lora_A[name].weight, layer.lora_B[name].weight)
    return _LowRankLinear.apply(x, *weights, float(layer.scaling[name]))


class _LowRankLinear(torch.autograd.Function):
    """``x W^T + b + scaling * (x A^T) B^T`` for a frozen ``W``, ``b``: the update is added into the base
    layer's output in place, and backward sums the input's gradient through ``W`` and through ``A`` into one
    tensor."""

    @staticmethod
    def forward(ctx, x, weight, bias, lora_a, lora_b, scaling: float):
        flat = x.reshape(-1, x.shape[-1])
        low = flat @ lora_a.t()
        out = torch.addmm(bias, flat, weight.t()) if bias is not None else flat @ weight.t()
        out.addmm_(low, lora_b.t(), alpha=scaling)
        ctx.save_for_backward(flat, low, weight, lora_a, lora_b)
        ctx.scaling, ctx.input_shape = scaling, x.shape
        return out.view(*x.shape[:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad):
        flat, low, weight, lora_a, lora_b = ctx.saved_tensors
        grad = grad.reshape(-1, grad.shape[-1])
        grad_low = (grad @ lora_b).mul_(ctx.scaling)
        grad_x = grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = (grad @ weight).addmm_(grad_low, lora_a).view(ctx.input_shape)
        if ctx.needs_input_grad[3]:
            grad_a = grad_low.t() @ flat
        if ctx.needs_input_grad[4]:
            grad_b = (grad.t() @ low).mul_(ctx.scaling)
        return grad_x, None, None, grad_a, grad_b, None


# -- several adapters side by side ----------------------------------------------------------------------
_RUNNING = threading.local()  # .adapter: what this thread's forward passes run through routed layers


@contextlib.contextmanager
def running(adapter: str | None) -> Iterator[None]:
    """Forward passes in this block, on this thread, run adapter ``adapter`` in the layers ``route`` set up
    (None: the base alone); passes on other threads run their own at the same time."""
    before = getattr(_RUNNING, "adapter", None)
    _RUNNING.adapter = adapter
    try:
        yield
    finally:
        _RUNNING.adapter = before


def unshareable(fields: dict[str, Any]) -> str | None:
    """Why an adapter of ``fields`` (``adapter_config``'s) cannot share its base with others, or None: one that
    trains the base's own biases changes what the others run on; DoRA is more than a low-rank update."""
    if fields.get("bias", "none") != "none":
        return f"it trains the base's biases too (bias={fields['bias']!r})"
    return "it is a DoRA adapter (use_dora)" if fields.get("use_dora") else None


def route(model, name: str) -> None:
    """Make the LoRA layers of ``model``'s adapter ``name`` follow ``running`` instead of PEFT's active adapter
    (a setting of the whole model, which two threads cannot each hold): each layer adds the low-rank update of
    the adapter its caller's thread runs, as PEFT computes it, or none. ValueError for a layer that is not a
    plain LoRA linear layer (an embedding's, say); ``unshareable`` says what else keeps an adapter apart."""
    lora = _peft().tuners.lora
    for layer_name, layer in model.named_modules():
        if not isinstance(layer, lora.LoraLayer) or not _holds(layer, name):
            continue
        if type(layer) is not lora.Linear or name in getattr(layer, "lora_variant", {}):
            where = layer_name.removeprefix("base_model.model.")
            raise ValueError(f"its layer {where} is not a plain LoRA linear layer")
        layer.forward = types.MethodType(_routed_forward, layer)


def _holds(layer, name: str) -> bool:
    return any(name in getattr(layer, table, {}) for table in ("lora_A", "lora_embedding_A", "lora_magnitude_vector"))


def _routed_forward(layer, x, *args, **kwargs):
    """A LoRA linear layer's output with the update of the adapter the calling thread's pass runs."""
    name = getattr(_RUNNING, "adapter", None)
    if name is None or name not in layer.lora_A:
        return layer.base_layer(x, *args, **kwargs)
    if not args and not kwargs and _fusable(layer, name, x):
        return _low_rank_linear(layer, name, x)
    result = layer.base_layer(x, *args, **kwargs)
    lora_a, lora_b = layer.lora_A[name], layer.lora_B[name]
    update = lora_b(lora_a(layer.lora_dropout[name](x.to(lora_a.weight.dtype)))) * layer.scaling[name]
    return (result + update).to(result.dtype)


def _adapter_weights(path: Path) -> dict:
    """The tensors of ``path``'s ``adapter_model.safetensors``, checked whole and finite (no pickle read)."""
    from safetensors.torch import load_file

    weights = path / ADAPTER_WEIGHTS
    if not weights.is_file():
        pickled = (path / "adapter_model.bin").is_file()
        note = " (adapter_model.bin is pickle, which sbert does not read)" if pickled else ""
        raise ModelFormatError(f"{path}: no {ADAPTER_WEIGHTS}{note}")
    check_safetensors(weights)
    state = load_file(str(weights))
    check_finite_tensors(state.items(), weights)
    return state


def _add_layers(model, fields: dict[str, Any], path: Path, name: str):
    """``model`` (plain or PEFT) with empty LoRA layers called ``name`` as ``fields`` describe them."""
    peft = _peft()
    try:
        config = peft.LoraConfig(**fields, inference_mode=True)
        with _quiet():
            if is_peft(model):
                model.add_adapter(name, config)
                return model
            return peft.get_peft_model(model, config, adapter_name=name)
    except (TypeError, ValueError) as err:
        raise ModelFormatError(f"{path / ADAPTER_CONFIG}: {str(err).splitlines()[0]}") from None
