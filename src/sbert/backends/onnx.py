"""ONNX Runtime backend: the whole encoder (transformer, pooling, dense, normalise) as one ONNX graph.

The export is cached beside the model (``<model>/onnx/``), or in the user's cache folder
(``$SBERT_CACHE``, else ``$XDG_CACHE_HOME/sbert``, else ``~/.cache/sbert``; one subfolder per model)
when the model is installed inside a Python environment (``site-packages``/``dist-packages``: a
package's files are not the place for a cache), its folder is read-only, or the encoder has no
folder. Each new export is logged (logger ``sbert.backends.onnx``, level WARNING) with its path. A cache entry is
``model-<precision>-<key>.onnx`` plus a ``.json`` that records its SHA-256: the key covers the
weights, the modules' settings, the precision and the library versions, so a changed model gets a new
export; a file whose hash does not match (a partial copy, a corrupt disk) is rebuilt. Writes are
atomic (write, then rename).

The backend knows nothing of ``Encoder``: it is handed an ``ExportSource`` (the model as a function of
features, an example batch, the settings the export depends on, the model's folder).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from sbert.atomic import atomic_file
from sbert.eval_mode import evaluating
from sbert.modules.base import Features
from sbert.versions import package_version

logger = logging.getLogger(__name__)

EXPORT_VERSION = 1  # bump when the export itself changes
PRECISIONS = ("fp32", "int8")
OPSET = 17
UNSAVED = "unsaved"  # shared cache subfolder of encoders without a folder (exports of several models)


@dataclass(frozen=True)
class ExportSource:
    """What an export needs from a model (``Encoder.export_source()`` makes one)."""

    module: nn.Module  # padded features -> features with "sentence_embedding": the whole model
    example: Features  # one collated batch: the graph's input names, in order, and the tracing example
    settings: dict[str, Any]  # what else the export depends on (module settings, maximum length): in the key
    folder: Path | None = None  # the model's folder (the export is cached beside it), None if unsaved


def _require_onnxruntime():
    try:
        import onnxruntime
    except ImportError as err:
        raise ImportError("backend='onnx' needs ONNX Runtime: pip install -e '.[onnx]'") from err
    return onnxruntime


class _SentenceGraph(nn.Module):
    """The model as a function of tensors: (input_ids, attention_mask[, token_type_ids]) -> embeddings."""

    def __init__(self, module: nn.Module, names: list[str]) -> None:
        super().__init__()
        self.module, self.names = module, names

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return self.module(dict(zip(self.names, tensors, strict=True)))["sentence_embedding"]


def model_key(source: ExportSource, precision: str) -> str:
    """A hash of everything the export depends on: weights, module settings, precision, versions."""
    digest = hashlib.sha256()
    settings = {
        **source.settings,
        "export": EXPORT_VERSION,
        "precision": precision,
        "versions": [package_version(p) for p in ("sbert", "torch", "transformers", "onnx", "onnxruntime")],
    }
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for name, tensor in source.module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:20]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_root() -> Path:
    """The user's cache folder for sbert: ``$SBERT_CACHE``, else ``$XDG_CACHE_HOME/sbert``, else ``~/.cache/sbert``."""
    if os.environ.get("SBERT_CACHE"):
        return Path(os.environ["SBERT_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "sbert"
    return Path.home() / ".cache" / "sbert"


def installed(folder: Path) -> bool:
    """Whether ``folder`` lies inside a Python environment's packages (site-packages or dist-packages)."""
    return any(part in ("site-packages", "dist-packages") for part in Path(folder).resolve().parts)


def _model_slug(folder: Path) -> str:
    """A per-model subfolder name in the shared cache: readable, and unique per absolute path."""
    resolved = Path(folder).resolve()
    readable = "-".join(p for p in resolved.parts[-2:] if p not in ("/", "\\"))
    return f"{readable}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:12]}"


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{uuid.uuid4().hex[:8]}"
        probe.touch()
        probe.unlink()
        return True
    except OSError:
        return False


def cache_folder(model_folder: Path | None, cache_dir: str | Path | None = None) -> Path:
    """Where exports go: ``cache_dir`` if given, else ``<model>/onnx`` for a writable model folder that is
    not an installed package's, else ``<cache_root()>/onnx/<model>-<hash>`` (``onnx/unsaved`` without a folder)."""
    if cache_dir is not None:
        return Path(cache_dir)
    if model_folder is None:
        return cache_root() / "onnx" / UNSAVED
    beside = Path(model_folder) / "onnx"
    if not installed(model_folder) and _writable(beside):
        return beside
    return cache_root() / "onnx" / _model_slug(model_folder)


def _valid(onnx_path: Path, meta_path: Path, key: str) -> bool:
    if not (onnx_path.is_file() and meta_path.is_file()):
        return False
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        return meta.get("key") == key and meta.get("sha256") == file_sha256(onnx_path)
    except (OSError, json.JSONDecodeError):
        return False


def _commit(tmp: Path, onnx_path: Path, meta_path: Path, key: str, precision: str) -> None:
    sha = file_sha256(tmp)
    os.replace(tmp, onnx_path)
    with atomic_file(meta_path, "w", encoding="utf-8") as handle:
        json.dump({"key": key, "precision": precision, "sha256": sha, "opset": OPSET}, handle, indent=1)


def _export_fp32(source: ExportSource, target: Path) -> None:
    names = list(source.example)
    example = tuple(source.example[n] for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"sentence_embedding": {0: "batch"}}
    graph = _SentenceGraph(source.module, names)
    device = next(source.module.parameters()).device
    try:
        source.module.to("cpu")
        with evaluating(graph), warnings.catch_warnings(), torch.no_grad():  # traced without dropout
            warnings.simplefilter("ignore")  # the tracer's notes on Python-level branches in transformers
            torch.onnx.export(
                graph,
                example,
                str(target),
                input_names=names,
                output_names=["sentence_embedding"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
    finally:
        source.module.to(device)


def _quantize_int8(source: Path, target: Path) -> None:
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_dynamic logs advice on pre-processing to the root logger
    try:
        # MatMul weights only, per channel, 7-bit range: the most accurate of the variants measured (all ops
        # or per tensor lost more on STSb), at the same speed (benchmarks/results/encode_throughput.md).
        quantize_dynamic(
            str(source),
            str(target),
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            op_types_to_quantize=["MatMul"],
        )
    finally:
        root.setLevel(level)


def export(source: ExportSource, precision: str = "fp32", cache_dir: str | Path | None = None) -> Path:
    """The cached ONNX file of ``source`` at ``precision`` (fp32 or int8), exporting it if needed."""
    if precision not in PRECISIONS:
        raise ValueError(f"ONNX precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    folder = cache_folder(source.folder, cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    key = model_key(source, precision)
    onnx_path = folder / f"model-{precision}-{key}.onnx"
    meta_path = onnx_path.with_suffix(".json")
    if _valid(onnx_path, meta_path, key):
        return onnx_path
    if onnx_path.exists():
        warnings.warn(f"{onnx_path}: cached export is stale or corrupt; rebuilding it", stacklevel=3)
    tmp = folder / f".{onnx_path.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        if precision == "fp32":
            _export_fp32(source, tmp)
        else:
            _quantize_int8(export(source, "fp32", folder), tmp)
        _commit(tmp, onnx_path, meta_path, key, precision)
    finally:
        tmp.unlink(missing_ok=True)
    logger.warning(
        "sbert: exported %s to ONNX (%s) once for backend='onnx'; cached at %s "
        "(set SBERT_CACHE or pass cache_dir to choose the folder)",
        source.folder or "the in-memory model",
        precision,
        onnx_path,
    )
    if folder != cache_root() / "onnx" / UNSAVED:  # a folder of this model's exports only
        for old in folder.glob(f"model-{precision}-*.onnx"):  # earlier exports of a changed model
            if old != onnx_path:
                old.unlink(missing_ok=True)
                old.with_suffix(".json").unlink(missing_ok=True)
    return onnx_path


class OnnxBackend:
    """Runs a model's ONNX export with ONNX Runtime on the CPU: padded features -> (B, dim) float32."""

    name = "onnx"

    def __init__(
        self,
        source: ExportSource,
        precision: str = "fp32",
        cache_dir: str | Path | None = None,
        threads: int | None = None,
    ) -> None:
        ort = _require_onnxruntime()
        self.precision = precision
        self.path = export(source, precision, cache_dir)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    def __call__(self, features: Features) -> np.ndarray:
        feeds = {name: features[name].cpu().numpy() for name in self.inputs}
        return self.session.run(None, feeds)[0]

    def sentences(self, features: Features, packed: bool = False) -> torch.Tensor:
        """Sentence vectors of a padded batch (the runner interface of ``sbert.pipeline``)."""
        if packed:
            raise ValueError("packing runs on the torch backend only; call use_backend('torch') or drop packing")
        return torch.from_numpy(self(features))
