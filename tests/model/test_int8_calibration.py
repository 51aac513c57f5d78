"""A variant folder that ships its int8 calibration: a first int8 load builds its graphs without calibrating."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from c2v_rag import Causal2Vec  # noqa: E402
from c2v_rag.core.config import read_config  # noqa: E402
from c2v_rag.cpu import int8 as int8_module  # noqa: E402
from c2v_rag.hub.variants import _shipped_maxima  # noqa: E402
from c2v_rag.model.int8_calibration import write_int8_calibration  # noqa: E402

TEXTS = ["a short text", "a somewhat longer text about tides and the moon", "queries and documents"]


@pytest.fixture
def variant(tiny_model_factory, tmp_path, monkeypatch):
    from tiny_models import with_lora

    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))
    model = with_lora(tiny_model_factory("llama", max_length=128), "encoder", std=2.0)
    return model.save_pretrained(tmp_path / "variant")


def _calibrating(monkeypatch) -> list[int]:
    """Count the calibrations the int8 build runs (the shipped maxima spare them)."""
    calls: list[int] = []
    original = int8_module.input_maxima

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(int8_module, "input_maxima", counted)
    return calls


def test_a_shipped_calibration_builds_the_graphs_a_float32_calibration_builds(variant, monkeypatch):
    path = write_int8_calibration(variant)
    assert path == variant / int8_module.SHIPPED_MAXIMA_FILE and path.stat().st_size > 0
    calls = _calibrating(monkeypatch)
    shipped = Causal2Vec.from_pretrained(variant, device="cpu", quantize="int8")
    assert calls == [] and shipped.quantization == int8_module.INT8_METHOD
    # The same maxima a float32 calibration here gives, so the same graph and vectors, under another cache key.
    monkeypatch.setattr(int8_module, "calibration_precision", lambda: "fp32")
    (variant / int8_module.SHIPPED_MAXIMA_FILE).unlink()
    calibrated = Causal2Vec.from_pretrained(variant, device="cpu", quantize="int8")
    assert calls == [1] and calibrated.decoder.path != shipped.decoder.path
    np.testing.assert_array_equal(
        shipped.encode(TEXTS, normalize_embeddings=True), calibrated.encode(TEXTS, normalize_embeddings=True)
    )


def test_a_variant_changed_since_its_calibration_calibrates_again(variant, monkeypatch, caplog):
    write_int8_calibration(variant)
    changed = variant.parent / "changed"
    shutil.copytree(variant, changed)
    adapter_config = changed / "encoder_adapter" / "adapter_config.json"
    config = json.loads(adapter_config.read_text())
    config["lora_alpha"] = config["lora_alpha"] / 2  # other merged weights from the same files
    adapter_config.write_text(json.dumps(config))
    assert _shipped_maxima(variant, read_config(variant)) is not None
    with caplog.at_level(logging.DEBUG, logger=int8_module.__name__):
        assert _shipped_maxima(changed, read_config(changed)) is None
    assert "made for other weights" in caplog.text
    calls = _calibrating(monkeypatch)
    Causal2Vec.from_pretrained(changed, device="cpu", quantize="int8")
    assert calls == [1]


def test_an_unreadable_calibration_file_is_said_and_calibrated_around(variant, monkeypatch, caplog):
    (variant / int8_module.SHIPPED_MAXIMA_FILE).write_bytes(b"not safetensors")
    calls = _calibrating(monkeypatch)
    with caplog.at_level(logging.WARNING, logger=int8_module.__name__):
        model = Causal2Vec.from_pretrained(variant, device="cpu", quantize="int8")
    assert calls == [1] and model.quantization == int8_module.INT8_METHOD
    assert "could not read" in caplog.text and int8_module.SHIPPED_MAXIMA_FILE in caplog.text


@pytest.mark.real_weights
def test_the_preset_ships_a_calibration_made_for_its_files():
    # Stale after the preset or the calibration texts change: experiments/package_preset.py writes it anew.
    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.hub.variants import VariantDigests

    directory = resolve_variant_path(None)
    config = read_config(directory)
    made_on = int8_module.shipped_bases(directory / int8_module.SHIPPED_MAXIMA_FILE)
    here = VariantDigests.of_directory(directory, config).bases
    if made_on != here:  # another release of a base package, or of transformers that converts the GGUF: loads calibrate
        pytest.skip(f"the base models here ({here}) are not those the calibration was made on ({made_on})")
    shipped = _shipped_maxima(directory, config)
    assert shipped is not None, "stale: write it again with c2v_rag.model.int8_calibration.write_int8_calibration"
    # every linear layer of the decoder: q, k, v, o, gate, up and down in each of SmolLM2-135M's layers
    from c2v_rag.hub.sources import resolve_reference

    base = json.loads((Path(resolve_reference("smollm2-135m-instruct").location) / "config.json").read_text())
    assert len(shipped.maxima) == 7 * base["num_hidden_layers"]
    assert shipped.maxima["layers.29.mlp.down_proj"].shape == (base["intermediate_size"],)
