from llama_index.embeddings.causal2vec.base import Causal2VecEmbedding

__all__ = ["Causal2VecEmbedding"]
