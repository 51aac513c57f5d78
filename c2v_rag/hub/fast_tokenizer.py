"""Tokenizing with the ``tokenizers`` library alone, where transformers' tokenizer would give the same ids.

Importing transformers and building ``AutoTokenizer`` took about 0.9 CPU s of every ``c2v-rag search``
(docs/performance.md), though the ids come from a Rust ``tokenizers.Tokenizer`` either way. transformers'
fast tokenizer (``TokenizersBackend``) builds that Tokenizer (from ``tokenizer.json``, or, for a class with an
``__init__`` of its own such as ``BertTokenizer``, rebuilt from the vocabulary with the normalizer its config
asks for), adds the special tokens its config names and sets the post-processor (BOS, EOS, ``[CLS]``...); a
call then sets the truncation and runs ``encode_batch``. Rebuilding all that by hand would mean following each
class's rules. Instead the first load, through transformers, saves what transformers built: the Tokenizer as
``tokenizers`` serializes it, and the attributes the encode path reads (special token ids, ``model_max_length``,
``chat_template``, truncation side). Later loads read those back with ``tokenizers`` alone, into a
:class:`FastTokenizer`: the same Rust object, called as transformers calls it, so the same ids by construction
(tests/hub/test_fast_tokenizer.py compares them on the preset and the suite's tokenizers).

It applies only where that holds: a local folder, no remote code, a tokenizer whose class calls the Rust
Tokenizer through ``TokenizersBackend``'s own methods (none overridden). Anywhere else, and for any call with
options it does not reproduce (padding, tensors, pairs...), transformers' tokenizer is used, loaded when first
needed. ``C2V_RAG_PLAIN_FORWARD=0`` turns it off with the plain forward; ``C2V_RAG_TOKENIZER_CACHE=0`` alone.

An entry is named by a digest of the folder's path, its files (names, sizes, modification times; the weights
aside) and the versions of transformers and tokenizers, so an entry is never read for other files or another
release; the least recently used ones are removed beyond :data:`MAX_CACHE_BYTES`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from c2v_rag.core.cache import cache_folder
from c2v_rag.hub.plain_weights import plain_forward_enabled
from c2v_rag.hub.sources import ResolvedSource, cache_entry, distribution_version, evict_least_recent, load_tokenizer

logger = logging.getLogger(__name__)

ENV_SWITCH = "C2V_RAG_TOKENIZER_CACHE"
# An entry is the size of its tokenizer.json (3.5 MB for SmolLM2, 0.7 MB for MiniLM): room for a dozen models.
MAX_CACHE_BYTES = 64 << 20
# Part of every entry's name: a change of what an entry holds names new entries.
_FORMAT = "2"  # 2: the chat turn's close (chat_turn_close)
_BACKEND_FILE = "tokenizer.json"
_ATTRIBUTES_FILE = "attributes.json"
# Files of a model folder that do not change its tokenizer: checking them would only slow the digest down.
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".onnx", ".h5", ".msgpack")
# TokenizersBackend's methods on the way from a call to encode_batch: a class that overrides one may compute
# other ids than the Rust Tokenizer alone, so it gets no entry.
_CALL_PATH = (
    "__call__",
    "_get_padding_truncation_strategies",
    "_encode_plus",
    "set_truncation_and_padding",
    "_convert_encoding",
    "_switch_to_input_mode",
)


# The attributes a FastTokenizer answers like transformers' tokenizer (TokenizerAttributes names them all).
_MIRRORED = frozenset(
    (
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "model_max_length",
        "chat_template",
        "padding_side",
        "truncation_side",
    )
)


@dataclass(frozen=True)
class TokenizerAttributes:
    """What the encode path reads of a tokenizer besides its ids, as transformers' tokenizer had them."""

    class_name: str
    bos_token_id: int | None
    eos_token_id: int | None
    pad_token_id: int | None
    model_max_length: int
    chat_template: str | dict | None
    padding_side: str
    truncation_side: str
    split_special_tokens: bool
    model_input_names: list[str]
    # What the chat template writes after a user message up to the assistant's first word (chat_turn_close).
    chat_turn_close: str | None = None


