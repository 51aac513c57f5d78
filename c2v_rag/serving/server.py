"""Running the app under uvicorn: ``serve`` for the CLI, ``ServerThread`` for tests and benchmarks."""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from typing import TYPE_CHECKING

from c2v_rag.core.devices import configure_cpu_threads
from c2v_rag.core.memory import bound_kernel_caches
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
    # The port is taken before the model loads: a port in use fails at once, not after a minute of loading (uvicorn
    # would bind only then, and exit with its own log line).
    sock = listening_socket(config.host, config.port)
    try:
        configure_cpu_threads(config.threads)
        if config.kernel_cache_shapes is not None:
            bound_kernel_caches(config.kernel_cache_shapes)  # before the first forward pass, when torch reads them
        model = Causal2Vec.from_pretrained(
            config.model, device=config.device, dtype=config.dtype, quantize=config.quantize
        )
        app = create_app(model, config)
        if config.host not in ("127.0.0.1", "localhost", "::1") and config.api_key is None:
            logger.warning(
                "Listening on %s with no API key: anyone who can reach this port can use it "
                "(set --api-key or $C2V_RAG_API_KEY)",
                config.host,
            )
        port = sock.getsockname()[1]
        logger.info("Serving %s on http://%s:%d", served_name(config), _url_host(config.host), port)
        uvicorn.Server(_uvicorn_config(app, config.model_copy(update={"port": port}))).run(sockets=[sock])
    finally:
        sock.close()


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` and listening (port 0: one the system picks), or an OSError that
    names the option to change."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    except socket.gaierror as err:
        raise OSError(
            f"--host {host}: no address of that name ({err.strerror}); pass an IP address of this machine"
        ) from None
    try:
        return socket.create_server((host, port), family=family)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            reason = "is in use (another server listens there); pass another --port, or stop that server"
        elif err.errno == errno.EACCES:
            reason = "needs privileges this user lacks (ports under 1024); pass --port 1024 or above"
        elif err.errno == errno.EADDRNOTAVAIL:
            reason = f"cannot be bound: {host} is no address of this machine; pass one of its addresses as --host"
        else:
            reason = f"cannot be bound ({err.strerror or err})"
        raise OSError(f"{_url_host(host)}:{port} {reason}") from None


def _url_host(host: str) -> str:
    """``host`` as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


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
