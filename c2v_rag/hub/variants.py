"""Saving and loading variant directories.

A variant directory holds::

    causal2vec_config.json     references to the base decoder and encoder, dims, options
    projector.safetensors      the projector's weights
    decoder_adapter/           LoRA adapter in peft format (optional)
    encoder_adapter/           LoRA adapter in peft format (optional)
    modules.json, config_sentence_transformers.json, causal2vec_st_module.json
                               what sentence-transformers reads (c2v_rag.hub.st_files);
                               variants saved before them load here all the same

Base weights are referenced, not copied. Only safetensors are read: no pickles, ever.

The model is whatever class the caller passes (:class:`~c2v_rag.model.causal2vec.Causal2Vec`, whose
``from_pretrained`` and ``save_pretrained`` call in here): this module sits below the model and
names only what it uses of one, :class:`VariantModel`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import torch

from c2v_rag.core.config import CONFIG_FILE, Causal2VecConfig, read_config
from c2v_rag.core.errors import MissingPackageError, ModelSourceError, VariantLoadError
from c2v_rag.hub.merged import find_merged, merged_key, store_merged
from c2v_rag.hub.plain_weights import plain_forward_enabled
from c2v_rag.hub.presets import resolve_variant_path
from c2v_rag.hub.sources import content_digests, resolve_reference
from c2v_rag.hub.st_files import write_st_files

if TYPE_CHECKING:
    from c2v_rag.cpu.int8 import Int8Graphs, ShippedMaxima

logger = logging.getLogger(__name__)

PROJECTOR_FILE = "projector.safetensors"
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")

ModelT = TypeVar("ModelT", bound="VariantModel")


class VariantModel(Protocol):
    """What loading and saving a variant use of a model; :class:`~c2v_rag.model.causal2vec.Causal2Vec` is one."""

    adapter_sources: dict[str, Path]
    weights_digest: str | None
    adapters_digest: str | None
    bases_digests: dict[str, str] | None

    # Read-only here (properties), so that a model may narrow their types.
    @property
    def config(self) -> Causal2VecConfig: ...
    @property
    def decoder(self) -> torch.nn.Module: ...
    @property
    def encoder(self) -> torch.nn.Module | None: ...
    @property
    def projector(self) -> torch.nn.Module | None: ...

    @property
    def device(self) -> torch.device: ...

    @classmethod
    def from_config(
        cls: type[ModelT],
        config: Causal2VecConfig,
        *,
        device: str | torch.device | None,
        dtype: str | torch.dtype | None,
        backbones: Mapping[str, Path] | None = None,
        plain: Collection[str] = (),
    ) -> ModelT: ...

    def to(self: ModelT, device: torch.device) -> ModelT: ...

    def eval(self: ModelT) -> ModelT: ...

    def apply_quantization(
        self: ModelT, quantize: str | None, *, cache_dir: Path | None = None, shipped: ShippedMaxima | None = None
    ) -> ModelT: ...

    def use_int8_graphs(self: ModelT, graphs: Int8Graphs) -> ModelT: ...

    def encoder_to_decoder_dtype(self: ModelT) -> ModelT: ...


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    if not path.is_file():
        raise VariantLoadError(f"{path} is missing from the variant directory")
    try:
        return load_file(str(path))
    except Exception as err:  # safetensors raises several types for truncated or garbled files
        raise VariantLoadError(f"{path} is corrupt and cannot be read as safetensors: {err}") from err


def _check_adapter(directory: Path) -> None:
    for name in ADAPTER_FILES:
        if not (directory / name).is_file():
            raise VariantLoadError(f"{directory / name} is missing from the variant directory")
    try:
        json.loads((directory / ADAPTER_FILES[0]).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise VariantLoadError(f"{directory / ADAPTER_FILES[0]} is corrupt: {err}") from err
    _read_safetensors(directory / ADAPTER_FILES[1])


def _attach_adapter(module: torch.nn.Module, directory: Path, merge: bool) -> torch.nn.Module:
    from peft import PeftModel

    _check_adapter(directory)
    try:
        with warnings.catch_warnings():
            # peft reads transformers 5's deprecated `is_gradient_checkpointing`; the FutureWarning is
            # theirs to fix and told every user loading a preset nothing they could act on.
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            wrapped = PeftModel.from_pretrained(module, str(directory), is_trainable=not merge)
    except Exception as err:
        raise VariantLoadError(f"the LoRA adapter in {directory} does not fit its base model: {err}") from err
    return wrapped.merge_and_unload() if merge else wrapped


def weights_digest(directory: Path) -> str | None:
    """A short sha256 over the weight files a variant adds to its base models (projector, adapters).

    Collections record it, so that vectors are never searched with another model that shares the
    base models, dims and readout (a retrained preset under the same name, say). None when the
    directory adds no weights. Computed once per process for the files' current size and mtime: an
    ingest checks the collection with it before the weights load, and the load needs it again.
    """
    files = [directory / PROJECTOR_FILE] + [
        directory / f"{role}_adapter" / ADAPTER_FILES[1] for role in ("decoder", "encoder")
    ]
    present = [file for file in files if file.is_file()]
    key = (str(directory.resolve()), tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in present))
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        for file in present:
            digest.update(file.relative_to(directory).as_posix().encode())
            with file.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        _DIGESTS[key] = digest.hexdigest()[:16] if present else None
    return _DIGESTS[key]


_DIGESTS: dict[tuple[str, tuple[tuple[str, int, int], ...]], str | None] = {}

# What an adapter's config says of how its weights apply (peft's LoRA merge reads these): the same weight files
# under another rank pattern, scale or target set are another model. Only these fields, so that a peft release
# that writes other fields (its version, a new option at its default) leaves a variant's digest as it was.
ADAPTER_WEIGHT_FIELDS = (
    "peft_type",
    "r",
    "lora_alpha",
    "use_rslora",
    "use_dora",
    "rank_pattern",
    "alpha_pattern",
    "target_modules",
    "exclude_modules",
    "target_parameters",
    "layers_to_transform",
    "layers_pattern",
    "modules_to_save",
    "fan_in_fan_out",
    "bias",
    "lora_bias",
)


def adapters_digest(directory: Path) -> str | None:
    """A short sha256 over what the variant's adapter configs say of how their weights apply
    (:data:`ADAPTER_WEIGHT_FIELDS`: rank, scale, targets), None when it has no adapter.

    :func:`weights_digest` covers the weight files alone: two variants with the same files and another
    ``lora_alpha`` (an adapter scaled toward its base, WiSE-FT) share it, yet make other vectors. Collections record
    this beside it (``adapters``) and the int8 graphs are found by both. Fields at a false value (None, False, empty)
    count as absent, and ``target_modules`` as a set (peft writes it in any order)."""
    found = {}
    for role in ("decoder", "encoder"):
        file = directory / f"{role}_adapter" / ADAPTER_FILES[0]
        if not file.is_file():
            continue
        try:
            config = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise VariantLoadError(f"{file} is not a readable adapter config: {err}") from err
        fields = {name: config[name] for name in ADAPTER_WEIGHT_FIELDS if config.get(name)}
        if isinstance(fields.get("target_modules"), list):
            fields["target_modules"] = sorted(fields["target_modules"])
        found[role] = fields
    if not found:
        return None
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()[:16]


def base_roles(config: Causal2VecConfig) -> tuple[str, ...]:
    """The base models a variant runs: its decoder, and its encoder where it has a Contextual token."""
    return ("decoder", "encoder") if config.num_contextual_tokens else ("decoder",)


def bases_digests(config: Causal2VecConfig) -> dict[str, str] | None:
    """The content digest (:meth:`~c2v_rag.hub.sources.ResolvedSource.content_digest`) of each base model the
    variant runs, by role (``decoder``, ``encoder``), where it is a local directory, a packaged alias or a hub id
    whose snapshot is in the local Hugging Face cache; None when none is. A loaded model has its own, taken as it loaded
    (``Causal2Vec.bases_digests``).

    The variant's references name its bases, not their weights: collections record this beside them, so that a
    base replaced with other weights (a package release that converts its GGUF otherwise, a checkpoint saved over
    another) is never used to search vectors the old one made."""
    sources = {}
    for role in base_roles(config):
        reference = getattr(config, role)
        if reference is None:
            continue
        try:
            sources[role] = resolve_reference(reference, getattr(config, f"{role}_revision"))
        except (ModelSourceError, MissingPackageError) as err:
            # Not here: a Ray driver whose nodes hold the weights. Nothing to record of it; a load here would fail
            # with this error anyway, and says it then.
            logger.debug("no digest of the %s base %r: %s", role, reference, err)
    return content_digests(sources)


@dataclass(frozen=True)
class VariantDigests:
    """What tells a variant's vectors from another's with the same config, as a collection records it: its own
    weight files (:func:`weights_digest`), how its adapters apply (:func:`adapters_digest`) and the contents of
    the base models it names (:func:`bases_digests`). None where there is nothing to tell (no weights of its own, no
    adapter, hub bases)."""

    weights: str | None = None
    adapters: str | None = None
    bases: dict[str, str] | None = None

    @classmethod
    def of_directory(cls, directory: Path, config: Causal2VecConfig) -> VariantDigests:
        """A saved variant's, read before its weights load (its bases as their files are now)."""
        return cls(weights_digest(directory), adapters_digest(directory), bases_digests(config))

    @classmethod
    def of_model(cls, model: VariantModel) -> VariantDigests:
        """A loaded model's, as it was loaded."""
        return cls(model.weights_digest, model.adapters_digest, model.bases_digests)


