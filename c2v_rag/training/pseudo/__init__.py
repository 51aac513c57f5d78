"""Training pairs from a user's own documents, for ``c2v-rag adapt``.

The generator modules are imported here so that :data:`~c2v_rag.training.pseudo.generation.GENERATORS`
lists every kind whichever module of the package is imported first.
"""

from c2v_rag.training.pseudo import local_lm, openai_chat  # noqa: F401  (they register their generators)
