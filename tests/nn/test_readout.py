"""c2v_rag.nn.pooling.readout_positions says which positions read_representation reads: with every other row
of the hidden states NaN (as the int8 decoder leaves them), each representation gives what it gives from
the whole states; one of those rows NaN as well, and it shows."""

from __future__ import annotations

import pytest
import torch

from c2v_rag.core.config import POOLED_REPRESENTATIONS
from c2v_rag.nn.pooling import read_representation, readout_positions

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
        return read_representation(representation, states, context, last, n_contextual, contextual, pool_mask,
                                   normalize_parts=True)

    rows = readout_positions(representation, context, last, n_contextual)
    if representation in POOLED_REPRESENTATIONS:
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
