"""The Causal2Vec model, and its sentence-transformers module."""
