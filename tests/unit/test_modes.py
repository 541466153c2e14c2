"""sbert.eval_mode: evaluation mode for a block, each module's own training mode back after it."""

from __future__ import annotations

import pytest
from torch import nn

from sbert.eval_mode import any_training, evaluating


def tree() -> nn.Module:
    inner = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    return nn.Sequential(nn.Linear(2, 2), inner, nn.Dropout(0.1)).eval()


def training_names(root: nn.Module) -> list[str]:
    return [name for name, module in root.named_modules() if module.training]


def test_any_training_sees_a_module_at_any_depth():
    root = tree()
    assert not any_training(root)
    root[1][1].train()
    assert any_training(root) and training_names(root) == ["1.1"]
    root.eval()
    root.train()
    assert any_training(root)


def test_each_module_gets_its_own_mode_back_after_the_block_and_after_an_error():
    root = tree()
    root[1].train()  # a part, and what is below it
    root[2].train()
    before = training_names(root)
    assert before == ["1", "1.0", "1.1", "2"]
    with evaluating(root):
        assert training_names(root) == []
    assert training_names(root) == before
    with pytest.raises(RuntimeError, match="inside"), evaluating(root):
        assert not any_training(root)
        raise RuntimeError("inside")
    assert training_names(root) == before


def test_a_tree_in_evaluation_mode_is_left_alone():
    root = tree()
    with evaluating(root):
        assert training_names(root) == []
    assert training_names(root) == []
