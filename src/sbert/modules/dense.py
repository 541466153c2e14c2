"""Dense: a linear layer with an activation over the sentence vector (batch, in) -> (batch, out)."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from sbert.errors import ModelFormatError
from sbert.modules.base import Features, Module, load_weights, save_weights, write_json
from sbert.modules.folder import check_width, read_json


def _activation(name: object, config_path: Path) -> nn.Module:
    """Resolve a saved activation name such as ``torch.nn.modules.activation.Tanh``: only torch's own
    activation functions (and ``Identity``), made without arguments."""
    if name is None:
        return nn.Tanh()
    short = name.rsplit(".", 1)[-1] if isinstance(name, str) else ""
    cls = getattr(nn, short, None)
    known = isinstance(cls, type) and (cls is nn.Identity or cls.__module__ == nn.Tanh.__module__)
    if cls is None or not known or not isinstance(name, str) or not name.startswith("torch."):
        raise ModelFormatError(
            f"{config_path}: 'activation_function' {name!r} is not a torch.nn activation function (such as "
            "torch.nn.modules.activation.Tanh); sbert never imports code named in a model folder"
        )
    try:
        return cls()
    except TypeError:
        raise ModelFormatError(
            f"{config_path}: 'activation_function' {name!r} needs arguments a model folder cannot give; "
            "expected an activation function such as torch.nn.modules.activation.Tanh"
        ) from None


def _activation_name(module: nn.Module) -> str:
    cls = type(module)
    return f"{cls.__module__}.{cls.__qualname__}"


class Dense(Module):
    """``features['sentence_embedding'] = activation(W x + b)``."""

    type_name = "sentence_transformers.models.Dense"
    input_field = "in_features"  # the config's name for ``input_dim``

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, activation: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        self.activation = nn.Tanh() if activation is None else activation

    @property
    def dim(self) -> int:
        return self.linear.out_features

    @property
    def input_dim(self) -> int:
        """Width of the sentence vectors it takes (what the module before it must give)."""
        return self.linear.in_features

    def forward(self, features: Features) -> Features:
        features["sentence_embedding"] = self.activation(self.linear(features["sentence_embedding"]))
        return features

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        write_json(
            path / "config.json",
            {
                "in_features": self.linear.in_features,
                "out_features": self.linear.out_features,
                "bias": self.linear.bias is not None,
                "activation_function": _activation_name(self.activation),
            },
        )
        save_weights(self, path)

    @classmethod
    def load(cls, path: Path, *, allow_pickle: bool = False) -> Dense:
        config_path = path / "config.json"
        config = read_json(config_path)
        missing = [k for k in ("in_features", "out_features") if k not in config]
        if missing:
            raise ModelFormatError(f"{config_path}: missing {', '.join(missing)}")
        for key in ("module_input_name", "module_output_name"):
            if config.get(key, "sentence_embedding") not in ("sentence_embedding", None):
                raise ModelFormatError(
                    f"{config_path}: {key}={config[key]!r} is not supported by sbert "
                    "(a Dense layer reads and writes the sentence embedding)"
                )
        if config.get("use_residual"):
            raise ModelFormatError(f"{config_path}: use_residual=true is not supported by sbert")
        n_in = check_width(config["in_features"], config_path, "in_features")
        n_out = check_width(config["out_features"], config_path, "out_features")
        bias = config.get("bias", True)
        if not isinstance(bias, bool):
            raise ModelFormatError(f"{config_path}: 'bias' must be true or false, got {bias!r}")
        activation = _activation(config.get("activation_function"), config_path)
        shapes = {"linear.weight": (n_out, n_in), **({"linear.bias": (n_out,)} if bias else {})}
        described = f"{config_path.name} (in_features {n_in}, out_features {n_out}, bias {str(bias).lower()})"
        # the weights' shapes are checked before the layer is made: a config cannot make it larger than they are
        state = load_weights(path, allow_pickle=allow_pickle, expected=shapes, config=described)
        module = cls(n_in, n_out, bias, activation)
        try:
            module.load_state_dict(state)
        except RuntimeError as err:
            raise ModelFormatError(f"{path}: weights do not match config.json ({err})") from err
        return module

    def extra_repr(self) -> str:
        return f"activation={type(self.activation).__name__}"
