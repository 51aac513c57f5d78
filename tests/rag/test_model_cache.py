"""The shared model cache: every caller naming a model gets the one loaded object, and ``max_length`` is
applied per call rather than through a second module object over the same backbones."""

from __future__ import annotations

import numpy as np
from rag_helpers import make_text

from c2v_rag.rag import DEFAULT_QUERY_TASK, EmbedderOptions


def module_states(model) -> dict[str, tuple[int, bool]]:
    """Each submodule of ``model`` by name: which object it is, and whether it is in training mode."""
    return {name: (id(module), module.training) for name, module in model.named_modules()}


def test_max_length_hands_out_no_second_module_over_the_shared_backbones(tiny_variant, tiny_model):
    options = EmbedderOptions(model=str(tiny_variant), max_length=48)
    before = module_states(tiny_model)
    handed = [model for model in (options.loaded_model(), options.embedder().model) if model is not tiny_model]
    # A module of its own that shares the cached model's submodules would, once trained, put the shared
    # backbones in training mode (dropout on for every other caller) or swap them for their transformers
    # modules (Causal2Vec.train): a shallow copy of the model did both.
    for model in handed:
        model.train()
    assert module_states(tiny_model) == before
    assert not handed, "max_length built another model object over the shared one"


def test_max_length_truncates_per_call_and_leaves_the_shared_model_as_it_was(
    tiny_variant, tiny_model, tiny_model_factory
):
    long_text = make_text(9, sentences=20)
    before = module_states(tiny_model)
    embedder = EmbedderOptions(model=str(tiny_variant), max_length=48, normalize=False).embedder()
    # Same seed and base weights, so the same model, built with max_length=48 in its config.
    reference = tiny_model_factory("llama", max_length=48, dtype=str(tiny_model.dtype).removeprefix("torch."))
    np.testing.assert_allclose(
        embedder.embed_documents([long_text])[0], reference.encode_documents(long_text), atol=1e-5
    )
    np.testing.assert_allclose(
        embedder.embed_query(long_text), reference.encode_queries(long_text, task=DEFAULT_QUERY_TASK), atol=1e-5
    )
    # The shared model still reads its own 128 tokens, in eval mode, with the same modules.
    assert (tiny_model.max_seq_length, tiny_model.config.max_length) == (128, 128)
    assert module_states(tiny_model) == before
    assert not np.allclose(tiny_model.encode_documents(long_text), reference.encode_documents(long_text), atol=1e-3)


def test_a_variant_saved_again_over_its_folder_is_loaded_again(tiny_model_factory, tmp_path, corpus, ingest_config):
    """A notebook that retrains a variant and saves it over the same folder, then ingests with it, gets the new
    weights: the shared model is reloaded when the files it was loaded from are no longer what they were (its
    weights, adapter configs or base models), not handed out from the cache by the folder's name."""
    import torch

    import c2v_rag
    from c2v_rag.rag import load_model

    folder = tmp_path / "variant"
    first = tiny_model_factory("llama", max_length=128)
    first.save_pretrained(folder)
    c2v_rag.ingest(corpus[:2], path=tmp_path / "store", collection="first", model=folder, config=ingest_config)
    held = load_model(folder, device="cpu")
    assert load_model(folder, device="cpu") is held  # unchanged files: the shared object

    with torch.no_grad():
        for parameter in first.projector.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    first.save_pretrained(folder)  # retrained, saved over the same folder
    result = c2v_rag.ingest(corpus[:2], path=tmp_path / "store", collection="second", model=folder,
                            config=ingest_config)  # fmt: skip
    assert result.chunks_written > 0
    reloaded = load_model(folder, device="cpu")
    assert reloaded is not held and reloaded.weights_digest != held.weights_digest
    texts = [corpus[0]["text"]]
    np.testing.assert_allclose(
        reloaded.encode_documents(texts), first.encode_documents(texts), atol=1e-5
    )  # the new weights, not the held ones
    hits = c2v_rag.search("tides", top_k=3, path=tmp_path / "store", collection="second", model=folder)
    assert hits
