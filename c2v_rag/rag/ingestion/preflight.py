"""Checks an ingest makes before the model loads, and the cleanup of a run that stopped early.

Loading a model takes seconds to minutes; a run that then fails on something knowable up front
(a locked store, a server that does not answer, a collection built for other vectors, a chunk
size the model cannot take) wastes that time and, worse, used to leave an empty collection
behind. Every check here needs only the variant's config file, not its weights; once they pass,
:meth:`~c2v_rag.rag.options.ResolvedModel.load` loads the model.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from c2v_rag.store.backends import check_collection_name
from c2v_rag.store.collection import QdrantConfig, check_collection, config_fingerprint
from c2v_rag.store.errors import server_error
from c2v_rag.store.retry import call_with_retry

if TYPE_CHECKING:
    from c2v_rag.core.config import Causal2VecConfig
    from c2v_rag.hub.variants import VariantDigests
    from c2v_rag.store.store_backend import StoreClient
    from c2v_rag.store.vectors import CollectionVectors

logger = logging.getLogger(__name__)


def open_client(target: QdrantConfig, *, attempts: int, initial_wait: float, max_wait: float) -> StoreClient:
    """A client that has been answered: a locked embedded directory raises
    :class:`~c2v_rag.rag.errors.StoreLockedError`, a server that does not answer after
    ``attempts`` tries :class:`QdrantUnreachableError`, an error status :class:`QdrantRequestError`."""
    client = target.connect()
    if target.is_server:
        try:
            call_with_retry(
                client.get_collections,
                what=f"reaching Qdrant at {target.location}",
                attempts=attempts,
                initial_wait=initial_wait,
                max_wait=max_wait,
                log_level=logging.INFO,
            )
        except Exception as err:
            client.close()
            raise server_error(target.location, err, attempts) from err
    return client


def check_target(
    client: StoreClient,
    collection: str,
    target: QdrantConfig,
    config: Causal2VecConfig,
    reference: str | None,
    layout: CollectionVectors | None = None,
    digests: VariantDigests | None = None,
    truncate_dim: int | None = None,
    quantize: str = "none",
    *,
    info: Any,
    asked: str | None = None,
) -> bool:
    """Check an existing ``collection`` against the model's config; True when it exists.

    Vector size, distance, vector name and the model fingerprint are all known from the config,
    so a mismatch fails here rather than after the weights load. ``info``: the collection's
    ``get_collection``, which the caller has read, or None where it found no such collection; ``asked``: the name
    the caller gave, where it is an alias of ``collection``.
    """
    check_collection_name(collection)
    if config.decoder_hidden_size is not None:
        config.check_truncate_dim(truncate_dim)  # an untrained size fails before the weights load
    if info is None:
        return False
    try:
        fingerprint = config_fingerprint(config, reference, digests, truncate_dim=truncate_dim, quantize=quantize)
    except ValueError:  # a config without decoder_hidden_size: checked again once the model is loaded
        return True
    check_collection(client, collection, target, fingerprint, layout, info, asked)
    return True


def drop_if_empty(client: StoreClient, collection: str, target: QdrantConfig) -> bool:
    """Delete ``collection`` when it holds no point: a run that created it and then stopped."""
    try:
        if client.count(collection, exact=True).count == 0:
            client.delete_collection(collection)
            logger.info(
                "Removed the empty collection %r at %s that the stopped run had created", collection, target.location
            )
            return True
    except Exception as err:  # the cleanup must not hide the error that stopped the run
        logger.warning("Could not remove the empty collection %r at %s: %s", collection, target.location, err)
    return False
