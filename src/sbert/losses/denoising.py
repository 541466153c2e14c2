"""TSDAE: a transformer-based sequential denoising auto-encoder (Wang, Reimers & Gurevych 2021).

The encoder embeds a text with most of its words deleted; a decoder with cross-attention, whose only
"encoder position" is that one sentence vector, rebuilds the original text token by token (next-token
cross-entropy, padding ignored). The decoder is the encoder's own architecture as a causal LM
(``AutoModelForCausalLM`` from the encoder's config with ``is_decoder`` and ``add_cross_attention``),
its weights shared with the encoder's where the names match (embeddings, self-attention, feed-forward)
and its LM head tied to the word embeddings; only the cross-attention and the LM head's transform and bias
are its own. sentence-transformers' ``DenoisingAutoEncoderLoss`` (``tie_encoder_decoder=True``) computes
the same loss; tests/unit/losses/test_tsdae.py checks loss and gradients against it.

The decoder belongs to the loss: the trainer trains it and keeps it in checkpoints (the losses' state),
but it is not part of the ``Encoder`` and so never written into the saved model folder.

Rows are ``Text`` (the deletion noise is applied here: each word, or punctuation mark, deleted with
probability ``delete_ratio``, at least one kept, as sentence-transformers' ``DenoisingAutoEncoderDataset``)
or ready ``(noisy, original)`` string pairs. The noise is drawn from torch's CPU generator, which the
trainer seeds with the run's seed and saves in checkpoints, so a resumed run draws the same deletions.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from sbert.adapter_folder import is_peft
from sbert.data.examples import Text

if TYPE_CHECKING:
    from transformers import PreTrainedModel

DELETE_RATIO = 0.6  # the paper's (and sentence-transformers') deletion probability
_WORD = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")  # words (contractions whole) and punctuation marks


def delete_words(text: str, ratio: float = DELETE_RATIO, generator: torch.Generator | None = None) -> str:
    """``text`` with each word and punctuation mark deleted with probability ``ratio`` (at least one kept;
    a text without words comes back unchanged). Kept tokens keep the spacing that preceded them."""
    spans = [m.span() for m in _WORD.finditer(text)]
    if not spans:
        return text
    keep = torch.rand(len(spans), generator=generator) > ratio
    if not keep.any():
        keep[int(torch.randint(len(spans), (1,), generator=generator))] = True
    parts: list[str] = []
    for (start, end), kept in zip(spans, keep.tolist(), strict=True):
        if kept:
            if parts and text[start - 1].isspace():
                parts.append(" ")
            parts.append(text[start:end])
    return "".join(parts)


def tie_to(decoder_base: nn.Module, encoder_model: nn.Module) -> list[str]:
    """Point every parameter of ``decoder_base`` at the encoder's parameter of the same module name and
    attribute (and shape); returns the names tied. The encoder's modules are left as they are."""
    modules = dict(encoder_model.named_modules())
    tied = []
    for name, param in list(decoder_base.named_parameters()):
        module_name, _, attr = name.rpartition(".")
        shared = getattr(modules.get(module_name), attr, None)
        if isinstance(shared, nn.Parameter) and shared.shape == param.shape:
            setattr(decoder_base.get_submodule(module_name), attr, shared)
            tied.append(name)
    return tied


