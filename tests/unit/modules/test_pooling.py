"""Pooling maths against values computed by hand on a small padded batch."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from sbert.modules.pooling import MODES, Pooling, pool

# Two texts, three positions, width 2. The second text has one real token and two padding rows whose
# values are large, so any leak of padding into the result would show.
TOKENS = torch.tensor(
    [
        [[1.0, -2.0], [3.0, 0.0], [2.0, 4.0]],
        [[-1.0, 5.0], [100.0, 100.0], [100.0, -100.0]],
    ]
)
MASK = torch.tensor([[1, 1, 1], [1, 0, 0]])


def test_mean_counts_real_tokens_only():
    expected = torch.tensor([[(1 + 3 + 2) / 3, (-2 + 0 + 4) / 3], [-1.0, 5.0]])
    torch.testing.assert_close(pool(TOKENS, MASK, "mean"), expected)


def test_max_ignores_padding_even_when_padding_is_larger():
    expected = torch.tensor([[3.0, 4.0], [-1.0, 5.0]])
    torch.testing.assert_close(pool(TOKENS, MASK, "max"), expected)


def test_max_of_all_negative_real_tokens_is_not_zero_or_padding():
    tokens = torch.tensor([[[-3.0, -1.0], [-2.0, -5.0], [0.0, 0.0]]])
    mask = torch.tensor([[1, 1, 0]])
    torch.testing.assert_close(pool(tokens, mask, "max"), torch.tensor([[-2.0, -1.0]]))


def test_cls_takes_first_real_position():
    torch.testing.assert_close(pool(TOKENS, MASK, "cls"), torch.tensor([[1.0, -2.0], [-1.0, 5.0]]))
    left = torch.tensor([[[100.0, 100.0], [-1.0, 5.0], [2.0, 2.0]]])
    torch.testing.assert_close(pool(left, torch.tensor([[0, 1, 1]]), "cls"), torch.tensor([[-1.0, 5.0]]))


def test_mean_sqrt_len_divides_by_root_of_length():
    expected = torch.tensor([[6 / math.sqrt(3), 2 / math.sqrt(3)], [-1.0, 5.0]])
    torch.testing.assert_close(pool(TOKENS, MASK, "mean_sqrt_len"), expected)


def test_lasttoken_finds_last_real_token_on_either_padding_side():
    torch.testing.assert_close(pool(TOKENS, MASK, "lasttoken"), torch.tensor([[2.0, 4.0], [-1.0, 5.0]]))
    left = torch.tensor([[[7.0, 7.0], [100.0, 100.0], [-1.0, 5.0]]])  # one pad row, then two real rows
    torch.testing.assert_close(pool(left, torch.tensor([[0, 1, 1]]), "lasttoken"), torch.tensor([[-1.0, 5.0]]))


def test_weightedmean_weights_by_position():
    expected = torch.tensor([[(1 * 1 + 2 * 3 + 3 * 2) / 6, (1 * -2 + 0 + 3 * 4) / 6], [-1.0, 5.0]])
    torch.testing.assert_close(pool(TOKENS, MASK, "weightedmean"), expected)


def test_weightedmean_counts_positions_from_first_real_token_with_left_padding():
    left = torch.tensor([[[100.0, 100.0], [1.0, 0.0], [4.0, 3.0]]])
    expected = torch.tensor([[(1 * 1 + 2 * 4) / 3, (0 + 2 * 3) / 3]])
    torch.testing.assert_close(pool(left, torch.tensor([[0, 1, 1]]), "weightedmean"), expected)


def test_module_concatenates_modes_in_the_order_given():
    layer = Pooling(2, ["mean", "cls"])
    out = layer({"token_embeddings": TOKENS, "attention_mask": MASK})["sentence_embedding"]
    assert layer.dim == 4 and layer.modes == ["mean", "cls"]
    torch.testing.assert_close(out[:, :2], pool(TOKENS, MASK, "mean"))
    torch.testing.assert_close(out[:, 2:], pool(TOKENS, MASK, "cls"))


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="expected one or more of"):
        Pooling(2, "median")


@pytest.mark.parametrize("modes", [["max", "mean"], ["mean", "max"], ["mean_sqrt_len", "cls", "lasttoken"]])
def test_config_round_trip(tmp_path, modes):
    Pooling(8, modes).save(tmp_path)
    loaded = Pooling.load(tmp_path)
    assert loaded.modes == modes and loaded.word_dim == 8


@pytest.mark.parametrize(
    ("config", "modes"),
    [
        ({"embedding_dimension": 4, "pooling_mode": "mean_sqrt_len_tokens"}, ["mean_sqrt_len"]),
        ({"embedding_dimension": 4, "pooling_mode": ["mean", "cls"]}, ["mean", "cls"]),
        ({"embedding_dimension": 4, "pooling_mode": ["max", "mean_sqrt_len_tokens"]}, ["max", "mean_sqrt_len"]),
        (
            {"word_embedding_dimension": 4, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": True},
            ["cls", "mean"],
        ),
        ({"word_embedding_dimension": 4, "pooling_mode_cls_token": True}, ["cls"]),
    ],
)
def test_reads_old_and_new_sentence_transformers_configs(tmp_path, config, modes):
    import json

    (tmp_path / "config.json").write_text(json.dumps(config))
    assert Pooling.load(tmp_path).modes == modes


# -- against sentence-transformers' own Pooling, on the same token vectors -----------------------------------

ST_NAME = {"mean_sqrt_len": "mean_sqrt_len_tokens"}


def _padded_batch(left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Four texts of 1-5 tokens, width 6, padded on one side with large junk values."""
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randn(4, 5, 6, generator=generator)
    lengths = [5, 1, 3, 4]
    mask = torch.zeros(4, 5, dtype=torch.int64)
    for row, n in enumerate(lengths):
        real = slice(5 - n, 5) if left else slice(0, n)
        mask[row, real] = 1
    return tokens.masked_fill(mask.unsqueeze(-1) == 0, 1e4), mask


