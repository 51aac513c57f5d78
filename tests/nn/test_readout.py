"""Representation.positions (c2v_rag.nn.readout) says which positions Representation.read reads: with every other row
of the hidden states NaN (as the int8 decoder leaves them), each representation gives what it gives from
the whole states; one of those rows NaN as well, and it shows."""

from __future__ import annotations

import pytest
import torch

from c2v_rag.nn.readout import REPRESENTATIONS as REGISTERED

REPRESENTATIONS = ["concat", "average", "last_token", "contextual", "eos_projector", "mean", "weighted_mean"]


@pytest.mark.parametrize("n_contextual", [1, 2])
@pytest.mark.parametrize("representation", REPRESENTATIONS)
def test_the_readout_reads_exactly_the_positions_it_names(representation, n_contextual):
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, 9, 8, generator=generator)
    context, last = torch.tensor([0, 2, 1]), torch.tensor([8, 5, 3])
    contextual = torch.randn(3, n_contextual, 8, generator=generator)
    pool_mask = (torch.arange(9)[None] <= last[:, None]).long()

    def read(states: torch.Tensor) -> torch.Tensor:
        return REGISTERED[representation].read(
            states, context, last, n_contextual, contextual, pool_mask, normalize_parts=True
        )

    rows = REGISTERED[representation].positions(context, last, n_contextual)
    if REGISTERED[representation].pools_text:
        assert rows is None  # every row is read
        return
    expected = read(hidden)
    sparse = torch.full_like(hidden, float("nan"))
    batch = torch.arange(3)[:, None]
    sparse[batch, rows] = hidden[batch, rows]
    torch.testing.assert_close(read(sparse), expected, rtol=0, atol=0)
    for column in range(rows.shape[1]):  # and every row named is needed
        holed = sparse.clone()
        holed[0, rows[0, column]] = float("nan")
        assert read(holed)[0].isnan().any()


def test_an_unknown_representation_is_refused_when_the_config_is_built_naming_the_registered_ones():
    from c2v_rag.core.config import Causal2VecConfig

    with pytest.raises(ValueError, match="representation='maxx' is not a registered representation") as refused:
        Causal2VecConfig(decoder="x", encoder="y", representation="maxx")
    assert all(repr(name) in str(refused.value) for name in REGISTERED)
    config = Causal2VecConfig(decoder="x", encoder="y")
    with pytest.raises(ValueError, match="not a registered representation"):
        config.representation = "maxx"


@pytest.mark.parametrize("representation", REPRESENTATIONS)
def test_the_config_layout_is_the_representation_s_parts_and_width(representation):
    from c2v_rag.core.config import Causal2VecConfig

    registered = REGISTERED[representation]
    plain = {"num_contextual_tokens": 0, "encoder": None} if not registered.reads_contextual else {"encoder": "y"}
    config = Causal2VecConfig(decoder="x", representation=representation, decoder_hidden_size=8, **plain)
    layout = config.parts
    assert [name for name in layout if name != "full"] == list(registered.parts(8))
    assert config.embedding_dim == registered.width(8) == sum(registered.parts(8).values())
