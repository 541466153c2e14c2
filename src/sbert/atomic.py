"""Atomic writes: build a file or folder under a temporary name beside the target, then rename it.

A reader always finds the old or the new version, never a mix or nothing:

- ``atomic_file`` writes ``.NAME.tmp-<pid>-<tag>``, syncs it, then renames it onto ``NAME``.
- ``atomic_dir`` builds ``.NAME.tmp-<pid>-<tag>/``. A new target is one rename. An existing target is
  swapped in one step with ``renameat2(RENAME_EXCHANGE)`` (Linux); the old version then lies at the
  temporary name until it is removed. Where the exchange is not available it takes two renames
  (target -> ``.NAME.old-<pid>-<tag>``, temporary -> target), and ``recover`` puts the old version
  back if a process died between them; loaders call it.

``atomic_dir`` never deletes files a model did not write: it refuses a non-empty folder that holds no
model (or index), and when it replaces a model folder, files there that are not model files (notes,
a README, anything unknown) are carried into the new version, and symbolic links (to files or folders)
as links, never followed. Leftovers of killed writers (temporary files and folders tagged with a process
that no longer runs) are collected on the next write.

Nor does it put a broken model in place of a good one: a new version whose ``.safetensors`` weights hold
NaN or infinity (a training that diverged) is refused before the swap, and the old version stays.
Commands that write a new model (train, adapt, distill, rotate) refuse a folder that already holds one
unless asked to replace it (``check_model_target``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from sbert.errors import SbertError

# Files a model folder is made of (at its top level or in a module's subfolder). Replacing a model
# drops these from the old version; every other file is kept.
_MODEL_FILE = re.compile(
    r"^(modules\.json|config(_sentence_transformers)?\.json|sentence_bert_config\.json|generation_config\.json"
    r"|(model|pytorch_model|tf_model|flax_model)(-\d+-of-\d+)?\.(safetensors|bin|h5|msgpack)(\.index\.json)?"
    r"|tokenizer(_config)?\.json|special_tokens_map\.json|added_tokens\.json|vocab\.(txt|json)|merges\.txt"
    r"|(sentencepiece\.bpe|spiece|tokenizer)\.model|chat_template\.(json|jinja)"
    r"|adapt\.json)$"  # adapt.json: what trained these weights (``sbert.search.auto``), stale once they change
)
_MODEL_DIRS = {"onnx"}  # sbert's ONNX export cache: keyed by the old weights, stale once they change
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?:(?P<pid>\d+)-)?[0-9a-f]{8}$")
UNTAGGED_AFTER_S = 3600  # leftovers of older sbert versions carry no pid: collected once this old
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class FolderNotReplaceableError(SbertError, FileExistsError):
    """The target folder exists, is not empty and holds no model or index: sbert will not replace it."""


class ModelExistsError(SbertError, FileExistsError):
    """A model is already in the folder a command would write a new one to (replaced only when asked)."""


class NonFiniteWeightsError(SbertError, ValueError):
    """A model whose weights hold NaN or infinity: ``atomic_dir`` does not put it in place."""


def _after(step: str) -> None:
    """A no-op between the steps of a write; tests replace it to kill the process at each step."""


def _scratch(target: Path, kind: str) -> Path:
    return target.parent / f".{target.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def collect_leftovers(target: str | os.PathLike[str]) -> list[Path]:
    """Remove ``.NAME.tmp-*`` / ``.NAME.old-*`` beside ``target`` left by processes that no longer run.

    Returns what was removed. Entries of running processes are left alone; untagged ones (from older
    versions) only once they are an hour old. Call ``recover`` first where a model may be missing.
    """
    target = Path(target).absolute()
    removed: list[Path] = []
    if not target.parent.is_dir():
        return removed
    for entry in target.parent.iterdir():
        match = _LEFTOVER.match(entry.name)
        if not match or match["name"] != target.name:
            continue
        pid = match["pid"]
        if pid is not None and _alive(int(pid)):
            continue
        if pid is None:
            with contextlib.suppress(OSError):
                if time.time() - entry.lstat().st_mtime < UNTAGGED_AFTER_S:
                    continue
        _remove(entry)
        removed.append(entry)
    return removed


def recover(target: str | os.PathLike[str]) -> bool:
    """Put back a folder that a killed two-rename replace left hidden as ``.NAME.old-*``; True if it did.

    Only acts when ``target`` is missing and the process that hid it no longer runs.
    """
    target = Path(target).absolute()
    if target.exists() or not target.parent.is_dir():
        return False
    hidden = []
    for entry in target.parent.iterdir():
        match = _LEFTOVER.match(entry.name)
        if not (match and match["name"] == target.name and match["kind"] == "old" and entry.is_dir()):
            continue
        if match["pid"] is None or not _alive(int(match["pid"])):
            hidden.append(entry)
    if not hidden:
        return False
    newest = max(hidden, key=lambda p: p.stat().st_mtime)
    try:
        os.rename(newest, target)
    except OSError:  # another process recovered it first, or the target came back
        return target.exists()
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2); False where the platform or file system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, f"cannot swap {b} with its new version: {os.strerror(code)}", str(b))


def _json_keys(path: Path) -> set[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return set(data) if isinstance(data, dict) else set()


def holds_model(folder: Path) -> bool:
    """True for a model folder (sentence-transformers or Hugging Face) or an sbert vector index."""
    if (folder / "modules.json").is_file() or (folder / "sentence_bert_config.json").is_file():
        return True
    if _json_keys(folder / "config.json") & {"model_type", "architectures"}:
        return True
    return "segments" in _json_keys(folder / "manifest.json")


def _is_replaceable(folder: Path) -> bool:
    return not any(folder.iterdir()) or holds_model(folder)


def _module_folders(folder: Path) -> set[str]:
    """Subfolders that the old model's modules.json names (their model files are the model's own)."""
    try:
        entries = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        return {str(e["path"]).strip("/") for e in entries if isinstance(e, dict) and e.get("path")}
    except (OSError, ValueError, TypeError, KeyError):
        return set()


def _carry_over(old: Path, new: Path) -> list[str]:
    """Copy (hard-link where possible) into ``new`` the files of ``old`` that are not model files and
    that ``new`` does not have, and its symbolic links (to files or folders) as links, never followed;
    returns their relative paths."""
    modules = _module_folders(old) | {""}
    kept = []
    for root, dirs, files in os.walk(old):  # links to folders are listed in ``dirs`` and not entered
        rel_root = Path(root).relative_to(old)
        if rel_root == Path("."):
            dirs[:] = [d for d in dirs if d not in _MODEL_DIRS and not _LEFTOVER.match(d)]
        linked = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        dirs[:] = [d for d in dirs if d not in linked]
        for name in linked:
            rel = rel_root / name
            if not ((new / rel).exists() or (new / rel).is_symlink()):
                (new / rel).parent.mkdir(parents=True, exist_ok=True)
                os.symlink(os.readlink(old / rel), new / rel)
                kept.append(rel.as_posix())
        for name in files:
            rel = rel_root / name
            parent = "" if rel_root == Path(".") else rel_root.as_posix()
            if parent in modules and _MODEL_FILE.match(name):
                continue
            if (new / rel).exists() or (new / rel).is_symlink():
                continue
            (new / rel).parent.mkdir(parents=True, exist_ok=True)
            source = old / rel
            if source.is_symlink():
                os.symlink(os.readlink(source), new / rel)
            else:
                try:
                    os.link(source, new / rel)
                except OSError:
                    shutil.copy2(source, new / rel)
            kept.append(rel.as_posix())
    return kept


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``target``; on success it replaces ``target`` atomically.

    ``target`` may be missing, an empty folder, or a model/index folder (see ``holds_model``); any other
    existing folder is refused with ``FolderNotReplaceableError`` before anything is written. Files
    of the old folder that are not model files, and its symbolic links, are kept in the new one. New
    weights that are not finite are refused (``check_finite_weights``). On error the temporary folder
    is removed and ``target`` is left as it was.
    """
    target = Path(target).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    recover(target)
    collect_leftovers(target)
    check_replaceable(target)
    tmp = _scratch(target, "tmp")
    tmp.mkdir()
    try:
        yield tmp
        check_finite_weights(tmp, target)
        follow_umask(tmp)
        check_replaceable(target)  # again: the folder may have changed while the new version was written
        _commit(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def current_umask() -> int:
    """This process's umask (read from /proc where it can be, else set and put back at once)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(folder: Path) -> None:
    """Give every file and folder under ``folder`` the mode a plain ``open``/``mkdir`` would (the umask's).

    Some writers (transformers' ``save_pretrained``, safetensors) create files with mode 0600; a model
    folder must be readable by whoever the user's umask lets read the rest of their files.
    """
    mask = current_umask()
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o777 & ~mask, follow_symlinks=False)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o666 & ~mask)


def check_finite_weights(folder: Path, target: str | os.PathLike[str] | None = None) -> None:
    """Raise ``NonFiniteWeightsError`` if a ``.safetensors`` file under ``folder`` (the new version of
    ``target``) holds NaN or infinite weights: one pass over them, a fraction of a second for MiniLM."""
    files = sorted(p for p in folder.rglob("*.safetensors") if p.is_file() and not p.is_symlink())
    if not files:
        return
    import numpy as np
    import torch
    from safetensors import safe_open

    plain = (torch.float16, torch.float32, torch.float64)  # numpy reads these as they are (bf16 and fp8 not)
    bad = total = 0
    first = ""
    for file in files:
        try:
            handle = safe_open(str(file), framework="pt")
        except Exception:  # not safetensors after all: what it holds is the loader's to judge
            continue
        with handle as weights:
            for name in weights.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
                tensor = weights.get_tensor(name)
                if not tensor.is_floating_point():
                    continue
                total += tensor.numel()
                values = (tensor if tensor.dtype in plain else tensor.float()).numpy()
                finite = np.isfinite(values)  # numpy's: torch.isfinite took 1.6 s over MiniLM on 2 cores
                if not finite.all():
                    bad += int(finite.size - np.count_nonzero(finite))
                    first = first or f"{file.relative_to(folder).as_posix()}: {name!r}"
    if bad:
        where = Path(target) if target is not None else folder
        kept = "the model there is kept" if where.exists() else "nothing was written"
        raise NonFiniteWeightsError(
            f"{where}: refusing to save a model whose weights hold {bad:,} NaN or infinite values (of {total:,}; "
            f"the first in {first}): it would give NaN vectors (did its training diverge? lower the learning "
            f"rate); {kept}"
        )


def check_model_target(
    target: str | os.PathLike[str], overwrite: bool = False, *, reason: str = "", then: str = "to replace it"
) -> None:
    """Raise unless a new model may be written to ``target`` (call it before any work): ``ModelExistsError``
    where a model is already there and not ``overwrite`` (the message: ``reason`` after "a model is already
    there", ``then`` after the advice to overwrite), ``FolderNotReplaceableError`` for a folder of other files."""
    check_replaceable(target)
    path = Path(target)
    if not overwrite and path.is_dir() and holds_model(path):
        raise ModelExistsError(f"{path}: a model is already there{reason}; pass overwrite=True (--overwrite) {then}")


def check_replaceable(target: str | os.PathLike[str]) -> None:
    """Raise ``FolderNotReplaceableError`` unless ``atomic_dir(target)`` may write there (call it before long work)."""
    target = Path(target).absolute()
    if not (target.exists() or target.is_symlink()):
        return
    if not target.is_dir() or target.is_symlink():
        raise FolderNotReplaceableError(f"{target} exists and is not a folder; refusing to replace it")
    if not _is_replaceable(target):
        sample = sorted(p.name for p in target.iterdir())[:3]
        raise FolderNotReplaceableError(
            f"{target} is a folder that holds other files ({', '.join(sample)}{', ...' if len(sample) == 3 else ''}) "
            "and no model; refusing to write a model there, which would replace them: choose a new or empty folder"
        )


def _commit(tmp: Path, target: Path) -> None:
    if not target.exists():
        _after("built")
        os.rename(tmp, target)
        _after("renamed")
        return
    if not any(target.iterdir()):
        _after("built")
        os.replace(tmp, target)  # onto an empty folder: one rename
        _after("renamed")
        return
    _carry_over(target, tmp)
    _after("built")
    if _exchange(tmp, target):  # tmp now holds the old version
        _after("swapped")
        shutil.rmtree(tmp, ignore_errors=True)
        _after("removed")
        return
    old = _scratch(target, "old")
    os.rename(target, old)
    _after("hidden")
    os.rename(tmp, target)
    _after("renamed")
    shutil.rmtree(old, ignore_errors=True)
    _after("removed")


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike[str], mode: str = "wb", **open_kwargs) -> Iterator[IO]:
    """Open a temporary file beside ``target`` for writing; on success rename it onto ``target``.

    Leftover temporary files of killed writers of the same target are collected first.
    """
    target = Path(target).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    collect_leftovers(target)
    tmp = _scratch(target, "tmp")
    try:
        with open(tmp, mode, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        _after("built")
        os.replace(tmp, target)
        _after("renamed")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
