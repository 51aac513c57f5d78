"""A server hands the memory its forward passes freed back to the system once its model work pauses."""

from __future__ import annotations

import re
import time

import pytest

for _module in ("fastapi", "uvicorn", "prometheus_client", "httpx"):
    pytest.importorskip(_module)

import httpx

from c2v_rag.serving import ServerConfig, ServerThread, create_app
from c2v_rag.serving.memory_release import MemoryReleaser


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_memory_is_due_after_work_and_a_pause_or_a_busy_interval_and_never_without_work():
    clock = Clock()
    idle = MemoryReleaser(idle_s=1.0, busy_every_s=60.0, clock=clock)
    assert not idle.due(clock.now + 500)  # no work since it started: nothing to hand back
    releaser = MemoryReleaser(idle_s=1.0, busy_every_s=60.0, clock=clock)
    with releaser.working():
        clock.now += 5
        assert not releaser.due(clock.now)  # a request in flight for 5 s is not a pause
    assert not releaser.due(clock.now + 0.5)
    assert releaser.due(clock.now + 1.0)


def test_memory_is_due_while_requests_keep_coming_once_the_busy_interval_has_passed():
    clock = Clock()
    releaser = MemoryReleaser(idle_s=1.0, busy_every_s=60.0, clock=clock)
    with releaser.working():
        clock.now += 30
    with releaser.working():
        assert not releaser.due(clock.now + 29)  # 59 s since the start, a request in flight
        assert releaser.due(clock.now + 30)


@pytest.fixture(scope="module")
def model(tiny_model_factory):
    return tiny_model_factory("llama", max_length=48)


def releases(url: str) -> float:
    text = httpx.get(url + "/metrics").text
    return float(re.search(r"^c2v_rag_memory_releases_total (\S+)$", text, re.M).group(1))


def wait_for(condition, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_server_hands_memory_back_once_after_each_pause_that_follows_work(model):
    config = ServerConfig(release_memory_idle_s=0.2)
    with ServerThread(create_app(model, config), config) as server:
        httpx.get(server.url + "/health").raise_for_status()
        time.sleep(0.6)
        assert releases(server.url) == 0  # probes and scrapes are not model work
        httpx.post(server.url + "/v1/embeddings", json={"input": "a first text"}).raise_for_status()
        assert wait_for(lambda: releases(server.url) == 1)
        time.sleep(0.6)
        assert releases(server.url) == 1  # once a pause, not again while nothing runs
        httpx.post(server.url + "/v1/embeddings", json={"input": ["more", "texts"]}).raise_for_status()
        assert wait_for(lambda: releases(server.url) == 2)


def test_a_busy_server_hands_memory_back_between_requests_at_its_interval(model):
    config = ServerConfig(release_memory_idle_s=30, release_memory_every_s=0.3)
    with ServerThread(create_app(model, config), config) as server, httpx.Client(base_url=server.url) as http:
        started = time.monotonic()
        while time.monotonic() - started < 1.5:  # no pause of 30 s: only the interval can release
            http.post("/v1/embeddings", json={"input": "a query"}).raise_for_status()
        assert releases(server.url) >= 2


def test_a_server_keeps_its_freed_memory_when_told_to(model):
    config = ServerConfig(release_memory_idle_s=0)
    with ServerThread(create_app(model, config), config) as server:
        httpx.post(server.url + "/v1/embeddings", json={"input": "a text"}).raise_for_status()
        time.sleep(0.6)
        assert releases(server.url) == 0
