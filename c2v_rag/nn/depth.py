"""A shallower decoder: running a chosen subset of a backbone's transformer layers.

A variant's ``decoder_layers`` (:class:`~c2v_rag.core.config.Causal2VecConfig`) names the base decoder's layers it
runs, by their index in the base model. Dropping the middle layers that change the hidden state least (ShortGPT,
Men et al. 2024) cuts the decoder's cost in proportion, and a short training run of the variant's recipe heals
what they carried; docs/performance.md gives what it saves and costs.

Here is the one operation all of that needs: keep some of a backbone's layers, in order. It works on transformers'
decoders whose blocks are ``.layers`` (Llama, Mistral, Qwen2, ...), on the plain-torch forward
(:mod:`c2v_rag.nn.plain`) and on either of them wrapped by peft; the kept layers are renumbered 0..n-1, as a model
saved with that many layers numbers them, so a merged backbone or an adapter saved after the cut loads into a
backbone cut the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from torch import nn

from c2v_rag.nn.backbone import backbone_config


def transformer_layers(backbone: nn.Module) -> nn.ModuleList:
    """The ``.layers`` list of ``backbone``'s transformer blocks (looked for through peft's wrappers), or a
    ValueError that says which decoders have one."""
    return cast(nn.ModuleList, _layers_owner(backbone).layers)


def _layers_owner(backbone: nn.Module) -> nn.Module:
    """The module of ``backbone`` that holds its blocks as ``.layers`` and runs as many as its config says."""
    for module in backbone.modules():
        # its own submodule, not an attribute forwarded to a wrapped model (peft's wrappers forward them)
        if isinstance(module._modules.get("layers"), nn.ModuleList) and hasattr(module, "config"):
            return module
    raise ValueError(
        f"decoder_layers needs a decoder whose transformer blocks are a '.layers' list (Llama, Mistral, Qwen2, "
        f"SmolLM...); {type(backbone).__name__} has none. Leave decoder_layers unset (all layers) for this decoder"
    )


def keep_layers(backbone: nn.Module, positions: Sequence[int]) -> None:
    """Keep the transformer layers of ``backbone`` at ``positions`` (indices into its current ``.layers``, in
    increasing order), in place; the others are dropped.

    The module holding the list gets ``config.num_hidden_layers`` (transformers runs that many) and, where the
    config has them, ``layer_types`` to match; each kept attention block's ``layer_idx`` becomes its new position.
    """
    owner = _layers_owner(backbone)
    layers = cast(nn.ModuleList, owner.layers)
    count = len(layers)
    positions = list(positions)
    if not positions or positions != sorted(set(positions)) or positions[0] < 0 or positions[-1] >= count:
        raise ValueError(
            f"cannot keep layers {positions} of a decoder with {count}: give distinct indices from 0 to {count - 1}, "
            "in increasing order"
        )
    owner.layers = nn.ModuleList(layers[i] for i in positions)
    config = backbone_config(owner)
    config.num_hidden_layers = len(positions)
    layer_types = getattr(config, "layer_types", None)
    if isinstance(layer_types, list) and len(layer_types) == count:
        config.layer_types = [layer_types[i] for i in positions]
    for new_index, layer in enumerate(owner.layers):
        attention = getattr(layer, "self_attn", None)
        if attention is not None and hasattr(attention, "layer_idx"):
            attention.layer_idx = new_index


def narrowing(current: Sequence[int] | None, wanted: Sequence[int], base_count: int | None = None) -> list[int]:
    """Where the base layers ``wanted`` sit among a decoder that runs the base layers ``current`` (None: all of
    them, ``base_count`` if known): the positions :func:`keep_layers` takes. A ValueError names a wanted layer
    the decoder no longer has."""
    if current is None:
        if base_count is not None and any(i >= base_count for i in wanted):
            raise ValueError(
                f"decoder_layers={list(wanted)} names layers the base decoder does not have: it has {base_count} "
                f"(0 to {base_count - 1})"
            )
        return list(wanted)
    missing = [i for i in wanted if i not in current]
    if missing:
        raise ValueError(
            f"decoder_layers={list(wanted)} names base layers {missing} that this variant no longer runs (it runs "
            f"{list(current)}); a shallower variant can only drop more of them"
        )
    return [list(current).index(i) for i in wanted]
