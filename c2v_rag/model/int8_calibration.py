"""A variant's int8 calibration, made once where it is packaged and shipped in its folder.

A first int8 load builds the graphs, and most of that is calibrating: the float model encodes the calibration
texts so that SmoothQuant's factors can be read off each linear layer's inputs (:mod:`c2v_rag.cpu.int8`). The
maxima are statistics of the variant's own weights, the same on every machine within float rounding, so a folder
that ships them (:data:`~c2v_rag.cpu.int8.SHIPPED_MAXIMA_FILE`) spares each machine its own calibration. A load
uses them only for the files they were made for (:func:`~c2v_rag.hub.variants.int8_calibration_key`); a variant
retrained or edited since calibrates as if they were not there.
"""

from __future__ import annotations

from pathlib import Path

from c2v_rag.core.config import read_config
from c2v_rag.hub.presets import resolve_variant_path
from c2v_rag.hub.variants import VariantDigests, int8_calibration_key


def write_int8_calibration(variant: str | Path) -> Path:
    """Calibrate a saved variant (a folder or preset name) for int8 in float32, as a first int8 load on an AVX2 CPU
    would, and save the maxima in its folder; returns the file's path."""
    from c2v_rag.cpu.int8 import SHIPPED_MAXIMA_FILE, input_maxima, write_shipped_maxima
    from c2v_rag.model.causal2vec import Causal2Vec

    directory = resolve_variant_path(variant)
    config = read_config(directory)
    digests = VariantDigests.of_directory(directory, config)
    key = int8_calibration_key(directory, config, digests)
    if key is None:
        raise ValueError(
            f"{directory}: a variant without weights of its own, or with a base on the hub (whose contents are not "
            "known before it loads), cannot ship a calibration"
        )
    model = Causal2Vec.from_pretrained(directory, device="cpu", dtype="float32")
    model.use_transformers_backbones()  # calibrated on the modules a first int8 load builds from (same maxima)
    path = directory / SHIPPED_MAXIMA_FILE
    write_shipped_maxima(path, input_maxima(model, precision="fp32"), key, digests.bases)
    return path
