"""A training run described as data: which base model, which (data, objective) pairs, which settings.

Run files (TOML, YAML) and ``sbert train``'s options are turned into the same mapping of values:
top-level ``RunSpec`` keys, a ``train`` table of ``TrainConfig`` fields and an ``objectives`` list of
tables (objective, format, train data, and the objective's settings from ``sbert.losses.objectives``).
``run_spec`` is the one place that checks that mapping and builds the ``RunSpec``; a bad value is
refused with its key (``train.batch_size``, ``objectives[1].margin``) and what was expected.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sbert.data.examples import ScoredPair
from sbert.data.formats import FORMATS, data_format, formats_giving
from sbert.errors import InputFileError
from sbert.evaluation.dev import dev_kinds
from sbert.losses.objectives import DEFAULT_SCORE_RANGE, OBJECTIVES, objective_kind, setting_names
from sbert.training.trainer import TrainConfig

INITS = ("pretrained", "random")


@dataclass
class ObjectiveSpec:
    """One (data, objective) pair; ``settings`` are the objective's (``OBJECTIVES[objective].settings``),
    defaults filled in. The format must give a kind of example the objective needs."""

    objective: str
    format: str
    train: list[str]
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        kind = objective_kind(self.objective)
        form = data_format(self.format)
        if isinstance(self.train, (str, Path)):
            self.train = [str(self.train)]
        if not self.train:
            raise ValueError(f"objective {self.objective!r} has no training data (train = [...])")
        if form.kind_for(kind.needs) is None:
            needs = " or ".join(k.__name__ for k in kind.needs)
            gives = " or ".join(k.__name__ for k in form.kinds)
            raise ValueError(
                f"objective {self.objective!r} needs {needs} examples, but format {self.format!r} gives {gives}"
            )
        unknown = set(self.settings) - set(kind.settings)
        if unknown:
            own = ", ".join(kind.settings) or "none"
            raise ValueError(
                f"objective {self.objective!r} has no setting {sorted(unknown)[0]!r} (its settings: {own})"
            )
        self.settings = {
            key: _checked(self.settings.get(key, default), _hint_of(default), key)
            for key, default in kind.settings.items()
        }
        if self.kind is ScoredPair and self.settings.get("positive_score") == 0.0:
            low, high = self.score_range
            raise ValueError(
                f"objective {self.objective!r} takes every pair as a positive, and format {self.format!r} gives "
                f"pairs scored {low:g}-{high:g}, the lowest unrelated: give positive_score (--positive-score, e.g. "
                f"{low + 0.8 * (high - low):g}) to train the pairs scored at least that, or train all of them with "
                "--objective regression"
            )

    @property
    def kind(self) -> type:
        """The kind of example this objective reads from its format (NLI gives triplets for triplet objectives)."""
        kind = FORMATS[self.format].kind_for(OBJECTIVES[self.objective].needs)
        if kind is None:  # check() refuses such a pair first
            raise ValueError(f"format {self.format!r} gives no examples objective {self.objective!r} reads")
        return kind

    @property
    def score_range(self) -> tuple[float, float]:
        """The scale of the format's gold scores (0-5 where it names none)."""
        return FORMATS[self.format].score_range or DEFAULT_SCORE_RANGE


