"""Distillation losses (MarginMSE, KL over candidates, embedding MSE): values by hand, the teacher's scores
from rows or from a model, the data formats, and equal loss and gradients to sentence-transformers'."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from test_losses import FixedEncoder

import sbert
from sbert.data.examples import DistillationExample, RetrievalExample, Text, Triplet
from sbert.data.formats import read_examples
from sbert.errors import InputFileError
from sbert.losses.distillation import DistillKLDivLoss, EmbeddingMSELoss, MarginMSELoss
from sbert.losses.objectives import OBJECTIVES, LossInputs
from sbert.losses.teachers import Teacher

VECTORS = {"q1": [1.0, 0.0], "p1": [2.0, 0.0], "n1": [0.0, 1.0], "q2": [0.0, 1.0], "p2": [1.0, 1.0], "n2": [0.0, 3.0]}


def test_margin_mse_on_two_hand_made_margins():
    enc = FixedEncoder(VECTORS)
    batch = [DistillationExample("q1", "p1", ("n1",), (3.0, 0.0)), DistillationExample("q2", "p2", ("n2",), (0.5, 1.5))]
    # student margins (dot): q1.p1 - q1.n1 = 2 - 0 = 2 vs 3; q2.p2 - q2.n2 = 1 - 3 = -2 vs -1
    assert MarginMSELoss()(enc, batch).item() == pytest.approx(((2 - 3) ** 2 + (-2 + 1) ** 2) / 2)
    # cosine: cos(q1,p1) - cos(q1,n1) = 1; cos(q2,p2) - cos(q2,n2) = 1/sqrt(2) - 1
    expected = ((1 - 3) ** 2 + (1 / math.sqrt(2) - 1 + 1) ** 2) / 2
    assert MarginMSELoss(similarity="cosine")(enc, batch).item() == pytest.approx(expected)


def test_margin_mse_with_ragged_negatives_averages_every_margin():
    enc = FixedEncoder(VECTORS)
    batch = [
        DistillationExample("q1", "p1", ("n1", "n2"), (2.0, 0.0, 1.0)),  # margins 2 - 0 = 2 vs 2; 2 - 0 = 2 vs 1
        DistillationExample("q2", "p2", ("n1",), (0.0, 0.0)),  # q2.p2 - q2.n1 = 1 - 1 = 0 vs 0
    ]
    assert MarginMSELoss()(enc, batch).item() == pytest.approx((0 + 1 + 0) / 3)


def test_kl_over_candidates_by_hand():
    enc = FixedEncoder(VECTORS)
    batch = [DistillationExample("q1", "p1", ("n1",), (1.0, 0.0))]
    # student scores (2, 0) / T, teacher (1, 0) / T, T = 2
    t = torch.softmax(torch.tensor([0.5, 0.0]), 0)
    s = torch.log_softmax(torch.tensor([1.0, 0.0]), 0)
    expected = float((t * (t.log() - s)).sum()) * 4
    assert DistillKLDivLoss(temperature=2.0)(enc, batch).item() == pytest.approx(expected, rel=1e-6)
    same = [DistillationExample("q1", "p1", ("n1",), (2.0, 0.0))]  # the teacher agrees: no loss
    assert DistillKLDivLoss()(enc, same).item() == pytest.approx(0.0, abs=1e-7)


def test_kl_with_ragged_rows_is_the_mean_of_each_rows_kl():
    enc = FixedEncoder(VECTORS)
    rows = [
        DistillationExample("q1", "p1", ("n1", "n2"), (1.0, 0.0, 0.5)),
        DistillationExample("q2", "p2", ("n1",), (0.0, 2.0)),
    ]
    each = [DistillKLDivLoss()(enc, [row]).item() for row in rows]
    assert DistillKLDivLoss()(enc, rows).item() == pytest.approx(sum(each) / 2, rel=1e-6)


def test_bad_input_is_refused_clearly():
    enc = FixedEncoder(VECTORS)
    with pytest.raises(ValueError, match=r"row 0 of the batch \(query 'q1'\) has no teacher scores: give a teacher"):
        MarginMSELoss()(enc, [RetrievalExample("q1", "p1", ("n1",))])
    with pytest.raises(ValueError, match="MarginMSE needs at least one negative per row"):
        MarginMSELoss()(enc, [DistillationExample("q1", "p1", (), (1.0,))])
    with pytest.raises(ValueError, match="KL distillation needs at least one negative per row"):
        DistillKLDivLoss()(enc, [DistillationExample("q1", "p1", (), (1.0,))])
    with pytest.raises(ValueError, match="temperature must be a positive finite number"):
        DistillKLDivLoss(temperature=0.0)
    with pytest.raises(ValueError, match="similarity 'l2': expected one of dot, cosine"):
        MarginMSELoss(similarity="l2")
    with pytest.raises(ValueError, match="2 teacher scores for 3 candidates"):
        DistillationExample("q", "p", ("n1", "n2"), (1.0, 0.0))
    with pytest.raises(ValueError, match=r"embedding distillation needs a teacher \(sbert train --teacher MODEL\)"):
        OBJECTIVES["embedding-mse"].bi_encoder(LossInputs({"teacher": ""}, 2))


def test_distillation_files(tmp_path):
    tsv = tmp_path / "margins.tsv"
    tsv.write_text("query\tpositive\tnegative\tmargin\nq1\tp1\tn1\t2.5\n", encoding="utf-8")
    assert read_examples("distill", tsv, DistillationExample) == [DistillationExample("q1", "p1", ("n1",), (2.5, 0.0))]
    jsonl = tmp_path / "scores.jsonl"
    jsonl.write_text(
        '{"query": "q", "positive": "p", "negatives": ["a", "b"], "scores": [9, 7, 1]}\n'
        '{"query": "q", "positive": "p", "negatives": ["a", "b"], "margins": [2, 8]}\n',
        encoding="utf-8",
    )
    first, second = read_examples("distill", jsonl, DistillationExample)
    assert first.scores == (9.0, 7.0, 1.0) and second.scores == (0.0, -2.0, -8.0)  # the same margins
    bad = tmp_path / "bad.tsv"
    bad.write_text("q1\tp1\tn1\tlots\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=r"bad.tsv: line 1: margin 'lots' is not a number"):
        read_examples("distill", bad, DistillationExample)
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"query": "q", "positive": "p", "negatives": ["a"], "scores": [1]}\n', encoding="utf-8")
    with pytest.raises(InputFileError, match=r"bad.jsonl: line 1: \"scores\" holds \[1\]; expected 2 numbers"):
        read_examples("distill", bad_json, DistillationExample)


def test_texts_files_and_beir_folders(tmp_path):
    lines = tmp_path / "texts.txt"
    lines.write_text("first text\n\nsecond text\n", encoding="utf-8")
    assert read_examples("texts", lines, Text) == [Text("first text"), Text("second text")]
    folder = tmp_path / "beir"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "Crash", "text": "on save"}\n{"_id": "d2", "title": "", "text": "slow"}\n',
        encoding="utf-8",
    )
    assert read_examples("texts", folder, Text) == [Text("Crash on save"), Text("slow")]


# -- a teacher model, and against sentence-transformers ----------------------------------------------------
@pytest.fixture(scope="module")
def pair():
    """The default model, ours and sentence-transformers', without dropout (fixed batch, fixed values)."""
    st = pytest.importorskip("sentence_transformers")
    ours = sbert.load("default", device="cpu")
    reference = st.SentenceTransformer(str(ours.path), device="cpu")
    for model in (ours, reference):
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
    return ours, reference


