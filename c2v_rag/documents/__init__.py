"""Reading what callers pass to ingest (or to training) into documents, and chunking them.

Below :mod:`c2v_rag.rag` and :mod:`c2v_rag.training`, which both read and chunk documents this way;
above :mod:`c2v_rag.encode`, whose splitter and Unicode check it uses.
"""
