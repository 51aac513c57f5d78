"""The forward pass against an independent computation, batch invariance and causal attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

INSTRUCTION = "Retrieve semantically similar text."

MIXED_TEXTS = [
    ("word " * (i % 17)) + f"sample {i} " + "Vitamin D and bone loss. " * (i % 7) + ("!" if i % 3 else "")
    for i in range(50)
]


def _manual_embedding(model, text: str, instruction: str | None) -> np.ndarray:
    """Causal2Vec by hand for one unpadded text: encoder mean-pool, Eq. 1 MLP, [I; C; T; EOS]."""
    tok, enc_tok = model.tokenizer, model.encoder_tokenizer
    enc = enc_tok(text, truncation=True, max_length=model.encoder_max_length, return_tensors="pt")
    with torch.no_grad():
        states = model.encoder(**{k: v for k, v in enc.items() if k != "token_type_ids"}).last_hidden_state[0]
        h = states.mean(0)
        p = model.projector
        c = F.gelu(h @ p.fc1.weight.T + p.fc1.bias) @ p.fc2.weight.T + p.fc2.bias
        fmt = model.config.prompt_format
        head = tok(fmt.prefix + (instruction + "\n" if instruction else ""), add_special_tokens=False)["input_ids"]
        if model.prompt_builder._prefix[:1] == [tok.bos_token_id] and tok.bos_token_id is not None:
            head = [tok.bos_token_id] + head
        tail = tok(text, add_special_tokens=False)["input_ids"] + tok(fmt.suffix, add_special_tokens=False)["input_ids"]
        if tail[-1:] != [tok.eos_token_id]:
            tail = tail + [tok.eos_token_id]
        table = model.decoder.get_input_embeddings()
        scale = getattr(table, "embed_scale", 1.0)
        x = torch.cat([table(torch.tensor(head)), (c * scale)[None], table(torch.tensor(tail))])[None]
        out = model.decoder(inputs_embeds=x, use_cache=False).last_hidden_state[0]
    return torch.cat([out[len(head)], out[-1]]).numpy()


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "qwen3", "gemma", "gemma3", "gpt2"])
def test_forward_matches_independent_computation(tiny_model_factory, family):
    model = tiny_model_factory(family)
    texts = ["a short one", "Proteins fold into structures that determine their function " * 3, ""]
    got = model.encode(texts, instruction=INSTRUCTION)
    for text, vector in zip(texts, got):
        np.testing.assert_allclose(vector, _manual_embedding(model, text, INSTRUCTION), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("family", ["llama", "gpt2", "gemma3"])
def test_same_vector_alone_or_in_any_batch(tiny_model_factory, family):
    model = tiny_model_factory(family)
    batched = model.encode(MIXED_TEXTS, instruction=INSTRUCTION, max_tokens_per_batch=2048)
    small_batches = model.encode(MIXED_TEXTS, instruction=INSTRUCTION, batch_size=7)
    single = np.stack([model.encode(t, instruction=INSTRUCTION) for t in MIXED_TEXTS])
    assert np.abs(batched - single).max() <= 1e-5
    assert np.abs(small_batches - single).max() <= 1e-5
    # Results come back in input order: every row is distinct and matches its own text.
    assert len({v.tobytes() for v in single}) == len(MIXED_TEXTS)


def test_decoder_keeps_causal_attention(tiny_model_factory):
    """With C fixed, h_C cannot depend on the text after it; under bidirectional attention it would."""
    model = tiny_model_factory("llama")
    fixed = torch.randn(1, 1, model.config.decoder_hidden_size)
    # C is the projector's output on every path (the encode loop runs the encoder ahead of the decoder)
    model.projector.forward = lambda states, mask: fixed.expand(states.size(0), -1, -1)
    a = model.encode(["first text about cats", "a totally different second text"], instruction=INSTRUCTION)
    d = model.config.decoder_hidden_size
    np.testing.assert_array_equal(a[0, :d], a[1, :d])  # h_C: identical
    assert np.abs(a[0, d:] - a[1, d:]).max() > 1e-3  # h_EOS: sees the text


def test_plain_decoder_matches_hugging_face_last_token(tiny_model_factory):
    model = tiny_model_factory("llama", num_contextual_tokens=0, representation="last_token", encoder=None)
    text = "Cats and dogs are popular pets"
    got = model.encode(text, instruction=INSTRUCTION)
    ids = model.tokenizer(INSTRUCTION + "\n" + text + model.tokenizer.eos_token, add_special_tokens=True)["input_ids"]
    with torch.no_grad():
        ref = model.decoder(input_ids=torch.tensor([ids])).last_hidden_state[0, -1].numpy()
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-4)


def test_representations_are_consistent(tiny_model_factory):
    texts = ["one text", "another, longer text about proteins and structures"]
    concat = tiny_model_factory("llama").encode(texts)
    d = concat.shape[1] // 2
    np.testing.assert_allclose(
        tiny_model_factory("llama", representation="average").encode(texts),
        (concat[:, :d] + concat[:, d:]) / 2,
        atol=1e-6,
    )
    np.testing.assert_allclose(
        tiny_model_factory("llama", representation="last_token").encode(texts), concat[:, d:], atol=1e-6
    )
    eos_proj = tiny_model_factory("llama", representation="eos_projector")
    got = eos_proj.encode(texts)
    np.testing.assert_allclose(got[:, :d], concat[:, d:], atol=1e-6)
    pieces, enc = eos_proj.prepare(texts, None)
    batch = eos_proj.collate(pieces, enc)
    with torch.no_grad():
        c = eos_proj.contextual_tokens(batch.encoder_input_ids, batch.encoder_attention_mask)[:, 0]
    np.testing.assert_allclose(got[:, d:], c.numpy(), atol=1e-6)


def test_gemma_scaled_embeddings_scale_the_contextual_token(tiny_model_factory):
    model = tiny_model_factory("gemma3")
    table = model.decoder.get_input_embeddings()
    assert float(table.embed_scale) == pytest.approx(model.config.decoder_hidden_size**0.5)
    pieces, enc = model.prepare(["hello"], None)
    batch = model.collate(pieces, enc)
    with torch.no_grad():
        c = model.contextual_tokens(batch.encoder_input_ids, batch.encoder_attention_mask)
        x = model.decoder_inputs(batch, c)
    torch.testing.assert_close(x[0, int(batch.context_positions[0])], c[0, 0] * table.embed_scale)


def test_several_contextual_tokens(tiny_model_factory):
    model = tiny_model_factory("llama", num_contextual_tokens=3)
    pieces, enc = model.prepare(["a text", "b"], INSTRUCTION)
    batch = model.collate(pieces, enc)
    with torch.no_grad():
        c = model.contextual_tokens(batch.encoder_input_ids, batch.encoder_attention_mask)
        x = model.decoder_inputs(batch, c)
    assert c.shape == (2, 3, model.config.decoder_hidden_size)
    start = int(batch.context_positions[0])
    torch.testing.assert_close(x[0, start : start + 3], c[0])
    single = np.stack([model.encode(t, instruction=INSTRUCTION) for t in ["a text", "b"]])
    np.testing.assert_allclose(model.encode(["a text", "b"], instruction=INSTRUCTION), single, atol=1e-5)


def test_normalize_parts_gives_each_half_unit_norm(tiny_model_factory):
    texts = ["one text", "another, longer text about proteins and structures"]
    raw = tiny_model_factory("llama").encode(texts)
    d = raw.shape[1] // 2
    got = tiny_model_factory("llama", normalize_parts=True).encode(texts)
    expected = np.concatenate(
        [
            raw[:, :d] / np.linalg.norm(raw[:, :d], axis=1, keepdims=True),
            raw[:, d:] / np.linalg.norm(raw[:, d:], axis=1, keepdims=True),
        ],
        axis=1,
    )
    np.testing.assert_allclose(got, expected, atol=1e-6)
    # The cosine of two such vectors is the mean of the halves' cosines: neither half's norm weighs more.
    cos = lambda x, y: float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))  # noqa: E731
    assert cos(got[0], got[1]) == pytest.approx(
        (cos(raw[0, :d], raw[1, :d]) + cos(raw[0, d:], raw[1, d:])) / 2, abs=1e-6
    )
    average = tiny_model_factory("llama", representation="average", normalize_parts=True).encode(texts)
    np.testing.assert_allclose(average, (expected[:, :d] + expected[:, d:]) / 2, atol=1e-6)


def test_normalize_parts_needs_a_two_part_representation():
    from c2v_rag.core.config import Causal2VecConfig

    with pytest.raises(ValueError, match="normalize_parts"):
        Causal2VecConfig(decoder="x", encoder="y", representation="last_token", normalize_parts=True)


def test_contextual_readout_is_h_c_and_skips_the_text(tiny_model_factory):
    texts = ["one text", "another, longer text about proteins and structures"]
    concat = tiny_model_factory("llama").encode(texts, instruction=INSTRUCTION)
    d = concat.shape[1] // 2
    model = tiny_model_factory("llama", representation="contextual")
    np.testing.assert_allclose(model.encode(texts, instruction=INSTRUCTION), concat[:, :d], atol=1e-5)
    # Causal attention: nothing after C reaches h_C, so the decoder input stops at the closing tokens.
    pieces, _ = model.prepare(texts, INSTRUCTION)
    closing = model.prompt_builder._closing
    assert all(p.tail == closing and not p.truncated for p in pieces)
    # Changing the readout back brings the text back, with the same weights.
    model.set_readout(representation="concat")
    np.testing.assert_allclose(model.encode(texts, instruction=INSTRUCTION), concat, atol=1e-5)
    with pytest.raises(ValueError, match="set_readout takes"):
        model.set_readout(max_length=8)


def test_max_seq_length_past_the_decoders_positions_warns(tiny_model_factory):
    """model.max_seq_length = 100000 on SmolLM2 (8,192 positions) read a 9,000-word text without a word."""
    import warnings

    model = tiny_model_factory("llama")
    positions = model.decoder.config.max_position_embeddings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.max_seq_length = positions
    with pytest.warns(UserWarning, match=f"beyond the decoder's {positions} positions"):
        model.max_seq_length = positions + 1
    assert model.max_seq_length == positions + 1


def test_a_changed_readout_or_depth_drops_the_scores_measured_before(tiny_model_factory):
    """Saved with them, a re-weighted variant's model card published the scores of the old readout as its own."""
    model = tiny_model_factory("llama", encoder_share=0.5)
    model.config.metadata = {"name": "mine", "dev_scores": {"stsb-dev": 0.8}}
    model.set_readout(encoder_share=0.5)  # the same readout: the scores still hold
    assert model.config.metadata["dev_scores"] == {"stsb-dev": 0.8}
    model.set_readout(encoder_share=0.25)
    assert model.config.metadata == {"name": "mine"}
    model.config.metadata["dev_scores"] = {"stsb-dev": 0.8}
    model.keep_decoder_layers([0])
    assert model.config.metadata == {"name": "mine"}


