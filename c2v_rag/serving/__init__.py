"""``c2v-rag serve``: an OpenAI-compatible embeddings and search server with dynamic batching.

Needs the ``serve`` extra (``pip install 'c2v-rag[serve]'``): FastAPI, uvicorn, prometheus-client.
"""

from c2v_rag.serving.config import API_KEY_ENV, ServerConfig

__all__ = ["ServerConfig", "API_KEY_ENV", "create_app", "serve", "ServerThread"]


def __getattr__(name: str):
    # The web stack is imported on first use, so ServerConfig works without the extra installed.
    if name == "create_app":
        from c2v_rag.serving.app import create_app

        return create_app
    if name in ("serve", "ServerThread"):
        from c2v_rag.serving import server

        return getattr(server, name)
    raise AttributeError(f"module 'c2v_rag.serving' has no attribute {name!r}")