class FastTokenizer:
    """The calls c2v_rag's encode path makes of a tokenizer, answered by the ``tokenizers`` library alone.

    ``tokenizer(text_or_texts, add_special_tokens=..., truncation=..., max_length=..., verbose=...)`` returns
    ``{"input_ids": ..., "attention_mask": ...}`` as transformers' tokenizer does (a list for one text, a list of
    lists for a list), and ``bos_token_id``, ``eos_token_id``, ``pad_token_id``, ``model_max_length``,
    ``chat_template``, ``padding_side`` and ``truncation_side`` are its values. Any other call or option goes to
    :attr:`transformers_tokenizer`, loaded then; from that moment every call does, so that a change made to it
    (a token added, a new pad token) is seen as before.
    """

    def __init__(self, backend: Any, attributes: TokenizerAttributes, load: Callable[[], Any]) -> None:
        self.backend = backend
        self.attributes = attributes
        self._load = load
        self._transformers: Any = None
        # transformers leaves no padding on its Rust tokenizer for a call without padding; nor does this
        backend.no_padding()
        backend.encode_special_tokens = attributes.split_special_tokens

    def __getattr__(self, name: str) -> Any:
        # The values the encode path reads: the entry's, or, once transformers' tokenizer is loaded (and may have
        # been changed: a new pad token), its own, as the calls then are.
        if name not in _MIRRORED:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        loaded = self.__dict__.get("_transformers")
        return getattr(loaded if loaded is not None else self.__dict__["attributes"], name)

    @property
    def transformers_tokenizer(self) -> Any:
        """transformers' tokenizer of the same files, loaded on first use."""
        if self._transformers is None:
            self._transformers = self._load()
        return self._transformers

    def __call__(
        self,
        text: str | Sequence[str],
        *,
        add_special_tokens: bool = True,
        truncation: bool | None = None,
        max_length: int | None = None,
        verbose: bool = True,
        **options: Any,
    ) -> dict[str, list]:
        # No truncation, or truncation at max_length. The rest (a strategy by name, truncation to model_max_length,
        # max_length alone, which transformers takes as truncation) follows transformers' own rules: left to it.
        simple = (truncation in (None, False) and max_length is None) or (truncation is True and max_length is not None)
        if self._transformers is not None or options or not simple:
            return self.transformers_tokenizer(
                text,
                add_special_tokens=add_special_tokens,
                truncation=truncation,
                max_length=max_length,
                verbose=verbose,
                **options,
            )
        self._set_truncation(max_length if truncation else None)
        texts = [text] if isinstance(text, str) else list(text)
        # verbose only decides transformers' warning about texts longer than model_max_length; the encode
        # path measures and reports truncation itself
        encodings = self.backend.encode_batch(texts, add_special_tokens=add_special_tokens) if texts else []
        out: dict[str, list] = {"input_ids": [e.ids for e in encodings]}
        if "attention_mask" in self.attributes.model_input_names:
            out["attention_mask"] = [e.attention_mask for e in encodings]
        return {key: value[0] for key, value in out.items()} if isinstance(text, str) else out

    def _set_truncation(self, max_length: int | None) -> None:
        """The Rust tokenizer's truncation as transformers' ``set_truncation_and_padding`` leaves it for a call
        with ``truncation=True, max_length=max_length`` (None: no truncation)."""
        current = self.backend.truncation
        if max_length is None:
            if current is not None:
                self.backend.no_truncation()
            return
        target = {"max_length": max_length, "stride": 0, "strategy": "longest_first", "direction": self.truncation_side}
        if current is None or {key: current.get(key) for key in target} != target:
            self.backend.enable_truncation(**target)


def transformers_tokenizer(tokenizer: Any) -> Any:
    """transformers' tokenizer behind ``tokenizer``: its own when a :class:`FastTokenizer`, else ``tokenizer``."""
    return tokenizer.transformers_tokenizer if isinstance(tokenizer, FastTokenizer) else tokenizer


def chat_turn_close(tokenizer: Any) -> str | None:
    """What ``tokenizer``'s chat template writes after a user message's content up to the assistant's first word
    (``<|im_end|>\\n<|im_start|>assistant\\n`` for ChatML), or None (no chat template, or one that does not
    write the message once). A :class:`FastTokenizer` answers from its entry, recorded when transformers'
    tokenizer was saved, so no template is rendered and transformers is not imported."""
    if isinstance(tokenizer, FastTokenizer) and tokenizer.__dict__.get("_transformers") is None:
        return tokenizer.attributes.chat_turn_close
    tokenizer = transformers_tokenizer(tokenizer)
    if not getattr(tokenizer, "chat_template", None):
        return None
    marker = "\x00"
    opened = tokenizer.apply_chat_template(
        [{"role": "user", "content": marker}], tokenize=False, add_generation_prompt=True
    )
    return opened.split(marker)[1] if isinstance(opened, str) and opened.count(marker) == 1 else None


