"""Pooling maths against values computed by hand on a small padded batch."""

from __future__ import annotations

import math

import pytest
import torch

from sbert.modules.pooling import Pooling, pool

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


def test_module_concatenates_modes_in_fixed_order():
    layer = Pooling(2, ["mean", "cls"])  # stored order: cls, then mean
    out = layer({"token_embeddings": TOKENS, "attention_mask": MASK})["sentence_embedding"]
    assert layer.dim == 4
    torch.testing.assert_close(out[:, :2], pool(TOKENS, MASK, "cls"))
    torch.testing.assert_close(out[:, 2:], pool(TOKENS, MASK, "mean"))


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="expected one or more of"):
        Pooling(2, "median")


def test_config_round_trip(tmp_path):
    Pooling(8, ["max", "mean"]).save(tmp_path)
    loaded = Pooling.load(tmp_path)
    assert loaded.modes == ["max", "mean"] and loaded.word_dim == 8


@pytest.mark.parametrize(
    ("config", "modes"),
    [
        ({"embedding_dimension": 4, "pooling_mode": "mean_sqrt_len_tokens"}, ["mean_sqrt_len"]),
        ({"embedding_dimension": 4, "pooling_mode": ["mean", "cls"]}, ["cls", "mean"]),
        ({"word_embedding_dimension": 4, "pooling_mode_cls_token": True}, ["cls"]),
    ],
)
def test_reads_old_and_new_sentence_transformers_configs(tmp_path, config, modes):
    import json

    (tmp_path / "config.json").write_text(json.dumps(config))
    assert Pooling.load(tmp_path).modes == modes
