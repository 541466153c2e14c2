"""Atomic writes: nothing of the user's is deleted, and a kill at any step leaves the old or the new version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sbert
from sbert import atomic
from sbert.atomic import FolderNotReplaceableError, atomic_dir, atomic_file, collect_leftovers, recover

MODEL_FILES = {"modules.json": "[]", "config.json": '{"model_type": "bert"}', "model.safetensors": "OLD"}


def _write_model(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)


def _tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def _siblings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name != folder.name)


def test_a_folder_of_other_files_is_refused_and_kept(tmp_path):
    docs = tmp_path / "mydocs"
    docs.mkdir()
    (docs / "thesis.txt").write_text("four years of work")
    with pytest.raises(FolderNotReplaceableError, match=r"mydocs.*thesis\.txt.*no model"), atomic_dir(docs) as tmp:
        (tmp / "modules.json").write_text("[]")
    assert _tree(docs) == {"thesis.txt": "four years of work"}
    assert _siblings(docs) == []  # no temporary folder left behind


def test_a_user_config_json_does_not_make_a_folder_a_model(tmp_path):
    project = tmp_path / "project"
    _write_model(project, {"config.json": '{"port": 80}', "main.py": "print()"})
    with pytest.raises(FolderNotReplaceableError), atomic_dir(project):
        pass
    assert _tree(project) == {"config.json": '{"port": 80}', "main.py": "print()"}


def test_saving_a_model_into_the_current_project_folder_is_refused(tmp_path, tiny_encoder, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FolderNotReplaceableError, match=r"pyproject\.toml"):
        tiny_encoder.save(".")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]


def test_an_empty_folder_or_a_new_path_is_fine(tmp_path):
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "empty", tmp_path / "new" / "deeper"):
        with atomic_dir(target) as tmp:
            (tmp / "modules.json").write_text("[]")
        assert _tree(target) == {"modules.json": "[]"}


def test_replacing_a_model_keeps_the_users_files_and_drops_the_old_models(tmp_path):
    target = tmp_path / "model"
    old = {
        **MODEL_FILES,
        "modules.json": json.dumps([{"path": ""}, {"path": "1_Pooling"}, {"path": "2_Dense"}]),
        "1_Pooling/config.json": "{}",
        "2_Dense/model.safetensors": "OLD DENSE",
        "2_Dense/config.json": "{}",
        "onnx/model-fp32-abc.onnx": "STALE EXPORT",
        "notes.txt": "mine",
        "2_Dense/why.md": "also mine",
        "eval/results.csv": "1,2",
    }
    _write_model(target, old)
    with atomic_dir(target) as tmp:
        _write_model(tmp, {"modules.json": "[]", "model.safetensors": "NEW", "1_Pooling/config.json": "{}"})
    assert _tree(target) == {
        "modules.json": "[]",
        "model.safetensors": "NEW",
        "1_Pooling/config.json": "{}",
        "notes.txt": "mine",
        "2_Dense/why.md": "also mine",
        "eval/results.csv": "1,2",
    }
    assert _siblings(target) == []


def test_new_weights_drop_the_old_adapt_record_which_described_the_old_ones(tmp_path):
    """adapt.json says which documents trained the weights (``--auto`` draws past them): a model trained
    again into the folder must not inherit it, or --auto would skip documents the new model never left out."""
    target = tmp_path / "model"
    _write_model(target, {**MODEL_FILES, "adapt.json": '{"held_out": ["d1"]}', "notes.txt": "mine"})
    with atomic_dir(target) as tmp:
        _write_model(tmp, {"modules.json": "[]", "model.safetensors": "NEW"})
    assert _tree(target) == {"modules.json": "[]", "model.safetensors": "NEW", "notes.txt": "mine"}


def test_a_failed_write_leaves_the_old_version(tmp_path):
    target = tmp_path / "model"
    _write_model(target, MODEL_FILES)
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "modules.json").write_text("half")
        raise RuntimeError("disk full")
    assert _tree(target) == MODEL_FILES and _siblings(target) == []


_KILLER = """
import os, signal, sys
from pathlib import Path
from sbert import atomic

target, step, exchange = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
def _after(name):
    if name == step:
        os.kill(os.getpid(), signal.SIGKILL)
atomic._after = _after
if not exchange:
    atomic._exchange = lambda a, b: False
with atomic.atomic_dir(target) as tmp:
    (tmp / "modules.json").write_text("[]")
    (tmp / "model.safetensors").write_text("NEW")
