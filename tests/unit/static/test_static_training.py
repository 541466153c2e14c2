"""Training a static model (``sbert train --model STATIC``): on a teacher's own sentence vectors over plain
texts (``embedding-mse``, the teacher's vectors projected by PCA to the student's width, as tokenlearn does),
and with in-batch negatives on pairs; the folder written loads equal in sbert, model2vec and
sentence-transformers."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import sbert
from sbert.data.examples import Text
from sbert.losses.distillation import EmbeddingMSELoss
from sbert.losses.teachers import Teacher
from sbert.static.distill import distill, fit_pca, save_distilled

SUBJECTS = ["the cat", "a dog", "my printer", "the spreadsheet", "a parrot", "the server", "his guitar", "our table"]
VERBS = ["crashes when", "sleeps after", "prints nothing if", "sings while", "freezes because"]
OBJECTS = ["the cache is cold", "it rains", "nobody is home", "the macro runs", "a file is saved"]
TEXTS = [f"{s} {v} {o}" for s in SUBJECTS for v in VERBS for o in OBJECTS][::3]  # 67 texts


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny 16-wide transformer (the teacher) and a static model distilled from it at 8 dimensions."""
    from conftest import make_tiny_encoder

    root = tmp_path_factory.mktemp("static-training")
    teacher = make_tiny_encoder(dropout=0.0).eval()
    teacher.save(root / "teacher")
    save_distilled(distill(teacher, dim=8, show_progress=False), root / "static")
    (root / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return root


def _loss_over_all(model, folders) -> float:
    loss = EmbeddingMSELoss(Teacher(folders / "teacher"))
    loss.prepare([Text(t) for t in TEXTS], model)
    with torch.no_grad():
        return float(loss(model, [Text(t) for t in TEXTS]))


def test_prepared_targets_are_the_teacher_s_vectors_projected_by_a_pca_fitted_on_the_texts(folders):
    teacher = Teacher(folders / "teacher")
    loss = EmbeddingMSELoss(teacher)
    loss.prepare([Text(t) for t in TEXTS] + [Text(TEXTS[0])], 8)  # a repeated text is embedded once
    vectors = teacher.model.encode(TEXTS)
    expected = fit_pca(vectors, 8).apply(vectors)
    got = loss.targets(TEXTS[::-1], torch.device("cpu")).numpy()
    np.testing.assert_allclose(got, expected[::-1], atol=1e-5)
    assert loss.projection is not None and loss.projection.dim == 8
    with pytest.raises(ValueError, match="was not among the texts the loss was prepared with"):
        loss.targets(["an unseen text"], torch.device("cpu"))
    with pytest.raises(ValueError, match="narrower than the student's 32"):
        EmbeddingMSELoss(teacher).prepare(TEXTS, 32)


def test_given_the_student_the_projected_targets_are_turned_towards_its_own_vectors(folders):
    student = sbert.load(folders / "static", device="cpu")
    plain, turned = EmbeddingMSELoss(Teacher(folders / "teacher")), EmbeddingMSELoss(Teacher(folders / "teacher"))
    plain.prepare(TEXTS, 8)
    turned.prepare(TEXTS, student)
    a, b = (loss.targets(TEXTS, torch.device("cpu")).numpy() for loss in (plain, turned))
    np.testing.assert_allclose(a @ a.T, b @ b.T, rtol=1e-4, atol=1e-4)  # the same geometry: a rotation
    with torch.no_grad():
        assert float(turned(student, TEXTS)) < float(plain(student, TEXTS)) - 0.05  # training starts nearer


def test_an_unprepared_loss_refuses_a_narrower_student_saying_what_to_do(folders):
    student = sbert.load(folders / "static", device="cpu")
    with pytest.raises(ValueError, match=r"16 wide and the student's 8.*prepare\(texts, model\)"):
        EmbeddingMSELoss(Teacher(folders / "teacher"))(student, [Text(t) for t in TEXTS[:4]])


@pytest.mark.slow
def test_sbert_train_teaches_a_static_model_the_teacher_s_vectors_and_saves_a_model2vec_folder(folders, tmp_path):
    model2vec = pytest.importorskip("model2vec")
    from sentence_transformers import SentenceTransformer

    from sbert.cli import main

    out = tmp_path / "trained"
    args = ["train", "--objective", "embedding-mse", "--format", "texts", "--train", str(folders / "texts.txt")]
    args += ["--teacher", str(folders / "teacher"), "--model", str(folders / "static"), "--out", str(out)]
    args += ["--batch-size", "8", "--epochs", "3", "--max-steps", "20", "--lr", "0.02", "--no-progress"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    log = [json.loads(x) for x in (tmp_path / "trained.train" / "log.jsonl").read_text().splitlines()]
    assert len([r for r in log if "loss" in r]) == 20

    before, after = sbert.load(folders / "static", device="cpu"), sbert.load(out, device="cpu")
    assert after.is_static and after.dim == 8
    assert _loss_over_all(after, folders) < 0.8 * _loss_over_all(before, folders)

    probe = ["the cat crashes when it rains", "a parrot sings", "🦜 unknown tokens are dropped"]
    ours = after.encode(probe)
    assert np.abs(ours - before.encode(probe)).max() > 1e-3  # the table moved
    theirs = model2vec.StaticModel.from_pretrained(out).encode(probe)
    assert np.abs(theirs - ours).max() <= 1e-6
    st = SentenceTransformer(str(out), device="cpu").encode(probe[:2])  # no unknown tokens in these two
    assert np.abs(st - ours[:2]).max() <= 1e-6


@pytest.mark.slow
def test_mnrl_on_pairs_trains_a_static_model(folders, tmp_path):
    from sbert.cli import main

    pairs = "\n".join(
        f"main-captions\tMSRvid\t2012test\t{i:04d}\t{i % 6}.0\t{TEXTS[i]}\t{TEXTS[i + 1]}" for i in range(24)
    )
    (tmp_path / "sts.csv").write_text(pairs + "\n", encoding="utf-8")
    out = tmp_path / "mnrl"
    args = ["train", "--objective", "mnrl", "--format", "stsb", "--train", str(tmp_path / "sts.csv")]
    args += ["--model", str(folders / "static"), "--out", str(out), "--batch-size", "8", "--max-steps", "4"]
    result = CliRunner().invoke(main, [*args, "--lr", "0.01", "--positive-score", "3", "--no-progress"])
    assert result.exit_code == 0, result.output
    before, after = sbert.load(folders / "static", device="cpu"), sbert.load(out, device="cpu")
    assert after.is_static and np.abs(after.encode(TEXTS[:4]) - before.encode(TEXTS[:4])).max() > 1e-4
