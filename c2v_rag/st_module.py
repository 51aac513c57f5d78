"""Where the previous release kept the sentence-transformers module: ``c2v_rag.st_module.Causal2VecModule``.

Every variant that release saved or pushed names this path in its ``modules.json``, and
``SentenceTransformer(path)`` imports the class by that name, so the name must keep importing for as long
as such variants exist. The class lives in :mod:`c2v_rag.model.st_module`; variants saved now name that
path (:data:`c2v_rag.hub.st_files.MODULE_TYPE`, promised stable in docs/frameworks.md). Nothing in the
package imports this module: it is an entry point for sentence-transformers, like ``cli`` for the shell.
"""

from c2v_rag.model.st_module import Causal2VecModule

__all__ = ["Causal2VecModule"]