"""


@pytest.mark.parametrize(
    ("exchange", "step"),
    [(True, "built"), (True, "swapped"), (True, "removed"), (False, "built"), (False, "hidden"), (False, "renamed")],
)
def test_a_kill_at_each_step_of_a_replace_leaves_the_old_or_the_new_model(tmp_path, exchange, step):
    target = tmp_path / "model"
    _write_model(target, {**MODEL_FILES, "notes.txt": "mine"})
    run = subprocess.run([sys.executable, "-c", _KILLER, str(target), step, "1" if exchange else "0"], check=False)
    assert run.returncode == -9, "the writer should have been killed at this step"
    recover(target)  # what every loader does first (only needed after "hidden", a no-op otherwise)
    found = _tree(target)
    new = {"modules.json": "[]", "model.safetensors": "NEW", "notes.txt": "mine"}
    assert found in ({**MODEL_FILES, "notes.txt": "mine"}, new)
    assert found == (new if step in ("swapped", "removed", "renamed") else {**MODEL_FILES, "notes.txt": "mine"})
    with atomic_dir(target) as tmp:  # the next write collects the dead writer's leftovers
        (tmp / "modules.json").write_text("[]")
    assert _siblings(target) == []


def test_a_model_hidden_by_a_killed_replace_loads(tmp_path, tiny_encoder):
    target = tiny_encoder.save(tmp_path / "model")
    hidden = tmp_path / ".model.old-999999999-0123abcd"  # a pid that cannot be running
    os.rename(target, hidden)
    again = sbert.load(target, device="cpu")
    np.testing.assert_allclose(again.encode(["a test"]), tiny_encoder.encode(["a test"]), atol=1e-6)
    assert not hidden.exists()


def test_leftovers_of_running_writers_are_kept_and_of_dead_ones_collected(tmp_path):
    target = tmp_path / "checkpoint.pt"
    mine = tmp_path / f".checkpoint.pt.tmp-{os.getpid()}-0123abcd"
    dead = tmp_path / ".checkpoint.pt.tmp-999999999-0123abcd"
    old_untagged = tmp_path / ".checkpoint.pt.tmp-89abcdef"
    fresh_untagged = tmp_path / ".checkpoint.pt.tmp-fedcba98"
    other = tmp_path / ".other.pt.tmp-999999999-0123abcd"
    for path in (mine, dead, old_untagged, fresh_untagged, other):
        path.write_bytes(b"x" * 10)
    hour_ago = os.path.getmtime(old_untagged) - atomic.UNTAGGED_AFTER_S - 60
    os.utime(old_untagged, (hour_ago, hour_ago))
    assert sorted(collect_leftovers(target)) == sorted([dead, old_untagged])
    assert mine.exists() and fresh_untagged.exists() and other.exists()
    with atomic_file(target) as handle:
        handle.write(b"state")
    assert target.read_bytes() == b"state"


def test_recover_leaves_a_running_writers_folder_alone(tmp_path):
    hidden = tmp_path / f".model.old-{os.getpid()}-0123abcd"
    hidden.mkdir()
    assert recover(tmp_path / "model") is False and hidden.exists()


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_a_saved_model_follows_the_umask(tmp_path, tiny_encoder, mask):
    """Every file of a saved model (model.safetensors too, which transformers writes 0600) gets the umask mode."""
    old = os.umask(mask)
    try:
        tiny_encoder.save(tmp_path / "m")
    finally:
        os.umask(old)
    files = [p for p in (tmp_path / "m").rglob("*") if p.is_file()]
    assert any(p.name == "model.safetensors" for p in files)
    assert {p.relative_to(tmp_path).as_posix(): oct(p.stat().st_mode & 0o777) for p in files} == {
        p.relative_to(tmp_path).as_posix(): oct(0o666 & ~mask) for p in files
    }
    folders = [tmp_path / "m", *(p for p in (tmp_path / "m").rglob("*") if p.is_dir())]
    assert {oct(p.stat().st_mode & 0o777) for p in folders} == {oct(0o777 & ~mask)}


def test_atomic_dir_gives_private_files_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_dir(tmp_path / "m") as tmp:
            fd = os.open(tmp / "model.safetensors", os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
    finally:
        os.umask(old)
    assert (tmp_path / "m" / "model.safetensors").stat().st_mode & 0o777 == 0o644
