from langchain_causal2vec.embeddings import Causal2VecEmbeddings

__all__ = ["Causal2VecEmbeddings"]
