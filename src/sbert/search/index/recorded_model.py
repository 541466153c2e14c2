"""What an index records about the model that made its vectors, and the checks on it: one home for the
folder index (``VectorIndex``) and the database one (``PgVectorIndex``)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from sbert.errors import IndexMismatchError

MIXED = "mixed"  # the backend of an index whose rows were made by different backends or precisions


def precision(backend: str) -> str:
    """``fp32`` of ``torch/fp32``: the part of a backend name that decides whether vectors are comparable."""
    return backend.rpartition("/")[2]


def check_backend(path: str | Path, manifest: dict, backend: str | None, allow_mixed: bool) -> None:
    """Raise IndexMismatchError if vectors made by ``backend`` are of another precision than the index's."""
    recorded = manifest.get("backend")
    if not recorded or not backend or recorded == MIXED or allow_mixed:
        return
    if precision(recorded) != precision(backend):
        raise IndexMismatchError(
            f"index {path} holds vectors made with {recorded}; these are made with {backend}: vectors of another "
            f"precision are not comparable enough to mix. Embed with the index's backend and precision "
            f"(--backend/--precision), or pass allow_mixed_backend=True to use them anyway"
        )


class RecordedModel:
    """The model an index was built with, read from its ``manifest`` (model, model_path, backend, dim,
    metric); the index class gives ``manifest`` and ``path`` (how messages name it)."""

    path: str | Path

    @property
    def manifest(self) -> dict:
        raise NotImplementedError

    @property
    def model(self) -> str:
        return self.manifest["model"]

    @property
    def backend(self) -> str | None:
        """How the vectors were made (``torch/fp32``, ``onnx/int8``, ``mixed``), or None where not recorded."""
        return self.manifest.get("backend")

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    @property
    def metric(self) -> str:
        return self.manifest["metric"]

    def check_model(self, name_or_path: str | Path, dim: int | None = None) -> None:
        """Raise IndexMismatchError unless ``name_or_path`` (and ``dim``) is the model the index was built with."""
        from sbert.model_names import canonical_name, resolve

        same = canonical_name(name_or_path) == self.model
        if not same and self.manifest.get("model_path"):
            with contextlib.suppress(Exception):
                same = str(resolve(name_or_path).resolve()) == self.manifest["model_path"]
        if not same:
            raise IndexMismatchError(
                f"index {self.path} was built with model {self.model!r} (dim {self.dim}); "
                f"refusing to use it with {str(name_or_path)!r}: embeddings of different models are not comparable"
            )
        if dim is not None and dim != self.dim:
            raise IndexMismatchError(f"index {self.path} holds {self.dim}-dim vectors; the model gives {dim}")

    @property
    def truncate_dim(self) -> int | None:
        """The ``truncate_dim`` the vectors were cut to (None: not cut, or an index of an older sbert)."""
        return self.manifest.get("truncate_dim")

    def fit_truncate_dim(self, encoder) -> None:
        """Give ``encoder`` the index's ``truncate_dim`` where it has none; raise IndexMismatchError where it has
        another. Indexes of older sbert versions record none: nothing is checked (their ``dim`` still is)."""
        if "truncate_dim" not in self.manifest:
            return
        recorded = self.manifest["truncate_dim"]
        if encoder.truncate_dim is None and recorded is not None:
            encoder.truncate_dim = recorded
        elif encoder.truncate_dim != recorded:
            raise IndexMismatchError(
                f"index {self.path} holds vectors cut to truncate_dim {recorded}; the model cuts them to "
                f"{encoder.truncate_dim}: vectors cut to another width are not comparable"
            )

    def check_backend(self, backend: str | None, allow_mixed: bool = False) -> None:
        """Raise IndexMismatchError if vectors made by ``backend`` (``torch/fp32``, ``onnx/int8``, ...; see
        ``backend_name``) are not comparable with the index's own. Only the precision counts (fp32 vectors
        agree across backends to ~1e-6; bf16 and int8 ones do not). Nothing is checked where either side
        is unknown (None; indexes of older sbert versions) or the index is already mixed."""
        check_backend(self.path, self.manifest, backend, allow_mixed)