def build_decoder(encoder_model: nn.Module, tie: bool = True, seed: int | None = None) -> PreTrainedModel:
    """The encoder's architecture as a causal LM with cross-attention; tied (``tie``) to ``encoder_model``
    or, untied, a copy of its weights. Its own weights are drawn under ``seed`` (None: the global seed)."""
    from transformers import AutoModelForCausalLM

    from sbert.modules.transformer import quiet_transformers

    config: Any = copy.deepcopy(encoder_model.config)  # a transformers PretrainedConfig
    config.is_decoder, config.add_cross_attention = True, True
    with torch.random.fork_rng(devices=[], enabled=seed is not None), quiet_transformers():
        if seed is not None:
            torch.manual_seed(seed)
        try:
            decoder = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
        except ValueError as err:
            raise ValueError(
                f"TSDAE needs the encoder's architecture as a decoder; {config.model_type!r} has no causal-LM "
                f"class in transformers ({err})"
            ) from err
    first = next(encoder_model.parameters())
    decoder.to(device=first.device, dtype=first.dtype)
    base = decoder.base_model
    if tie:
        if not tie_to(base, encoder_model):
            raise ValueError(f"no weight of the {config.model_type!r} decoder matches the encoder's by name")
    else:
        base.load_state_dict(encoder_model.state_dict(), strict=False)
    head = decoder.get_output_embeddings()
    if head is not None and getattr(config, "tie_word_embeddings", True):
        head.weight = decoder.get_input_embeddings().weight  # the LM head is the (encoder's) word embeddings
    return decoder


class DenoisingAutoEncoderLoss(nn.Module):
    """TSDAE's reconstruction loss for ``encoder`` (an sbert ``Encoder``: its transformer is what the
    decoder shares weights with, ``tie_encoder_decoder``). ``seed`` draws the decoder's own weights."""

    def __init__(
        self,
        encoder,
        delete_ratio: float = DELETE_RATIO,
        tie_encoder_decoder: bool = True,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        if encoder is None or not hasattr(encoder, "transformer"):
            raise ValueError("the tsdae objective needs the model it trains (an sbert Encoder with a transformer)")
        if not 0.0 <= delete_ratio < 1.0:
            raise ValueError(f"delete_ratio must be in [0, 1), got {delete_ratio}")
        hidden = encoder.transformer.dim
        if encoder.model_dim != hidden:
            raise ValueError(
                f"TSDAE feeds the sentence vector to a decoder {hidden} wide, but this model's vectors are "
                f"{encoder.model_dim} wide (a Dense layer changes the width)"
            )
        self.delete_ratio, self.tied = float(delete_ratio), tie_encoder_decoder
        model = encoder.transformer.model
        model = model.get_base_model() if is_peft(model) else model  # a LoRA adapter's: tied to the base's weights
        self.decoder = build_decoder(model, tie_encoder_decoder, seed)

    def pairs(self, batch: Sequence[Text | tuple[str, str]]) -> tuple[list[str], list[str]]:
        """(noisy texts, original texts) of ``batch``: ``Text`` rows get their noise drawn now."""
        noisy, originals = [], []
        for row in batch:
            if isinstance(row, Text):
                noisy.append(delete_words(row.text, self.delete_ratio))
                originals.append(row.text)
            elif isinstance(row, (tuple, list)) and len(row) == 2 and all(isinstance(t, str) for t in row):
                noisy.append(row[0])
                originals.append(row[1])
            else:
                raise TypeError(f"TSDAE takes Text rows or (noisy, original) pairs of strings, got {row!r}")
        return noisy, originals

    def forward(self, encoder, batch: Sequence[Text | tuple[str, str]]) -> torch.Tensor:
        transformer = encoder.transformer
        words = transformer.model.get_input_embeddings().weight
        if self.tied and self.decoder.get_input_embeddings().weight is not words:
            raise ValueError("this TSDAE loss's decoder is tied to another model than the one it is given")
        noisy, originals = self.pairs(batch)
        (vectors,) = encoder.embed_with_grad(noisy)
        return self.reconstruction_loss(vectors, transformer.collate(transformer.tokenize(originals)[0]))

    def reconstruction_loss(self, vectors: torch.Tensor, target: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean next-token cross-entropy of the decoder rebuilding ``target`` (a padded batch: input_ids,
        attention_mask) from ``vectors`` (batch, hidden), each the only position it cross-attends to."""
        ids = target["input_ids"].to(vectors.device)
        mask = target["attention_mask"].to(vectors.device)
        labels = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
        logits = self.decoder(
            input_ids=ids[:, :-1],
            attention_mask=mask[:, :-1],
            encoder_hidden_states=vectors[:, None],
            encoder_attention_mask=mask.new_ones(len(ids), 1),
            use_cache=False,
        ).logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)