def load_fast_tokenizer(source: ResolvedSource, *, trust_remote_code: bool = False) -> Any:
    """The tokenizer of ``source``: a :class:`FastTokenizer` from the cache where one applies, else transformers'
    tokenizer (:func:`~c2v_rag.hub.sources.load_tokenizer`), saved into the cache for the next load if it may be."""
    entry = _entry(source, trust_remote_code)
    load = functools.partial(load_tokenizer, source, trust_remote_code=trust_remote_code)
    fast = _read(entry, load) if entry is not None else None
    if fast is not None:
        return fast
    tokenizer = load()
    if entry is not None:
        _write(entry, tokenizer)
    return tokenizer


def tokenizer_cache_dir() -> Path | None:
    """Where entries are kept: ``$C2V_RAG_TOKENIZER_CACHE`` when it names a folder, else
    ``$C2V_RAG_CACHE/tokenizers`` (else the user cache dir's); None when it or ``C2V_RAG_PLAIN_FORWARD`` is off."""
    return cache_folder("tokenizers", ENV_SWITCH) if plain_forward_enabled() else None


def _entry(source: ResolvedSource, trust_remote_code: bool) -> Path | None:
    """The entry's folder for ``source`` (present or not), or None where no entry may be used."""
    root_dir = tokenizer_cache_dir()
    if root_dir is None or trust_remote_code or not source.is_local:
        return None
    root = Path(source.location)
    digest = hashlib.sha256()
    versions = (distribution_version("transformers"), distribution_version("tokenizers"))
    for part in (_FORMAT, str(root.resolve()), *versions):
        digest.update(part.encode() + b"\0")
    try:
        files = sorted(p for p in root.iterdir() if p.is_file() and not p.name.endswith(_WEIGHT_SUFFIXES))
        templates = root / "additional_chat_templates"
        files += sorted(templates.iterdir()) if templates.is_dir() else []
        for file in files:
            stat = file.stat()
            digest.update(f"{file.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}\0".encode())
    except OSError:
        return None  # loading the tokenizer reports it
    return root_dir / digest.hexdigest()[:24]


def _read(entry: Path, load: Callable[[], Any]) -> FastTokenizer | None:
    """The entry as a :class:`FastTokenizer`, or None when it is missing or unreadable (it is then written anew)."""
    try:
        raw = json.loads((entry / _ATTRIBUTES_FILE).read_text(encoding="utf-8"))
        attributes = TokenizerAttributes(**raw)
        from tokenizers import Tokenizer

        backend = Tokenizer.from_file(str(entry / _BACKEND_FILE))
    except Exception as err:  # noqa: BLE001 -- a missing or damaged entry (tokenizers raises plain Exception): load anew
        if (entry / _ATTRIBUTES_FILE).exists():
            logger.debug("tokenizer cache entry %s unreadable (%s): loading with transformers", entry, err)
        return None
    try:
        os.utime(entry)  # its last use, for the eviction
    except OSError:
        pass
    return FastTokenizer(backend, attributes, load)


def _attributes(tokenizer: Any) -> TokenizerAttributes | None:
    """What an entry records of ``tokenizer``, or None when its class may compute other ids than its Rust
    Tokenizer alone (not a ``TokenizersBackend``, or one of the methods of its call path overridden)."""
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    cls = type(tokenizer)
    if not isinstance(tokenizer, TokenizersBackend):
        return None
    if any(getattr(cls, name, None) is not getattr(TokenizersBackend, name, None) for name in _CALL_PATH):
        logger.debug("no tokenizer cache entry for %s: it overrides TokenizersBackend's call path", cls.__name__)
        return None
    return TokenizerAttributes(
        class_name=cls.__name__,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        model_max_length=int(tokenizer.model_max_length),
        chat_template=tokenizer.chat_template,
        padding_side=tokenizer.padding_side,
        truncation_side=tokenizer.truncation_side,
        split_special_tokens=bool(tokenizer.split_special_tokens),
        model_input_names=list(tokenizer.model_input_names),
        chat_turn_close=chat_turn_close(tokenizer),
    )


def _write(entry: Path, tokenizer: Any) -> None:
    """Save ``tokenizer`` as the entry; a cache that cannot be written is skipped with a note in the log."""
    attributes = _attributes(tokenizer)
    if attributes is None:
        return
    try:
        with cache_entry(entry, written=lambda: (entry / _ATTRIBUTES_FILE).is_file()) as tmp:
            tokenizer.backend_tokenizer.save(str(tmp / _BACKEND_FILE))
            (tmp / _ATTRIBUTES_FILE).write_text(json.dumps(asdict(attributes)), encoding="utf-8")
        evict_least_recent(entry.parent, MAX_CACHE_BYTES, keep=entry)
    except OSError as err:
        logger.info("tokenizer cache not written to %s (%s): the next load reads the tokenizer again", entry, err)
