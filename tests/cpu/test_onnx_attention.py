"""The exported decoder's attention as block-causal ONNX Attention (c2v_rag.cpu.onnx_attention, issue 26): checked
against the torch decoder itself on right-padded batches, one block and cut into blocks, bitwise the same
however a sequence is cut, and left alone where it does not apply."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

import onnxruntime as ort  # noqa: E402
from transformers import LlamaConfig, LlamaModel  # noqa: E402

from c2v_rag.cpu import onnx_decoder as od  # noqa: E402
from c2v_rag.cpu.onnx_attention import (  # noqa: E402
    MIN_BLOCKED_LENGTH,
    POSITIONS_FROM_LENGTHS,
    POSITIONS_KEY,
    READOUT_INPUT,
    fuse_attention,
    last_layer_at_rows,
)
from c2v_rag.nn.attention import set_attention_mode  # noqa: E402


def _llama(head_dim: int, **extra) -> LlamaModel:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=40,
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=2,
        intermediate_size=96,
        max_position_embeddings=256,
        rope_theta=10000.0,
        **extra,
    )
    return LlamaModel(config).eval()


def _batch(lengths: list[int], width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    longest = max(lengths)
    embeds = torch.randn(len(lengths), longest, width, generator=generator)
    mask = torch.zeros(len(lengths), longest, dtype=torch.long)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    return embeds, mask, torch.arange(longest).expand(len(lengths), longest).contiguous()


def _session(model) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize(
    ("lengths", "cut"), [([11, 4, 7], False), ([150, 3, 97, 64], True)], ids=["one-block", "cut-into-blocks"]
)
def test_fused_attention_computes_what_the_torch_decoder_computes(tmp_path, capfd, lengths, cut):
    decoder = _llama(head_dim=16)
    exported = onnx.load(str(od.export_decoder(decoder, tmp_path / "decoder.onnx")))
    fused = onnx.load(str(tmp_path / "decoder.onnx"))
    assert fuse_attention(fused, decoder) == 2
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("If") == 2 and ops.count("RotaryEmbedding") == 4
    assert "Softmax" not in ops and "Expand" not in ops  # the eager chain (mask, repeat_kv) is gone
    assert {p.key: p.value for p in fused.metadata_props}[POSITIONS_KEY] == POSITIONS_FROM_LENGTHS
    assert (max(lengths) >= MIN_BLOCKED_LENGTH) is cut
    embeds, mask, positions = _batch(lengths, 64)  # right padding, lengths unlike the export's trace
    with torch.no_grad():
        expected = decoder(inputs_embeds=embeds, attention_mask=mask, position_ids=positions).last_hidden_state
    feeds = {"inputs_embeds": embeds.numpy(), "attention_mask": mask.numpy(), "position_ids": positions.numpy()}
    real = mask.bool().numpy()
    capfd.readouterr()
    got = _session(fused).run(None, feeds)[0]
    # ONNX Runtime loads and runs it without a warning (its default log level): no duplicate or mis-shaped values
    assert "[W:onnxruntime" not in capfd.readouterr().err
    np.testing.assert_allclose(got[real], expected.numpy()[real], atol=2e-4, rtol=1e-4)
    # and the fused graph agrees with the unfused export as closely as that agrees with torch
    unfused = _session(exported).run(None, feeds)[0]
    assert np.abs(got[real] - unfused[real]).max() < 2e-4


@pytest.mark.parametrize("length", [60, 130])
def test_a_text_gets_the_same_states_bit_for_bit_however_its_sequence_is_cut(tmp_path, length):
    """60 tokens alone run as one block, 130 as blocks of 33; beside a 200-token text both are cut into blocks
    of 50 instead (their later blocks all padding): each query still sums over the same keys in the same order."""
    decoder = _llama(head_dim=16)
    model = onnx.load(str(od.export_decoder(decoder, tmp_path / "decoder.onnx")))
    fuse_attention(model, decoder)
    session = _session(model)
    embeds, mask, positions = _batch([length, 200], 64)

    def run(rows: slice, width: int) -> np.ndarray:
        return session.run(
            None,
            {
                "inputs_embeds": embeds[rows, :width].numpy(),
                "attention_mask": mask[rows, :width].numpy(),
                "position_ids": positions[rows, :width].numpy(),
            },
        )[0]

    alone, together = run(slice(0, 1), length), run(slice(0, 2), 200)
    np.testing.assert_array_equal(alone[0], together[0, :length])


def test_the_last_layer_at_the_readout_rows_gives_those_rows_of_the_whole_computation_bit_for_bit(tmp_path, capfd):
    """Rows early and late, in blocks and not, repeated, one and several per text: each is the same row of the
    graph that computes every row; the layers before the last still run at every position (their keys feed
    the last). Given every position, it computes the whole output."""
    decoder = _llama(head_dim=16)
    model = onnx.load(str(od.export_decoder(decoder, tmp_path / "decoder.onnx")))
    assert not last_layer_at_rows(model)  # the attention must be fused first
    fuse_attention(model, decoder)
    whole = _session(model)
    assert last_layer_at_rows(model)
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("If") == 1 and ops.count("Attention") == 1  # the first layer as before, the last at rows
    capfd.readouterr()
    rows_only = _session(model)
    assert "[W:onnxruntime" not in capfd.readouterr().err
    embeds, mask, positions = _batch([150, 3, 97, 64], 64)
    feeds = {"inputs_embeds": embeds.numpy(), "attention_mask": mask.numpy(), "position_ids": positions.numpy()}
    expected = whole.run(None, feeds)[0]
    rows = np.array([[0, 149, 70], [1, 2, 2], [0, 96, 5], [63, 0, 31]])
    got = rows_only.run(None, {**feeds, READOUT_INPUT: rows})[0]
    assert got.shape == (4, 3, 64)
    np.testing.assert_array_equal(got, np.stack([expected[b, rows[b]] for b in range(4)]))
    every = rows_only.run(None, {**feeds, READOUT_INPUT: positions.numpy()})[0]
    np.testing.assert_array_equal(every, expected)


@pytest.mark.parametrize("case", ["biased", "bidirectional"])
def test_fusion_is_skipped_where_it_does_not_apply(tmp_path, case):
    if case == "biased":  # biased q/k/v: reading the projections' MatMuls would skip the bias Add
        decoder = _llama(head_dim=16, attention_bias=True)
    else:  # LLM2Vec's recipe: causal attention would be wrong there
        decoder = _llama(head_dim=16)
        set_attention_mode(decoder, "bidirectional")
    model = onnx.load(str(od.export_decoder(decoder, tmp_path / "decoder.onnx")))
    before = [n.op_type for n in model.graph.node]
    opset = [(o.domain, o.version) for o in model.opset_import]
    assert fuse_attention(model, decoder) == 0
    assert [n.op_type for n in model.graph.node] == before
    assert [(o.domain, o.version) for o in model.opset_import] == opset


def test_a_fused_decoder_refuses_positions_it_would_ignore(tmp_path):
    decoder = _llama(head_dim=16)
    model = onnx.load(str(od.export_decoder(decoder, tmp_path / "decoder.onnx")))
    fuse_attention(model, decoder)
    onnx.save_model(model, str(tmp_path / "fused.onnx"))
    wrapped = od.OnnxDecoder(decoder, tmp_path / "fused.onnx", "fused", threads=1)
    assert wrapped.positions_from_lengths
    embeds, mask, positions = _batch([5, 3], 64)
    wrapped(inputs_embeds=embeds, attention_mask=mask, position_ids=positions)
    with pytest.raises(ValueError, match=r"positions 0\.\.T-1"):
        wrapped(inputs_embeds=embeds, attention_mask=mask, position_ids=positions + 2)