def load_variant(
    cls: type[ModelT],
    name_or_path: str | Path | None,
    *,
    device: str | torch.device | None,
    dtype: str | torch.dtype | None,
    merge_adapters: bool,
    quantize: str | None = None,
) -> ModelT:
    """A ``cls`` model built from the variant directory or preset ``name_or_path`` (see ``Causal2Vec.from_pretrained``).

    Merged adapters are read from the cache of merged backbones when it holds them (:mod:`c2v_rag.hub.merged`),
    and put there when it does not: the same tensors either way.

    A backbone whose weights are final once read (no adapter, or its merged copy from the cache) may run the
    plain-torch forward (:mod:`c2v_rag.nn.plain`, where it is exact; ``C2V_RAG_PLAIN_FORWARD=0`` turns it off):
    it needs no import of transformers' modeling code, seconds of every process that loads a model.
    """  # noqa: E501
    directory = resolve_variant_path(name_or_path)
    config = read_config(directory)
    projector_state = _read_safetensors(directory / PROJECTOR_FILE) if config.num_contextual_tokens else None
    # Quantized after the adapters merge into the float weights (below), so checked for dtype first.
    from c2v_rag.core.devices import resolve_compute_dtype, resolve_device, resolve_quantize
    from c2v_rag.core.memory import keep_freed_memory

    target = resolve_device(device)
    dtype = resolve_compute_dtype(dtype if dtype is not None else config.dtype, target, quantize)
    if merge_adapters and target.type == "cpu":  # loaded for inference
        keep_freed_memory()
    digest = weights_digest(directory)
    adapter_digest = adapters_digest(directory)
    adapters = {
        role: directory / relative
        for role in ("decoder", "encoder")
        if (relative := getattr(config, f"{role}_adapter"))
    }
    keys: dict[str, str | None] = {}
    if merge_adapters:
        keys = {role: _merged_key(config, digest, role, path, dtype, target) for role, path in adapters.items()}
    cached = {role: found for role, key in keys.items() if (found := find_merged(key)) is not None}
    plain = [role for role in ("decoder", "encoder") if role not in adapters or role in cached]
    int8 = resolve_quantize(quantize, target) != "none"
    # The calibration the folder ships for these files, if any and valid: the graphs' build then skips calibrating.
    shipped = _shipped_maxima(directory, config) if int8 and merge_adapters else None
    # int8 graphs built earlier from these files: no export, so no need of transformers' modules or of hashing them
    alias, graphs = _int8_graphs(digest, adapter_digest, config, shipped) if int8 and merge_adapters else (None, None)
    if not (merge_adapters and plain_forward_enabled()) or (int8 and graphs is None):
        plain = []  # adapters to attach, or int8 to export: both work on transformers' modules
    model = cls.from_config(config, device=device, dtype=dtype, backbones=cached, plain=plain)
    if projector_state is not None:
        assert model.projector is not None  # a model with Contextual tokens is built with its projector
        try:
            model.projector.load_state_dict(projector_state)
        except RuntimeError as err:
            raise VariantLoadError(f"{directory / PROJECTOR_FILE} does not match the config: {err}") from err
    for role, adapter_dir in adapters.items():
        if role not in cached:
            setattr(model, role, _attach_adapter(getattr(model, role), adapter_dir, merge_adapters))
            if merge_adapters:
                store_merged(getattr(model, role), keys[role])
        if merge_adapters:
            model.adapter_sources[role] = adapter_dir
    model.weights_digest = digest
    model.adapters_digest = adapter_digest
    model = model.to(model.device).eval()
    if merge_adapters:  # for inference; the merged entries above hold the float32 merge, as training reads it
        model.encoder_to_decoder_dtype()
    if graphs is not None:
        return model.use_int8_graphs(graphs)
    model.apply_quantization(quantize, shipped=shipped)
    if alias is not None:
        from c2v_rag.cpu.int8 import Int8Graphs, record_int8_graphs
        from c2v_rag.cpu.onnx_decoder import OnnxDecoder

        decoder = model.decoder
        if isinstance(decoder, OnnxDecoder):  # what apply_quantization built (or read) for these files
            record_int8_graphs(alias, Int8Graphs(decoder.path, getattr(model.encoder, "path", None)))
    return model