ROWS = [
    DistillationExample(
        "a crash when saving", "the editor crashes on save", ("printing is slow", "fonts"), (7.0, 2.0, 1.0)
    ),
    DistillationExample("tables lose borders", "borders of a table vanish", ("save crash", "a table"), (5.0, 4.5, 0.0)),
    DistillationExample("cannot open docx", "docx files fail to open", ("odt opens", "slow start"), (3.0, -1.0, 2.0)),
]


def _ours(model, loss, batch) -> tuple[float, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    value = loss(model, batch)
    value.backward()
    grads = {n: p.grad.clone() for n, p in model.transformer.model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return value.item(), grads


def _theirs(model, loss, columns, labels) -> tuple[float, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    value = loss([model.preprocess(c) for c in columns], labels)
    value.backward()
    grads = {n: p.grad.clone() for n, p in model[0].auto_model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return value.item(), grads


def assert_same(ours, theirs) -> None:
    assert ours[0] == pytest.approx(theirs[0], abs=1e-5)
    assert ours[1].keys() == theirs[1].keys() and ours[1]
    worst = max(abs(ours[1][k] - theirs[1][k]).max().item() for k in ours[1])
    assert worst <= 1e-5


def _columns():
    return [[r.query for r in ROWS], [r.positive for r in ROWS], *[[r.negatives[k] for r in ROWS] for k in range(2)]]


@pytest.mark.slow
def test_margin_mse_equals_sentence_transformers(pair):
    from sentence_transformers.sentence_transformer import losses

    ours, reference = pair
    labels = torch.tensor([[r.scores[0] - s for s in r.scores[1:]] for r in ROWS])
    assert_same(
        _ours(ours, MarginMSELoss(), ROWS), _theirs(reference, losses.MarginMSELoss(reference), _columns(), labels)
    )


@pytest.mark.slow
def test_kl_over_candidates_equals_sentence_transformers(pair):
    from sentence_transformers.sentence_transformer import losses

    ours, reference = pair
    labels = torch.tensor([list(r.scores) for r in ROWS])
    theirs = losses.DistillKLDivLoss(reference, temperature=2.0)
    assert_same(_ours(ours, DistillKLDivLoss(temperature=2.0), ROWS), _theirs(reference, theirs, _columns(), labels))


@pytest.mark.slow
def test_embedding_mse_equals_sentence_transformers(pair):
    from sentence_transformers.sentence_transformer import losses

    ours, reference = pair
    texts = [r.query for r in ROWS] + [r.positive for r in ROWS]
    teacher = Teacher(sbert.load("default", device="cpu"))
    target = torch.as_tensor(teacher.model.encode(texts)) * 0.5  # something to move towards
    theirs = _theirs(reference, losses.MSELoss(reference), [texts], target)

    class Halved:  # the teacher whose vectors are the target
        similarity_fn_name = "cosine"

        def encode(self, texts, batch_size=32, show_progress=None):
            return teacher.model.encode(texts) * 0.5

    assert_same(_ours(ours, EmbeddingMSELoss(Teacher(Halved())), [Text(t) for t in texts]), theirs)


@pytest.mark.slow
def test_a_teacher_model_scores_rows_without_scores(pair):
    ours, _ = pair
    teacher = Teacher("default")
    assert teacher.model is not ours and not any(p.requires_grad for p in teacher.model.parameters())
    plain = [RetrievalExample(r.query, r.positive, r.negatives) for r in ROWS]
    q = teacher.model.encode([r.query for r in ROWS], normalize=True)
    scored = [
        DistillationExample(
            r.query,
            r.positive,
            r.negatives,
            tuple(float(q[i] @ v) for v in teacher.model.encode([r.positive, *r.negatives], normalize=True)),
        )
        for i, r in enumerate(ROWS)
    ]
    loss = MarginMSELoss(teacher)
    assert loss(ours, plain).item() == pytest.approx(MarginMSELoss()(ours, scored).item(), rel=1e-5)
    assert list(loss.state_dict()) == []  # the teacher is neither trained nor checkpointed
    built = OBJECTIVES["distill-kl"].bi_encoder(
        LossInputs({"teacher": "default", "similarity": "cosine", "temperature": 0.5}, 384)
    )
    assert built.teacher.model is not None and built.temperature == 0.5 and built.similarity == "cosine"
    triplet = Triplet(ROWS[0].query, ROWS[0].positive, ROWS[0].negatives[0])
    assert loss(ours, [triplet]).item() >= 0


def test_a_teacher_cut_to_the_students_length_scores_the_text_the_student_reads():
    from conftest import make_tiny_encoder  # its own limit: 32 tokens

    long_text = " ".join(["printer crashes when a page prints"] * 12)  # far more than 32 tokens
    teacher = Teacher(make_tiny_encoder(), max_seq_length=8)
    assert teacher.model.max_seq_length == 8
    cut = make_tiny_encoder()
    cut.max_seq_length = 8
    with warnings.catch_warnings():  # cut on purpose, as the student's own texts: no warning at every step
        warnings.simplefilter("error")
        got = teacher.vectors([long_text], torch.device("cpu")).numpy()
    with pytest.warns(UserWarning, match="longer than max_seq_length=32"):  # uncut: its own limit warns
        Teacher(make_tiny_encoder()).vectors([long_text], torch.device("cpu"))
    assert abs(got - cut.encode([long_text], on_truncation="ignore")).max() < 1e-6
    assert abs(got - make_tiny_encoder().encode([long_text], on_truncation="ignore")).max() > 1e-3  # it was cut
    assert Teacher(make_tiny_encoder(), max_seq_length=1_000).model.max_seq_length == 32  # never longer
    assert Teacher(make_tiny_encoder()).model.max_seq_length == 32  # None: its own


def test_train_cuts_its_teacher_and_guide_to_the_length_the_student_trains_on(tmp_path):
    from conftest import make_tiny_encoder  # its own limit: 32 tokens

    from sbert.training.recipe import make_loss
    from sbert.training.spec import ObjectiveSpec

    folder = make_tiny_encoder().save(tmp_path / "teacher")
    student = make_tiny_encoder()
    student.max_seq_length = 16
    guided = ObjectiveSpec("mnrl", "triplets", ["t.tsv"], {"guide": str(folder)})
    taught = ObjectiveSpec("distill-kl", "triplets", ["t.tsv"], {"teacher": str(folder)})
    for cut, reads in ((None, 16), (8, 8), (100, 16)):  # the run's cut where it is below the student's own
        assert make_loss(guided, student, max_seq_length=cut).guide.guide.model.max_seq_length == reads
        assert make_loss(taught, student, max_seq_length=cut).teacher.model.max_seq_length == reads
    student.max_seq_length = 64  # a student reading more than the teacher can: the teacher keeps its own
    assert make_loss(taught, student).teacher.model.max_seq_length == 32
