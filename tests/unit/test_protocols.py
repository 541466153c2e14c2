"""The contracts of ``sbert.protocols``: the models sbert ships satisfy them (mypy checks the signatures in
``.ci/run``; these tests check the members at run time)."""

from __future__ import annotations

import pytest
from conftest import make_tiny_encoder

from sbert.backends.onnx_query import QueryEncoder
from sbert.protocols import IndexEncoder, SearchEncoder, TextEncoder, TrainableEncoder


def _light(prompt: str | None) -> QueryEncoder:
    """A light query encoder as ``QueryEncoder.of_index`` makes it, without its ONNX session (not run here)."""
    light = object.__new__(QueryEncoder)
    light.spec, light.runtime = {"prompt": prompt}, "onnx/fp32"
    return light


@pytest.mark.slow  # builds a tiny encoder on the default model's tokenizer
def test_the_encoder_satisfies_every_encoder_protocol():
    encoder = make_tiny_encoder()
    for protocol in (TextEncoder, SearchEncoder, IndexEncoder, TrainableEncoder):
        assert isinstance(encoder, protocol), protocol.__name__


def test_the_light_query_encoder_is_a_search_encoder_and_no_more():
    light = _light("query: ")
    assert isinstance(light, SearchEncoder)
    assert not isinstance(light, IndexEncoder)  # it embeds no documents: building an index takes the model


def test_the_light_query_encoder_resolves_only_the_prompt_it_recorded():
    light = _light("query: ")
    assert light.resolve_prompt() == light.resolve_prompt(task="query") == "query: "
    assert light.resolve_prompt(prompt="other: ", task="query") == "other: "
    assert _light(None).resolve_prompt(task="query") is None
    for refused in ({"prompt_name": "query"}, {"task": "document"}):
        with pytest.raises(ValueError, match="knows the recorded query prompt only"):
            light.resolve_prompt(**refused)
