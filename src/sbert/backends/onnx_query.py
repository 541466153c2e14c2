"""Queries embedded without torch or transformers: the light path of ``sbert search`` on an ONNX-built index.

Importing torch and transformers costs seconds; a search in an index costs milliseconds. So a folder index
built on the ONNX backend (``sbert index build --backend onnx``) records what embedding a query takes, and
``sbert search`` then runs only the Rust tokenizer (``tokenizers``) and ONNX Runtime:

- ``query-tokenizer.json``: the model's fast tokenizer, truncation at its ``max_seq_length`` included;
- ``query-encoder.json``: lower-casing, the query prompt, ``truncate_dim``, the pad id and padding side, the
  ONNX export's path, size, modification time and SHA-256 (from the export's own ``.json``), and the index's
  model, backend and creation time.

``QueryEncoder.of_index`` returns None wherever that record is missing or no longer matches (the export was
rebuilt or removed, the index was rebuilt on another backend or added to with mixed vectors): the caller
then loads the model as usual. The vectors equal ``Encoder.encode_query``'s on the ONNX backend (same
tokens, same graph; padding only changes the last float bits).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sbert.atomic import atomic_file
from sbert.prompts import prompted
from sbert.token_ids import encode_ids

if TYPE_CHECKING:
    from sbert.protocols import SearchEncoder

RECORD = "query-encoder.json"
TOKENIZER = "query-tokenizer.json"
VERSION = 1


def _export_facts(onnx_path: Path) -> dict[str, Any]:
    """What identifies an export file cheaply: path, size, mtime, and the SHA-256 its ``.json`` records."""
    st = onnx_path.stat()
    meta = json.loads(onnx_path.with_suffix(".json").read_text(encoding="utf-8"))
    return {"path": str(onnx_path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": meta["sha256"]}


def record(folder: str | Path, encoder: Any, manifest: dict) -> bool:
    """Write the light query encoder's files into the index ``folder`` if ``encoder`` is a transformer run on
    ONNX with a fast tokenizer that keeps its prompt (else remove stale ones); returns whether it was written."""
    folder = Path(folder)
    path = getattr(encoder, "onnx_path", None)
    transformer = getattr(encoder, "transformer", None) if path is not None and not encoder.is_static else None
    fast = getattr(transformer, "_fast", None)
    prompt = encoder.resolve_prompt(task="query") if fast is not None else None
    keeps_prompt = all(getattr(m, "include_prompt", True) for m in encoder) if fast is not None else False
    if fast is None or transformer is None or path is None or not keeps_prompt:
        for name in (RECORD, TOKENIZER):
            (folder / name).unlink(missing_ok=True)
        return False
    tokenizer = transformer.tokenizer
    with atomic_file(folder / TOKENIZER, "w", encoding="utf-8") as handle:
        handle.write(fast.to_str())
    spec = {
        "version": VERSION,
        "index": {key: manifest.get(key) for key in ("model", "backend", "created", "dim")},
        "onnx": _export_facts(Path(path)),
        "lower_case": bool(transformer.do_lower_case),
        "prompt": prompt,
        "truncate_dim": encoder.truncate_dim,
        "pad_id": int(tokenizer.pad_token_id or 0),
        "left_padding": getattr(tokenizer, "padding_side", "right") == "left",
    }
    with atomic_file(folder / RECORD, "w", encoding="utf-8") as handle:
        json.dump(spec, handle, indent=1)
    return True


class QueryEncoder:
    """``encode_query`` through ONNX Runtime and ``tokenizers`` only (what ``search_texts`` calls)."""

    def __init__(self, spec: dict, tokenizer_file: Path, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.spec = spec
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads or 0
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(spec["onnx"]["path"], options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.runtime: str = spec["index"]["backend"]

    @classmethod
    def of_index(cls, folder: str | Path, manifest: dict) -> QueryEncoder | None:
        """The light encoder recorded in the index ``folder``, or None where there is none or it is stale."""
        folder = Path(folder)
        try:
            spec = json.loads((folder / RECORD).read_text(encoding="utf-8"))
            recorded = {key: manifest.get(key) for key in ("model", "backend", "created", "dim")}
            if (
                spec.get("version") != VERSION
                or spec["index"] != recorded
                or not str(recorded["backend"]).startswith("onnx/")
            ):
                return None
            if _export_facts(Path(spec["onnx"]["path"])) != spec["onnx"]:
                return None
            if not (folder / TOKENIZER).is_file():
                return None
            return cls(spec, folder / TOKENIZER)
        except (OSError, ValueError, KeyError, TypeError, ImportError):
            return None

    def resolve_prompt(
        self, prompt_name: str | None = None, prompt: str | None = None, task: str | None = None
    ) -> str | None:
        """``prompt`` if given, else the recorded query prompt (None: none); ``ValueError`` for a ``prompt_name``
        or the "document" task, which only the model knows."""
        if prompt is not None:
            return prompt
        if prompt_name is not None or task == "document":
            raise ValueError("the light query encoder knows the recorded query prompt only")
        return self.spec["prompt"]

    def encode_query(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        prompt_name: str | None = None,
        prompt: str | None = None,
        on_truncation: str = "warn",
        show_progress: bool | None = None,
    ) -> np.ndarray:
        """(n, dim) float32 query vectors, as ``Encoder.encode_query`` on the ONNX backend computes them (no
        progress bar: ``show_progress`` is accepted and ignored).

        Raises ``ValueError`` for what the light path does not do (another prompt, empty texts, a query cut
        at the model's limit): the caller then takes the full path, which handles or explains it."""
        if prompt_name is not None or prompt is not None:
            raise ValueError("the light query encoder uses the recorded query prompt only")
        encodings = self._encodings(texts)
        if on_truncation != "ignore" and any(e.overflowing for e in encodings):
            raise ValueError("a query is longer than the model's limit")
        ids = [e.ids for e in encodings]
        out = [self._run(ids[start : start + batch_size]) for start in range(0, len(ids), batch_size)]
        vectors = np.vstack(out) if out else np.zeros((0, self.spec["index"]["dim"]), np.float32)
        width = self.spec["truncate_dim"] or vectors.shape[1]
        return np.ascontiguousarray(vectors[:, :width], dtype=np.float32)

    def accepts(self, texts: Sequence[str]) -> bool:
        """Whether ``encode_query`` embeds ``texts`` as the full path would without a word: no empty text, none
        cut at the model's limit (the full path warns about those, or refuses them)."""
        try:
            return not any(e.overflowing for e in self._encodings(texts))
        except (TypeError, ValueError):
            return False

    def _encodings(self, texts: Sequence[str]) -> list:
        texts = list(texts)
        if any(not isinstance(t, str) or not t.strip() for t in texts):
            raise ValueError("empty query: the full path explains what it refuses")
        if self.spec["lower_case"]:
            texts = [t.lower() for t in texts]
        return encode_ids(self.tokenizer, prompted(texts, self.spec["prompt"]), add_special_tokens=True)

    def _run(self, batch: list[list[int]]) -> np.ndarray:
        """One padded batch through the ONNX graph: (B, dim) sentence vectors."""
        width = max(len(ids) for ids in batch)
        input_ids = np.full((len(batch), width), self.spec["pad_id"], dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, ids in enumerate(batch):
            span = slice(width - len(ids), width) if self.spec["left_padding"] else slice(0, len(ids))
            input_ids[row, span] = ids
            mask[row, span] = 1
        features = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        return self.session.run(None, {name: features[name] for name in self.inputs})[0]


def light_query_encoder(index: Any) -> QueryEncoder | None:
    """The torch-free query encoder of a folder ``index`` built on the ONNX backend, or None (see the module)."""
    if os.environ.get("SBERT_NO_LIGHT_SEARCH"):
        return None
    return QueryEncoder.of_index(index.path, index.manifest)


if TYPE_CHECKING:  # mypy (.ci/run) checks that the light path keeps the contract search relies on

    def _keeps_the_contract(light: QueryEncoder) -> SearchEncoder:
        return light
