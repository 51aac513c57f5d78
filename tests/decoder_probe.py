"""What the decoder actually receives: a forward pre-hook on the model's decoder, for layout tests."""

from __future__ import annotations

import torch


def captured_inputs(model, texts, instruction):
    """Run ``model`` on ``texts`` and return (the decoder's inputs_embeds and position_ids, the batch, C)."""
    seen = {}

    def hook(module, args, kwargs):
        seen["embeds"] = kwargs["inputs_embeds"].detach().clone()
        seen["position_ids"] = kwargs["position_ids"].detach().clone()

    handle = model.decoder.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        pieces, enc_ids = model.prepare(texts, instruction)
        batch = model.collate(pieces, enc_ids)
        with torch.no_grad():
            contextual = model.contextual_tokens(batch.encoder_input_ids, batch.encoder_attention_mask)
            model(batch)
    finally:
        handle.remove()
    return seen, batch, contextual