def _compare_with_sentence_transformers(modes: tuple[str, ...], tmp_path) -> None:
    st_modules = pytest.importorskip("sentence_transformers.sentence_transformer.modules")
    theirs = st_modules.Pooling(6, tuple(ST_NAME.get(m, m) for m in modes))
    ours = Pooling(6, list(modes))
    for left in (False, True):
        tokens, mask = _padded_batch(left)
        expected = theirs({"token_embeddings": tokens, "attention_mask": mask})["sentence_embedding"]
        got = ours({"token_embeddings": tokens, "attention_mask": mask})["sentence_embedding"]
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6, msg=f"{modes}, left padding: {left}")
    # What each writes, the other reads in the same order.
    ours.save(tmp_path / "ours")
    read = st_modules.Pooling.load(str(tmp_path / "ours")).pooling_mode
    assert ((read,) if isinstance(read, str) else read) == tuple(ST_NAME.get(m, m) for m in modes)
    (tmp_path / "theirs").mkdir()
    theirs.save(str(tmp_path / "theirs"))
    assert Pooling.load(tmp_path / "theirs").modes == list(modes)


@pytest.mark.parametrize("modes", list(itertools.permutations(MODES, 2)), ids="-".join)
def test_every_pair_of_modes_in_either_order_equals_sentence_transformers(modes, tmp_path):
    _compare_with_sentence_transformers(modes, tmp_path)


@pytest.mark.slow
def test_single_modes_and_every_ordered_triple_equal_sentence_transformers(tmp_path):
    cases = [(m,) for m in MODES] + list(itertools.permutations(MODES, 3))
    for i, modes in enumerate(cases):
        _compare_with_sentence_transformers(modes, tmp_path / str(i))
