"""Running the app under uvicorn: ``serve`` for the CLI, ``ServerThread`` for tests and benchmarks."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from c2v_rag.core.devices import configure_cpu_threads
from c2v_rag.serving.app import create_app, served_name
from c2v_rag.serving.config import ServerConfig

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

logger = logging.getLogger(__name__)


def _uvicorn_config(app: FastAPI, config: ServerConfig, *, log_level: str = "info") -> uvicorn.Config:
    import uvicorn

    # Uvicorn handles SIGTERM/SIGINT: it stops accepting, lets in-flight requests finish (up to
    # timeout_graceful_shutdown), then runs the lifespan shutdown, which drains the batcher.
    # Its access log records method, path and status, never headers: the API key stays out.
    return uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        # uvicorn annotates an int, but waits with it as an asyncio timeout: fractions of a second hold.
        timeout_graceful_shutdown=config.graceful_shutdown_s,  # type: ignore[arg-type]
        log_level=log_level,
        access_log=False,
        lifespan="on",
    )


def serve(config: ServerConfig) -> None:
    """Load the model ``config`` names and serve it until SIGTERM or Ctrl-C (blocking)."""
    import uvicorn

    from c2v_rag.model.causal2vec import Causal2Vec

    # A server's log is its record: start-up and each request at INFO, whatever the command line's level.
    logging.getLogger("c2v_rag.serving").setLevel(logging.INFO)
    configure_cpu_threads(config.threads)
    model = Causal2Vec.from_pretrained(config.model, device=config.device, dtype=config.dtype, quantize=config.quantize)
    app = create_app(model, config)
    if config.host not in ("127.0.0.1", "localhost", "::1") and config.api_key is None:
        logger.warning(
            "Listening on %s with no API key: anyone who can reach this port can use it "
            "(set --api-key or $C2V_RAG_API_KEY)",
            config.host,
        )
    logger.info("Serving %s on http://%s:%d", served_name(config), config.host, config.port)
    uvicorn.Server(_uvicorn_config(app, config)).run()


class ServerThread:
    """Serve an app on a free loopback port from a background thread, as a context manager.

    ``with ServerThread(app) as server: requests to server.url``; leaving the block shuts the
    server down as SIGTERM would, in-flight requests first.
    """

    def __init__(self, app: FastAPI, config: ServerConfig | None = None, *, startup_timeout_s: float = 60) -> None:
        import uvicorn

        config = (config or ServerConfig()).model_copy(update={"port": 0})
        self._server = uvicorn.Server(_uvicorn_config(app, config, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, name="c2v-serve", daemon=True)
        self._startup_timeout_s = startup_timeout_s
        self.url = ""

    def __enter__(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start; see the log above")
            time.sleep(0.01)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join()
