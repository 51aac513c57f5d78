"""The former name of :mod:`c2v_rag.st_files`, kept so that code written against it keeps working.

``c2v_rag.sentence_transformers.write_st_files`` and ``variant_revision`` (docs/ecosystem.md named
them here) and the file-name constants are the same objects as in :mod:`c2v_rag.st_files`; new code
imports them from there. The sentence-transformers module class is :class:`c2v_rag.st_module.Causal2VecModule`.
"""

from .st_files import (FALLBACK_QUERY_TASK, MODULE_CONFIG_FILE, MODULE_TYPE, MODULES_FILE, ST_CONFIG_FILE,
                       default_query_instruction, st_prompts, variant_revision, write_st_files)

__all__ = ["FALLBACK_QUERY_TASK", "MODULE_CONFIG_FILE", "MODULE_TYPE", "MODULES_FILE", "ST_CONFIG_FILE",
           "default_query_instruction", "st_prompts", "variant_revision", "write_st_files"]
