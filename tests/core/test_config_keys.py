"""Cache entries named from a variant's config (its int8 graphs, the alias a load finds them by, the benchmark
collections) keep their names when Causal2VecConfig gains a field: a field added at its default is left out of
Causal2VecConfig.key_json (KEYED_SINCE). decoder_layers, added without that, renamed every entry once, so every
user's int8 graphs were calibrated again on their next load."""

from __future__ import annotations

import hashlib
import json

from c2v_rag.core.config import KEYED_SINCE, read_config
from c2v_rag.hub.presets import resolve_variant_path

# sha256 (16 hex digits) of the shipped preset's config as its cache entries have been named since before
# decoder_layers existed (checked against that commit's model_dump_json). A new config field changes it unless
# KEYED_SINCE lists it; a change to the preset's own config file changes it too, and then this value with it.
PRESET_KEY = "141e8a858539d1c2"


def test_the_preset_names_its_cache_entries_as_before_fields_were_added():
    config = read_config(resolve_variant_path(None))
    assert hashlib.sha256(config.key_json().encode()).hexdigest()[:16] == PRESET_KEY, (
        "the preset's key_json changed: a field added to Causal2VecConfig with a default belongs in KEYED_SINCE "
        "(core/config.py), or every cached int8 graph is built again"
    )


def test_a_field_added_since_counts_once_it_is_set():
    config = read_config(resolve_variant_path(None))
    unset = json.loads(config.key_json())
    assert not set(KEYED_SINCE) & set(unset)
    cut = json.loads(config.model_copy(update={"decoder_layers": [0, 2, 5]}).key_json())
    assert cut["decoder_layers"] == [0, 2, 5] and {k: v for k, v in cut.items() if k != "decoder_layers"} == unset
