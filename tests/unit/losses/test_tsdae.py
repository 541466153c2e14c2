"""TSDAE: deletion noise, the tied decoder and its loss by hand, equality with sentence-transformers'
DenoisingAutoEncoderLoss, the ``tsdae`` objective through ``sbert train`` and the adapt methods end to end."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner
from conftest import make_tiny_encoder
from test_adapt import _tiny_corpus

import sbert
from sbert.adapt import AdaptSettings, adapt
from sbert.data.examples import Text
from sbert.losses.denoising import DenoisingAutoEncoderLoss, delete_words
from sbert.training import TrainingInterrupted

PAIRS = [
    ("cat dog", "the cat and the dog run"),
    ("bird", "a bird sings"),
    ("fox owl wolf", "fox, owl and wolf at night in the woods"),
]


def _no_dropout(*modules: torch.nn.Module) -> None:
    for module in modules:
        module.eval()


# -- deletion noise -------------------------------------------------------------------------------------
def test_deletion_keeps_a_word_deletes_sixty_percent_and_repeats_from_the_seed():
    for seed in range(200):  # a one-word text is never emptied (deleted alone 60% of the time)
        assert delete_words("word", generator=torch.Generator().manual_seed(seed)) == "word"
    assert delete_words("  ") == "  " and delete_words("") == ""  # nothing to delete
    words = [f"w{i}" for i in range(2000)]
    kept = delete_words(" ".join(words), generator=torch.Generator().manual_seed(0)).split()
    assert 0.36 < len(kept) / len(words) < 0.44  # each word kept with probability 0.4
    assert kept == [w for w in words if w in set(kept)]  # a subsequence, in order
    torch.manual_seed(7)
    first = [delete_words("the cat sat on the mat, purring.") for _ in range(5)]
    torch.manual_seed(7)  # the global generator (the trainer's seed, in its checkpoints) decides
    assert [delete_words("the cat sat on the mat, purring.") for _ in range(5)] == first
    assert len(set(first)) > 1
    assert delete_words("a b, c", ratio=0.0) == "a b, c"  # punctuation is a token; spacing is the original's


def test_text_rows_are_noised_and_pairs_are_taken_as_they_are(tiny_encoder):
    loss = DenoisingAutoEncoderLoss(tiny_encoder, seed=0)
    torch.manual_seed(3)
    noisy, originals = loss.pairs([Text("one two three four five six"), ("n", "o")])
    assert originals == ["one two three four five six", "o"] and noisy[1] == "n"
    assert set(noisy[0].split()) < set(originals[0].split())
    with pytest.raises(TypeError, match="Text rows or"):
        loss.pairs([("only one",)])
    with pytest.raises(ValueError, match="needs the model it trains"):
        DenoisingAutoEncoderLoss(None)


# -- the decoder and its loss ---------------------------------------------------------------------------
def test_the_decoder_shares_the_encoders_weights_and_is_not_saved_with_it(tiny_encoder, tmp_path):
    loss = DenoisingAutoEncoderLoss(tiny_encoder, seed=0)
    bert, decoder = tiny_encoder.transformer.model, loss.decoder
    assert decoder.bert.embeddings.word_embeddings.weight is bert.embeddings.word_embeddings.weight
    assert decoder.cls.predictions.decoder.weight is bert.embeddings.word_embeddings.weight  # the LM head
    assert (
        decoder.bert.encoder.layer[0].attention.self.query.weight is bert.encoder.layer[0].attention.self.query.weight
    )
    assert decoder.bert.encoder.layer[0].output.dense.weight is bert.encoder.layer[0].output.dense.weight
    encoder_ids = {id(p) for p in tiny_encoder.parameters()}
    own = [n for n, p in decoder.named_parameters() if id(p) not in encoder_ids]
    assert own and all(n.startswith(("bert.encoder.layer.0.crossattention.", "cls.")) for n in own)
    assert any("crossattention" in k for k in loss.state_dict())  # in the trainer's checkpoints
    tiny_encoder.save(tmp_path / "m")
    saved = sbert.load(str(tmp_path / "m"), device="cpu").state_dict()
    assert not any("crossattention" in k or "cls." in k for k in saved)  # not in the model folder
    untied = DenoisingAutoEncoderLoss(tiny_encoder, tie_encoder_decoder=False, seed=0).decoder
    assert untied.bert.embeddings.word_embeddings.weight is not bert.embeddings.word_embeddings.weight
    torch.testing.assert_close(untied.bert.embeddings.word_embeddings.weight, bert.embeddings.word_embeddings.weight)


def test_the_loss_is_the_decoders_mean_next_token_cross_entropy(tiny_encoder):
    loss = DenoisingAutoEncoderLoss(tiny_encoder, seed=0)
    _no_dropout(tiny_encoder, loss)
    value = loss(tiny_encoder, PAIRS)
    (vectors,) = tiny_encoder.embed_with_grad([p[0] for p in PAIRS])
    transformer = tiny_encoder.transformer
    target = transformer.collate(transformer.tokenize([p[1] for p in PAIRS])[0])
    ids, mask = target["input_ids"], target["attention_mask"]
    logits = loss.decoder(input_ids=ids, encoder_hidden_states=vectors[:, None], use_cache=False).logits
    # by hand: position t predicts token t + 1, for every real (not padding) next token
    terms = [
        -F.log_softmax(logits[row, t], -1)[ids[row, t + 1]]
        for row in range(len(ids))
        for t in range(ids.shape[1] - 1)
        if mask[row, t + 1]
    ]
    assert len(terms) == int(mask.sum()) - len(ids)
    torch.testing.assert_close(value, torch.stack(terms).mean(), rtol=1e-5, atol=1e-6)
    # and transformers' own causal-LM loss with padding labelled -100 agrees
    hf = loss.decoder(
        input_ids=ids, encoder_hidden_states=vectors[:, None], labels=ids.masked_fill(mask == 0, -100), use_cache=False
    ).loss
    torch.testing.assert_close(value, hf, rtol=1e-5, atol=1e-6)
    value.backward()
    assert tiny_encoder.transformer.model.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0


@pytest.mark.slow
def test_loss_and_gradients_equal_sentence_transformers(tmp_path):
    """sentence-transformers 6.2's DenoisingAutoEncoderLoss with ``tie_encoder_decoder=True``: under
    transformers 5.24 it builds its tied decoder (its own ``_tie_encoder_decoder_weights``, pointing the
    encoder's parameters at the decoder's), so the tied loss is compared as it is. Both load the same
    folder; the decoder's own weights (cross-attention, the LM head's transform and bias), which each
    side draws at random, are copied from theirs into ours. Dropout off; loss, the encoder's gradients and
    the decoder's gradients equal to 1e-5 on three (noisy, original) pairs of different lengths."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss as TheirLoss

    make_tiny_encoder().save(tmp_path / "m")
    st = SentenceTransformer(str(tmp_path / "m"), device="cpu")
    theirs = TheirLoss(st, tie_encoder_decoder=True)
    model = sbert.load(str(tmp_path / "m"), device="cpu")
    ours = DenoisingAutoEncoderLoss(model, seed=0)
    ours.decoder.load_state_dict(theirs.decoder.state_dict())
    _no_dropout(st, theirs, model, ours)
    features = [st.preprocess([p[0] for p in PAIRS]), st.preprocess([p[1] for p in PAIRS])]
    expected = theirs(features, None)
    expected.backward()
    value = ours(model, PAIRS)
    value.backward()
    torch.testing.assert_close(value, expected, rtol=0, atol=1e-5)
    for mine, other in ((model.transformer.model, st[0].auto_model), (ours.decoder, theirs.decoder)):
        grads = {n: p.grad for n, p in other.named_parameters() if p.grad is not None}
        assert len(grads) > 10
        for name, param in mine.named_parameters():
            if name in grads:
                torch.testing.assert_close(param.grad, grads[name], rtol=0, atol=1e-5, msg=name)


