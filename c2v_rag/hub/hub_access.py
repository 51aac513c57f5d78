"""Whether the Hugging Face Hub answers, asked once per process, so that a machine without it reads its cache at once.

Without a network, huggingface_hub retries each file's request five times with growing waits, before it reads
the cache or gives up: over a minute for a model the cache holds (docs/getting-started.md, "Without network").
c2v_rag asks the hub once, through huggingface_hub's own HTTP session (its proxy
settings and endpoint apply), with a short timeout. Where it does not answer, the process goes on as
``HF_HUB_OFFLINE=1`` does: from the local cache only, with one line in the log saying so.
"""

from __future__ import annotations

import functools
import logging
from typing import Literal
from urllib.parse import quote

from c2v_rag.core.cache import switched_off

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 5.0
OFFLINE_ENV = "HF_HUB_OFFLINE"


@functools.cache
def hub_answers() -> bool:
    """Whether the hub's endpoint answers an HTTP request within :data:`PROBE_TIMEOUT_S` (any status will do: it is
    the network that is in question, not an account); asked once per process."""
    import httpx
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    try:
        get_session().head(constants.ENDPOINT, timeout=PROBE_TIMEOUT_S, follow_redirects=False)
    except httpx.TransportError as err:  # no route, no name resolution, a refused connection, a timeout, a proxy
        logger.debug("the Hugging Face Hub at %s does not answer: %s", constants.ENDPOINT, err)
        return False
    return True


def _hub_use() -> Literal["offline", "always", "answers", "silent"]:
    """How this process reads hub ids: offline mode is on; ``HF_HUB_OFFLINE=0`` set on purpose (always ask, no
    check); the hub answers; it does not (asked once, :func:`hub_answers`)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "offline"
    if switched_off(OFFLINE_ENV):
        return "always"
    return "answers" if hub_answers() else "silent"


def cache_only_without_hub(what: str) -> bool:
    """Before ``what`` (a hub id, a dataset) is read from the hub: True when it is to come from the local cache
    alone, because ``HF_HUB_OFFLINE`` says so or the hub does not answer (then offline mode is set for the rest of
    the process, with a warning). ``HF_HUB_OFFLINE=0`` set on purpose skips the check: the hub is then always asked,
    for a network where it answers too slowly for the check."""
    from huggingface_hub import constants

    use = _hub_use()
    if use != "silent":
        return use == "offline"
    constants.HF_HUB_OFFLINE = True
    logger.warning(
        "the Hugging Face Hub (%s) does not answer: reading %s, and anything else this process needs from the hub, "
        "from the local cache only, as HF_HUB_OFFLINE=1 does (set it to skip this check; HF_HUB_OFFLINE=0 always asks "
        "the hub)",
        constants.ENDPOINT,
        what,
    )
    return True


@functools.cache
def current_commit(repo_id: str, revision: str | None) -> str | None:
    """The commit ``revision`` (``main`` when None) of the model ``repo_id`` names on the hub now, from one request
    for its ``config.json`` (the user's token applies; no retries); None where the hub does not say (no such
    repository or file, no access, no network). Asked once per process, so that every load in it reads the same
    weights."""
    import httpx
    from huggingface_hub import constants, get_hf_file_metadata

    url = f"{constants.ENDPOINT}/{repo_id}/resolve/{quote(revision or 'main', safe='')}/config.json"
    try:
        commit = get_hf_file_metadata(url, timeout=PROBE_TIMEOUT_S).commit_hash
    except httpx.HTTPError as err:  # huggingface_hub's HTTP errors (404, 401) are httpx's too
        logger.debug("no current commit of %s@%s from the hub: %s", repo_id, revision, err)
        return None
    return commit if isinstance(commit, str) and commit else None


def hub_status() -> str:
    """How this process reads hub ids, in words (``c2v-rag env``); asks the hub where a load would."""
    return {
        "offline": "not asked (offline mode): hub ids load from the local cache only",
        "always": "not checked (HF_HUB_OFFLINE=0): hub ids are always asked for",
        "answers": "yes",
        "silent": "no answer: hub ids load from the local cache only",
    }[_hub_use()]


def not_in_cache_hint(what: str) -> str:
    """The fix for a hub id missing from the cache of a process without the hub; empty where the hub answers."""
    from huggingface_hub import constants

    if not constants.HF_HUB_OFFLINE:
        return ""
    return (
        f" {what!r} is not in the local Hugging Face cache and the hub is not used here (no network, or "
        "HF_HUB_OFFLINE=1): download it where the hub is reachable (hf download ID) and copy the cache folder "
        "over, or pass a local directory or a packaged alias."
    )