def test_projector_rescaled_to_the_word_embeddings_norm(tiny_model_factory):
    from c2v_rag.nn.projector import _PROBE_TEXTS, match_word_embedding_norm

    model = tiny_model_factory("llama")
    before = model.projector.fc2.weight.detach().clone()
    factor = match_word_embedding_norm(model)
    np.testing.assert_allclose(model.projector.fc2.weight.detach().numpy(), before.numpy() * factor, rtol=1e-6)
    pieces, enc = model.prepare(list(_PROBE_TEXTS), None)
    batch = model.collate(pieces, enc)
    with torch.no_grad():
        c = model.contextual_tokens(batch.encoder_input_ids, batch.encoder_attention_mask)
    word_norm = model.decoder.get_input_embeddings().weight.detach().norm(dim=-1).mean()
    assert float(c.norm(dim=-1).mean()) == pytest.approx(float(word_norm), rel=1e-4)


def _encoder_sentence_vectors(model, texts: list[str]) -> np.ndarray:
    """The encoder's mean-pooled states, by hand from the Hugging Face encoder (no c2v_rag batching)."""
    rows = []
    for text in texts:
        enc = model.encoder_tokenizer(text, truncation=True, max_length=model.encoder_max_length, return_tensors="pt")
        with torch.no_grad():
            states = model.encoder(**{k: v for k, v in enc.items() if k != "token_type_ids"}).last_hidden_state[0]
        rows.append(states.mean(0).numpy())
    return np.stack(rows)