@dataclass
class RunSpec:
    """Everything ``sbert.training.recipe.run`` builds and trains."""

    out: str
    objectives: list[ObjectiveSpec]
    model: str = "default"
    init: str = "pretrained"  # or "random": same architecture, random weights (the no-pre-training control)
    pooling: str | None = None  # replace the model's pooling mode
    normalize: bool | None = None  # add (True) or remove (False) a final Normalize layer
    dev: str | None = None
    dev_format: str | None = None
    device: str | None = None
    allow_pickle: bool = False
    cross_encoder: bool = False  # train a CrossEncoder (regression: 1 label; classification: num_labels)
    matryoshka: str | None = None  # "384,256,128,64": the loss also at these widths (sbert.losses.matryoshka)
    lora: bool = False  # train a LoRA adapter (sbert.adapters) of this rank, alpha and targets instead of every weight
    lora_rank: int | None = None
    lora_alpha: float | None = None
    lora_targets: str | None = None  # "query,key,value,dense"
    config: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        if self.init not in INITS:
            raise ValueError(f"init must be {' or '.join(map(repr, INITS))}, got {self.init!r}")
        if not self.objectives:
            raise ValueError("objectives: none given; a run trains at least one (data, objective) pair")
        if self.dev is not None:
            usable = formats_giving(dev_kinds(self.cross_encoder))
            if self.dev_format not in usable:
                what = "a cross-encoder's dev data must be scored pairs: " if self.cross_encoder else ""
                raise ValueError(f"{what}dev format {self.dev_format!r}: expected one of {', '.join(usable)}")
        if self.cross_encoder:
            self._check_cross_encoder()
        if self.matryoshka is not None:
            self._check_matryoshka()
        if self.lora_settings is not None and (self.cross_encoder or self.init != "pretrained"):
            what = "a cross-encoder" if self.cross_encoder else "random weights (init random)"
            raise ValueError(f"lora adapts a pre-trained bi-encoder, not {what}")

    @property
    def lora_settings(self):
        """The LoRA adapter this run trains (``sbert.adapters.LoraSettings``), or None: every weight trains."""
        from sbert.adapters import LoraSettings

        return LoraSettings.chosen(self.lora, self.lora_rank, self.lora_alpha, self.lora_targets)

    def _check_matryoshka(self) -> None:
        from sbert.losses.matryoshka import parse_dims

        if self.matryoshka is not None:
            parse_dims(self.matryoshka)
        refused = sorted({o.objective for o in self.objectives} & {"classification", "cached-mnrl"})
        if self.cross_encoder or refused:
            what = "a cross-encoder" if self.cross_encoder else f"objective {refused[0]!r}"
            raise ValueError(
                f"matryoshka wraps bi-encoder embedding objectives (mnrl, regression, triplet), not {what}"
            )

    @property
    def matryoshka_dims(self) -> tuple[int, ...]:
        """The widths ``matryoshka`` names, largest first (none: no Matryoshka loss)."""
        from sbert.losses.matryoshka import parse_dims

        return parse_dims(self.matryoshka) if self.matryoshka else ()

    def _check_cross_encoder(self) -> None:
        if self.init != "pretrained" or self.pooling is not None or self.normalize is not None:
            raise ValueError("a cross-encoder run takes no --init random, --pooling or --normalize")
        kinds = {o.objective for o in self.objectives}
        trainable = [name for name, kind in OBJECTIVES.items() if kind.cross_encoder is not None]
        if not kinds <= set(trainable) or len(kinds) > 1:
            raise ValueError(f"a cross-encoder trains one kind of objective: {' or '.join(trainable)}")


# -- filling a RunSpec from a mapping ----------------------------------------------------------------------
def run_spec(values: Mapping[str, Any]) -> RunSpec:
    """The ``RunSpec`` of ``values`` (what a run file or ``sbert train``'s options give).

    Raises ValueError naming the key at fault (``train.lr``, ``objectives[0].margin``) and what was expected.
    """
    if isinstance(values.get("matryoshka"), list):  # a run file's list of widths, as the CLI's "384,256"
        values = {**values, "matryoshka": ",".join(map(str, values["matryoshka"]))}
    hints = typing.get_type_hints(RunSpec)
    _refuse_unknown(values, set(hints) - {"config"} | {"train"}, "", "run keys")  # the config is the train table
    top = {key: _checked(value, hints[key], key) for key, value in values.items() if key not in ("train", "objectives")}
    if "out" not in top:
        raise ValueError("out: missing; give the folder the trained model goes to")
    config = _train_config(values.get("train", {}))
    objectives = values.get("objectives", [])
    if not isinstance(objectives, list):
        raise ValueError(f"objectives: expected a list of tables, got {objectives!r}")
    return RunSpec(objectives=[_objective(o, i) for i, o in enumerate(objectives)], config=config, **top)


def _train_config(values: Any) -> TrainConfig:
    if not isinstance(values, Mapping):
        raise ValueError(f"train: expected a table of training settings, got {values!r}")
    hints = typing.get_type_hints(TrainConfig)
    _refuse_unknown(values, set(hints), "train.", "training settings")
    return TrainConfig(**{key: _checked(value, hints[key], f"train.{key}") for key, value in values.items()})


