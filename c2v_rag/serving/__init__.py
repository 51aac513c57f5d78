"""``c2v-rag serve``: an OpenAI-compatible embeddings and search server with dynamic batching.

Needs the ``serve`` extra (``pip install 'c2v-rag[serve]'``): FastAPI, uvicorn, prometheus-client.
"""

from c2v_rag.serving.config import API_KEY_ENV, ServerConfig

__all__ = ["ServerConfig", "API_KEY_ENV", "create_app", "serve", "ServerThread"]


def _require_web_stack() -> None:
    from c2v_rag.core.extras import require

    for module in ("fastapi", "uvicorn", "prometheus_client"):
        require(module, "c2v-rag serve", "serve", distribution=module.replace("_", "-"))  # pip's name


def __getattr__(name: str):
    # The web stack is imported on first use, so ServerConfig works without the extra installed; a missing
    # piece of it is named with the command that installs it.
    if name in ("create_app", "serve", "ServerThread"):
        _require_web_stack()
    if name == "create_app":
        from c2v_rag.serving.app import create_app

        return create_app
    if name in ("serve", "ServerThread"):
        from c2v_rag.serving import server

        return getattr(server, name)
    raise AttributeError(f"module 'c2v_rag.serving' has no attribute {name!r}")