@pytest.mark.parametrize("share", [0.25, 0.5])
def test_encoder_share_mixes_the_encoder_vector_into_the_cosine(tiny_model_factory, share):
    texts = ["one text", "another, longer text about proteins and structures", "a third"]
    readout = tiny_model_factory("llama", normalize_parts=True).encode(texts, instruction=INSTRUCTION)
    model = tiny_model_factory("llama", normalize_parts=True, encoder_share=share)
    got = model.encode(texts, instruction=INSTRUCTION)
    sentence = _encoder_sentence_vectors(model, texts)
    k = sentence.shape[1]
    assert got.shape == (3, k + readout.shape[1]) and model.embedding_dim == got.shape[1]
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    np.testing.assert_allclose(got[:, :k], unit(sentence) * share**0.5, atol=1e-5)
    np.testing.assert_allclose(got[:, k:], unit(readout) * (1 - share) ** 0.5, atol=1e-5)
    # The share is the encoder's weight in the cosine, whatever the parts' sizes and norms.
    cos = unit(got) @ unit(got).T
    expected = share * unit(sentence) @ unit(sentence).T + (1 - share) * unit(readout) @ unit(readout).T
    np.testing.assert_allclose(cos, expected, atol=1e-5)
    # A readout field: the same weights read without the encoder give the decoder's readout back.
    model.set_readout(encoder_share=0.0)
    np.testing.assert_allclose(model.encode(texts, instruction=INSTRUCTION), readout, atol=1e-5)