def _int8_graphs(
    digest: str | None, adapter_digest: str | None, config: Causal2VecConfig, shipped: ShippedMaxima | None = None
) -> tuple[str | None, Int8Graphs | None]:
    """The alias of a variant's int8 graphs (:func:`c2v_rag.cpu.int8.variant_alias`; None without a digest)
    and the graphs noted under it, if any; graphs built from ``shipped`` maxima have their own."""
    if digest is None:
        return None, None
    from c2v_rag.core.extras import require

    require("onnxruntime", "quantize='int8'", "int8")  # before any weights load
    from c2v_rag.cpu.int8 import encoder_runs_in_bf16, find_int8_graphs, variant_alias

    # The graphs hold the bases' weights with the adapters merged in: a base replaced in place (a package upgrade)
    # names other graphs. A hub base's files are not known before it loads: no alias, the graphs' own keys decide.
    roles = base_roles(config)
    stamps = [resolve_reference(getattr(config, r), getattr(config, f"{r}_revision")).file_stamps() for r in roles]
    if any(s is None for s in stamps):
        return None, None
    alias = variant_alias(
        digest, config.key_json(), adapter_digest, json.dumps(stamps), shipped.key if shipped is not None else None
    )
    return alias, find_int8_graphs(alias, encoder="encoder" in roles and not encoder_runs_in_bf16())