# -- sbert train and sbert adapt ------------------------------------------------------------------------
@pytest.mark.slow
def test_sbert_train_objective_tsdae_on_texts(tmp_path):
    from sbert.cli import main

    make_tiny_encoder().save(tmp_path / "base")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"the {a} sees the {b} near the river today" for a in "abcd" for b in "xyz") + "\n")
    out = tmp_path / "out"
    args = ["train", "-m", str(tmp_path / "base"), "--objective", "tsdae", "--format", "texts"]
    args += ["--train", str(corpus), "--out", str(out), "--max-steps", "2", "--batch-size", "4"]
    result = CliRunner().invoke(main, [*args, "--keep-checkpoint", "--no-progress", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    log = [json.loads(line) for line in (tmp_path / "out.train" / "log.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in log if "loss" in row]
    assert len(losses) == 2 and all(8.0 < v < 12.0 for v in losses)  # ~ln(30522) before training
    state = torch.load(tmp_path / "out.train" / "checkpoint.pt", weights_only=True)
    assert any("crossattention" in k for k in state["losses"])  # the decoder is checkpointed with the loss
    trained = sbert.load(str(out), device="cpu")
    assert not any("crossattention" in k for k in trained.state_dict())  # and not saved with the model
    base = sbert.load(str(tmp_path / "base"), device="cpu")
    assert not torch.equal(
        trained.state_dict()["0.model.encoder.layer.0.attention.self.query.weight"],
        base.state_dict()["0.model.encoder.layer.0.attention.self.query.weight"],
    )


@pytest.mark.slow
def test_adapt_tsdae_resumes_to_the_same_weights(tmp_path):
    """The decoder's own weights and the noise's generator come back from the checkpoint: an interrupted
    run ends where the straight one does."""
    make_tiny_encoder().save(tmp_path / "base")
    corpus = _tiny_corpus(tmp_path)
    settings = AdaptSettings(method="tsdae", steps=3, batch_size=4, checkpoint_every=100)
    summary = adapt(tmp_path / "base", corpus, tmp_path / "straight", settings, device="cpu", progress=False)
    assert summary["steps"] == 3 and summary["pairs"] == 22  # one text a document (2 of 24 held out for --auto)

    def stop_at_1(step: int, loss: float) -> None:
        if step == 1:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(TrainingInterrupted):
        adapt(
            tmp_path / "base", corpus, tmp_path / "stopped", settings, device="cpu", progress=False, on_step=stop_at_1
        )
    resumed = adapt(
        tmp_path / "base", corpus, tmp_path / "stopped", settings, resume=True, device="cpu", progress=False
    )
    assert resumed["steps_run"] == 2
    a = sbert.load(str(tmp_path / "straight"), device="cpu").state_dict()
    b = sbert.load(str(tmp_path / "stopped"), device="cpu").state_dict()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-6, msg=name)


@pytest.mark.slow
def test_adapt_tsdae_then_title_crop_runs_two_stages_and_resumes_in_the_second(tmp_path):
    make_tiny_encoder().save(tmp_path / "base")
    corpus = _tiny_corpus(tmp_path)
    settings = AdaptSettings(method="tsdae+title+crop", steps=2, batch_size=4, checkpoint_every=100)
    seen = []

    def stop_in_stage_2(step: int, loss: float) -> None:
        seen.append(step)
        if len(seen) == 3:  # stage 1's two steps, then stage 2's first
            os.kill(os.getpid(), signal.SIGINT)

    out = tmp_path / "adapted"
    with pytest.raises(TrainingInterrupted):
        adapt(tmp_path / "base", corpus, out, settings, device="cpu", progress=False, on_step=stop_in_stage_2)
    first = tmp_path / "adapted.train" / "first-tsdae"
    assert (first / "modules.json").is_file() and not out.exists()
    summary = adapt(tmp_path / "base", corpus, out, settings, resume=True, device="cpu", progress=False)
    assert summary["steps_run"] == 1 and summary["pairs"] == 44  # stage 1 not run again; title + crop pairs
    assert json.loads((tmp_path / "adapted.train" / "adapt.json").read_text())["base_model"] == str(first)
    key = "0.model.encoder.layer.0.attention.self.query.weight"
    weights = [sbert.load(str(p), device="cpu").state_dict()[key] for p in (tmp_path / "base", first, out)]
    assert not torch.equal(weights[0], weights[1]) and not torch.equal(weights[1], weights[2])