def test_encoder_share_needs_an_encoder():
    from c2v_rag.core.config import Causal2VecConfig

    with pytest.raises(ValueError, match="encoder_share"):
        Causal2VecConfig(decoder="x", num_contextual_tokens=0, representation="last_token", encoder_share=0.5)
    with pytest.raises(ValueError):
        Causal2VecConfig(decoder="x", encoder="y", encoder_share=1.0)


@pytest.mark.real_weights
def test_bf16_decoder_gets_the_same_contextual_token_alone_or_beside_a_longer_text(tiny_dirs):
    """A model built from components (as training builds it) keeps its encoder and projector in float32 under a
    bf16 decoder, so C does not follow the batch's padding. With MiniLM in bf16, C and the sentence vector of 44
    of these 50 texts moved by up to 0.009 beside a longer text; a loaded variant runs its encoder in bf16 all the
    same, within a cosine of 0.999 (test_real_weights.py), for the encoder's cost on such CPUs."""
    from c2v_rag import Causal2Vec

    model = Causal2Vec.from_components(
        str(tiny_dirs["llama"]), "all-minilm-l6-v2", device="cpu", dtype="bfloat16", encoder_share=0.5
    )
    assert model.dtype == torch.bfloat16
    long_text = " ".join(MIXED_TEXTS)
    worst = 0.0
    for text in MIXED_TEXTS[:8]:
        pieces, enc = model.prepare([long_text, text], INSTRUCTION)
        beside, alone = model.collate(pieces, enc), model.collate(pieces[1:], enc[1:])
        with torch.inference_mode():
            got = model.encoder_outputs(beside.encoder_input_ids, beside.encoder_attention_mask)
            want = model.encoder_outputs(alone.encoder_input_ids, alone.encoder_attention_mask)
        worst = max(worst, *(float((g[1] - w[0]).abs().max()) for g, w in zip(got, want)))
    assert worst <= 1e-5, worst


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_prefix_is_the_whole_vector_cut_under_every_dtype(tiny_model_factory, dtype):
    """truncate_dim=k (the encoder's part) computes the encoder alone; the whole vector's first k values, re-
    normalized, must be the same numbers. The encoder computes in float32 under any decoder dtype, so the mix
    must keep its part in float32 too rather than round it to the decoder's dtype."""
    texts = ["one text", "another, longer text about proteins and structures", "a third"]
    probe = tiny_model_factory("llama", normalize_parts=True, encoder_share=0.5)
    k, c = probe.config.parts["encoder"].stop, probe.config.parts["contextual"].stop
    model = tiny_model_factory("llama", normalize_parts=True, encoder_share=0.5, matryoshka_dims=[k, c], dtype=dtype)
    assert model.dtype == getattr(torch, dtype)
    full = model.encode(texts, instruction=INSTRUCTION, normalize_embeddings=True)
    short = model.encode(texts, instruction=INSTRUCTION, truncate_dim=k, normalize_embeddings=True)
    cut = full[:, :k] / np.linalg.norm(full[:, :k], axis=1, keepdims=True)
    np.testing.assert_allclose(short, cut, atol=1e-6)