def int8_calibration_key(
    directory: Path, config: Causal2VecConfig, digests: VariantDigests | None = None
) -> str | None:
    """What a variant's shipped calibration is made for (:func:`c2v_rag.cpu.int8.shipped_maxima_key`): its digests
    as every machine computes them alike (its files, its adapters, its bases' contents) and its config. None where a
    base's contents are not known before it loads (a hub id not in the local cache): nothing then tells whether the
    maxima fit.
    ``digests``: the folder's, where the caller has them already (reading them hashes its weight files)."""
    from c2v_rag.cpu.int8 import shipped_maxima_key

    if digests is None:
        digests = VariantDigests.of_directory(directory, config)
    if digests.weights is None or digests.bases is None or set(digests.bases) != set(base_roles(config)):
        return None
    variant = {"weights": digests.weights, "adapters": digests.adapters, "bases": digests.bases}
    return shipped_maxima_key(json.dumps(variant, sort_keys=True) + "\n" + config.key_json())


def _shipped_maxima(directory: Path, config: Causal2VecConfig) -> ShippedMaxima | None:
    """The variant folder's shipped calibration (:data:`c2v_rag.cpu.int8.SHIPPED_MAXIMA_FILE`) when it was made for
    the folder's files as they are now; None otherwise (the load then calibrates)."""
    from c2v_rag.cpu.int8 import SHIPPED_MAXIMA_FILE, read_shipped_maxima

    path = directory / SHIPPED_MAXIMA_FILE
    if not path.is_file():
        return None
    key = int8_calibration_key(directory, config)
    return read_shipped_maxima(path, key) if key is not None else None


