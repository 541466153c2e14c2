"""Planted files in a folder sbert writes into: a ``.lock`` that is a link (or a hard link, or a folder), links
among an index's files, hidden files in a shard folder. Nothing is written through them, and the refusal names
the file before any work."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sbert.errors import IndexFormatError, SbertError
from sbert.locks import hold_lock
from sbert.parallel import ShardFolder, ShardFolderError
from sbert.search.index.folder import VectorIndex

SETTINGS = {"model": "m", "backend": "torch", "precision": "fp32", "shard_size": 2, "dim": None}


def _sbert(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    script = shutil.which("sbert", path=str(Path(sys.executable).parent))
    command = [script] if script else [sys.executable, "-m", "sbert.cli"]
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture()
def planted(tmp_path: Path) -> Path:
    """``tmp_path`` with ``two.txt`` (a corpus), ``victim.txt`` (a file of the user's) and ``ix/.lock`` a link
    to the victim."""
    (tmp_path / "two.txt").write_text("a cat\na dog\n")
    (tmp_path / "victim.txt").write_text("precious\n")
    (tmp_path / "ix").mkdir()
    (tmp_path / "ix" / ".lock").symlink_to(tmp_path / "victim.txt")
    return tmp_path


def _refused(result: subprocess.CompletedProcess, folder: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"Error: {folder}/.lock: is a symbolic link")
    assert "Traceback" not in result.stderr


def test_index_build_refuses_a_planted_lock_link(planted: Path) -> None:
    result = _sbert("index", "build", "two.txt", "--out", "ix", cwd=planted)
    _refused(result, "ix")
    assert (planted / "victim.txt").read_text() == "precious\n"
    assert sorted(p.name for p in (planted / "ix").iterdir()) == [".lock"]  # nothing written


def test_index_add_refuses_a_planted_lock_link(planted: Path) -> None:
    (planted / "ix" / ".lock").unlink()
    VectorIndex.build(planted / "ix", np.eye(2, 384, dtype=np.float32), model="default", ids=["a", "b"])
    (planted / "ix" / ".lock").unlink()
    (planted / "ix" / ".lock").symlink_to(planted / "victim.txt")
    result = _sbert("index", "add", "ix", "two.txt", cwd=planted)
    _refused(result, "ix")
    assert (planted / "victim.txt").read_text() == "precious\n"
    with pytest.raises(IndexFormatError, match=r"\.lock: is a symbolic link"):
        VectorIndex.open(planted / "ix")


def test_encode_to_shards_refuses_a_planted_lock_link(planted: Path) -> None:
    result = _sbert("encode", "two.txt", "--out", "ix", "--processes", "2", cwd=planted)
    _refused(result, "ix")
    assert (planted / "victim.txt").read_text() == "precious\n"


def test_a_dangling_lock_link_creates_nothing_where_it_points(tmp_path: Path) -> None:
    (tmp_path / "ix").mkdir()
    (tmp_path / "ix" / ".lock").symlink_to(tmp_path / "created.txt")
    with pytest.raises(IndexFormatError, match=r"\.lock: is a symbolic link"):
        VectorIndex.build(tmp_path / "ix", np.eye(2, 4, dtype=np.float32), model="m")
    with pytest.raises(ShardFolderError, match=r"\.lock: is a symbolic link"):
        ShardFolder.open(tmp_path / "ix", SETTINGS, resume=False)
    assert not (tmp_path / "created.txt").exists()


def test_a_hard_linked_or_odd_lock_file_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "ix").mkdir()
    os.link(victim, tmp_path / "ix" / ".lock")
    with pytest.raises(IndexFormatError, match=r"\.lock: is a hard link"):
        VectorIndex.build(tmp_path / "ix", np.eye(2, 4, dtype=np.float32), model="m")
    assert victim.read_text() == "precious\n"
    (tmp_path / "sh").mkdir()
    (tmp_path / "sh" / ".lock").mkdir()
    with pytest.raises(ShardFolderError, match=r"\.lock: is not a plain file"):
        ShardFolder.open(tmp_path / "sh", SETTINGS, resume=False)
    with pytest.raises(SbertError, match="is not a plain file"), hold_lock(tmp_path / "sh" / ".lock", 0, RuntimeError):
        pass


def test_a_plain_lock_left_by_a_killed_writer_is_still_taken(tmp_path: Path) -> None:
    (tmp_path / "ix").mkdir()
    (tmp_path / "ix" / ".lock").write_text("12345\n")
    VectorIndex.build(tmp_path / "ix", np.eye(2, 4, dtype=np.float32), model="m")
    assert (tmp_path / "ix" / ".lock").read_text() == f"{os.getpid()}\n"


def test_links_among_an_index_files_are_refused_naming_the_file(tmp_path: Path) -> None:
    index = tmp_path / "ix"
    VectorIndex.build(index, np.eye(2, 4, dtype=np.float32), model="m", ids=["a", "b"])
    for name in ("manifest.json", next(p.name for p in index.glob("seg-*.npy"))):
        moved = tmp_path / name
        (index / name).rename(moved)
        (index / name).symlink_to(moved)
        with pytest.raises(IndexFormatError, match=rf"{name}: is a symbolic link"):
            VectorIndex.open(index)
        (index / name).unlink()
        moved.rename(index / name)
    assert len(VectorIndex.open(index)) == 2


def test_hidden_files_count_when_a_shard_folder_is_checked_for_being_empty(tmp_path: Path) -> None:
    folder = tmp_path / "sh"
    folder.mkdir()
    (folder / ".notes").write_text("mine\n")
    with pytest.raises(ShardFolderError, match=r"holds other files \(\.notes\)"):
        ShardFolder.open(folder, SETTINGS, resume=False)
    assert (folder / ".notes").read_text() == "mine\n"
    assert sorted(p.name for p in folder.iterdir()) == [".notes"]