def test_part_weights_weigh_each_part_in_their_order(tiny_model_factory):
    """part_weights: each part a unit vector times sqrt(its weight), in the order the weights name them; a part
    left out is not in the vector, and the cosine is the weighted sum of the parts' cosines."""
    texts = ["one text", "another, longer text about proteins and structures", "a third"]
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    h_c = tiny_model_factory("llama", representation="contextual").encode(texts, instruction=INSTRUCTION)
    h_eos = tiny_model_factory("llama", representation="last_token").encode(texts, instruction=INSTRUCTION)
    weights = {"encoder": 0.5, "eos": 0.3, "contextual": 0.2}
    model = tiny_model_factory("llama", normalize_parts=True, part_weights=weights)
    sentence = _encoder_sentence_vectors(model, texts)
    got = model.encode(texts, instruction=INSTRUCTION)
    pieces = {"encoder": sentence, "eos": h_eos, "contextual": h_c}
    expected = np.concatenate([unit(pieces[name]) * w**0.5 for name, w in weights.items()], axis=1)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    cos = unit(got) @ unit(got).T
    np.testing.assert_allclose(cos, sum(w * unit(pieces[n]) @ unit(pieces[n]).T for n, w in weights.items()), atol=1e-5)
    # The layout follows the weights: [encoder; h_EOS; h_C], and the encoder prefix is computed alone.
    k, e = sentence.shape[1], h_eos.shape[1]
    assert model.config.parts["eos"] == slice(k, k + e) and model.needs_for(k) == "encoder"
    assert model.needs_for(k + e) == "all"  # h_EOS has read the whole text: no shortcut past the encoder
    # Weights are scaled to sum to 1, and a part left out is not in the vector.
    model.set_readout(part_weights={"encoder": 2.0, "eos": 2.0})
    assert model.config.part_weights == {"encoder": 0.5, "eos": 0.5}
    two = model.encode(texts, instruction=INSTRUCTION)
    np.testing.assert_allclose(two, np.concatenate([unit(sentence), unit(h_eos)], axis=1) * 0.5**0.5, atol=1e-5)


def test_part_weights_refuse_what_they_cannot_mean():
    from c2v_rag.core.config import Causal2VecConfig

    base = {"decoder": "x", "encoder": "y", "normalize_parts": True}
    with pytest.raises(ValueError, match="'projector'.*its parts are \\['encoder', 'contextual', 'eos'\\]"):
        Causal2VecConfig(**base, part_weights={"encoder": 0.5, "projector": 0.5})
    with pytest.raises(ValueError, match="set part_weights alone"):
        Causal2VecConfig(**base, encoder_share=0.5, part_weights={"encoder": 0.5, "eos": 0.5})
    with pytest.raises(ValueError, match="above 0"):
        Causal2VecConfig(**base, part_weights={"encoder": 1.0, "eos": 0.0})
    with pytest.raises(ValueError, match="normalize_parts=true"):
        Causal2VecConfig(decoder="x", encoder="y", part_weights={"contextual": 0.5, "eos": 0.5})
    with pytest.raises(ValueError, match="without an encoder"):
        Causal2VecConfig(decoder="x", num_contextual_tokens=0, representation="last_token", part_weights={"encoder": 1})


def test_another_readout_keeps_the_trained_sizes_that_end_on_whole_parts(tiny_model_factory):
    texts = ["one text", "another, longer text about proteins and structures", "a third"]
    probe = tiny_model_factory("llama", normalize_parts=True, encoder_share=0.5)
    k, c = probe.config.parts["encoder"].stop, probe.config.parts["contextual"].stop
    model = tiny_model_factory("llama", normalize_parts=True, encoder_share=0.5, matryoshka_dims=[k - 1, k, c])
    model.set_readout(part_weights={"encoder": 0.6, "eos": 0.3, "contextual": 0.1})
    assert model.config.matryoshka_dims == [k, c]  # k - 1 cut the encoder's part, which the new mix weighs otherwise
    full = model.encode(texts, instruction=INSTRUCTION, normalize_embeddings=True)
    short = model.encode(texts, instruction=INSTRUCTION, truncate_dim=c, normalize_embeddings=True)
    np.testing.assert_allclose(short, full[:, :c] / np.linalg.norm(full[:, :c], axis=1, keepdims=True), atol=1e-6)