def _objective(values: Any, index: int) -> ObjectiveSpec:
    where = f"objectives[{index}]"
    if not isinstance(values, Mapping):
        raise ValueError(f"{where}: expected a table (objective, format, train, settings), got {values!r}")
    names = {"objective", "format", "train"} | setting_names()
    _refuse_unknown(values, names, f"{where}.", "objective keys")
    for key in ("objective", "format", "train"):
        if key not in values:
            raise ValueError(f"{where}.{key}: missing")
    train = values["train"]
    train = [train] if isinstance(train, str) else train
    if not isinstance(train, list) or not all(isinstance(p, str) for p in train):
        raise ValueError(f"{where}.train: expected a path or a list of paths, got {values['train']!r}")
    objective = _checked(values["objective"], str, f"{where}.objective")
    fmt = _checked(values["format"], str, f"{where}.format")
    own = OBJECTIVES[objective].settings if objective in OBJECTIVES else {}
    # another objective's setting (margin on a regression objective) is ignored, as an unused option is
    settings = {k: _checked(v, _hint_of(own[k]), f"{where}.{k}") for k, v in values.items() if k in own}
    try:
        return ObjectiveSpec(objective, fmt, train, settings)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def _refuse_unknown(values: Mapping[str, Any], known: set[str], prefix: str, what: str) -> None:
    unknown = [key for key in values if key not in known]
    if unknown:
        raise ValueError(f"{prefix}{unknown[0]}: unknown key; {what} are {', '.join(sorted(known))}")


_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", type(None): "nothing"}


def _hint_of(default: Any) -> Any:
    return float if isinstance(default, float) else type(default)


def _checked(value: Any, hint: Any, key: str) -> Any:
    """``value`` if it is of type ``hint`` (a float field takes an integer, as a float); else a ValueError."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    for option in typing.get_args(hint) if union else (hint,):
        if option is type(None) and value is None:
            return None
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if option in (str, bool) and isinstance(value, option):
            return value
        if option in (str, bool, int, float, type(None)):
            continue
        raise TypeError(f"{key}: no check for values of type {option!r}")  # a field of a new type: add it above
    expected = " or ".join(_NAMES[o] for o in (typing.get_args(hint) if union else (hint,)))
    note = " (YAML reads 2e-5 as text: write 2.0e-5)" if isinstance(value, str) and _is_number(value) else ""
    raise ValueError(f"{key}: expected {expected}, got {value!r}{note}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# -- where the mapping comes from ----------------------------------------------------------------------------
def read_run_file(path: str | Path) -> dict[str, Any]:
    """The mapping of values in a TOML or YAML run file: top-level run keys, a ``[train]`` table of
    TrainConfig fields and one ``[[objectives]]`` table per (data, objective) pair."""
    from sbert.data.paths import read_text

    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{path}: no such run file")
    text = read_text(path)
    try:
        if path.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            raise InputFileError(f"{path}: expected a .toml, .yaml or .yml run file")
    except (ValueError, ImportError) as err:  # tomllib.TOMLDecodeError and yaml.YAMLError are ValueErrors
        raise InputFileError(f"{path}: cannot parse: {err}") from err
    if not isinstance(data, dict):
        raise InputFileError(f"{path}: expected a table of settings at the top")
    return data


def load_run_file(path: str | Path, overrides: Mapping[str, Any] | None = None) -> RunSpec:
    """The ``RunSpec`` of a run file, with ``overrides`` (values as ``values_from_options`` gives) on top."""
    values = merged(read_run_file(path), overrides or {})
    try:
        return run_spec(values)
    except ValueError as err:
        raise InputFileError(f"{path}: {err}") from err


def merged(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` on top; their ``train`` tables are merged key by key."""
    out = {**base, **overrides}
    if isinstance(base.get("train"), Mapping) and "train" in overrides:
        out["train"] = {**base["train"], **overrides["train"]}
    return out


def values_from_options(options: Mapping[str, Any], train: Sequence[str] = ()) -> dict[str, Any]:
    """Flat command-line options (None: not given) as a run file's mapping: run keys at the top, TrainConfig
    fields in ``train``, and the objective's keys (with ``train`` the training data) in ``objectives[0]``."""
    given = {key: value for key, value in options.items() if value is not None}
    config_keys = {f.name for f in dataclasses.fields(TrainConfig)}
    objective_keys = {"objective", "format"} | setting_names()
    values: dict[str, Any] = {k: v for k, v in given.items() if k not in config_keys | objective_keys}
    config = {k: v for k, v in given.items() if k in config_keys}
    objective = {k: v for k, v in given.items() if k in objective_keys}
    if train:
        objective["train"] = list(train)
    if config:
        values["train"] = config
    if objective:
        values["objectives"] = [objective]
    return values
