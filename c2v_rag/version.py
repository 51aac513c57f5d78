"""The version of c2v_rag, in a module of its own so that any module can name it without importing the package root."""

__version__ = "0.1.0"