def _merged_key(
    config: Causal2VecConfig, digest: str | None, role: str, adapter: Path, dtype: torch.dtype, device: torch.device
) -> str | None:
    base = resolve_reference(getattr(config, role), getattr(config, f"{role}_revision"))
    layers = config.decoder_layers if role == "decoder" else None
    return merged_key(digest, role, adapter, base, dtype, device, layers)


def save_variant(model: VariantModel, path: Path, *, sentence_transformers: bool = True) -> Path:
    """Write ``model`` to ``path``; with ``sentence_transformers`` also the files that make the
    directory a sentence-transformers model (:func:`c2v_rag.hub.st_files.write_st_files`)."""
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    config = model.config.model_copy(deep=True)
    for role in ("decoder", "encoder"):
        module = getattr(model, role)
        target = path / f"{role}_adapter"
        if hasattr(module, "peft_config"):
            module.save_pretrained(str(target), safe_serialization=True, save_embedding_layers=False)
            setattr(config, f"{role}_adapter", target.name)
        elif role in model.adapter_sources:
            source = model.adapter_sources[role]
            if source.resolve() != target.resolve():
                shutil.copytree(source, target, dirs_exist_ok=True)
            setattr(config, f"{role}_adapter", target.name)
        else:
            setattr(config, f"{role}_adapter", None)
            continue
        _name_base(target, getattr(config, role))
    if model.projector is not None:
        # Stored in float32 whatever the compute dtype: upcasting is lossless and loads into any dtype.
        state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.projector.state_dict().items()}
        save_file(state, str(path / PROJECTOR_FILE))
        (path / PROJECTOR_FILE).chmod(0o644)  # safetensors writes 0600; a variant is shared like any model
    (path / CONFIG_FILE).write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if sentence_transformers:
        write_st_files(path, config)
    model.weights_digest = weights_digest(path)
    model.adapters_digest = adapters_digest(path)
    return path


def _name_base(adapter_dir: Path, reference: str | None) -> None:
    """Write the base model's reference as the config names it (a packaged alias, a hub id) into the adapter's
    ``adapter_config.json``, where peft records the local folder it loaded the base from: a variant then carries
    no path of the machine that saved it, and peft finds nothing to warn about where it is loaded."""
    config_file = adapter_dir / ADAPTER_FILES[0]
    if reference is None or not config_file.is_file():
        return
    adapter = json.loads(config_file.read_text(encoding="utf-8"))
    if adapter.get("base_model_name_or_path") != reference:
        adapter["base_model_name_or_path"] = reference
        config_file.write_text(json.dumps(adapter, indent=2) + "\n", encoding="utf-8")
