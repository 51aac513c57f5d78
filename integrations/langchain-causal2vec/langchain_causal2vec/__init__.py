from langchain_causal2vec.embeddings import Causal2VecEmbeddings
from langchain_causal2vec.rerank import Causal2VecRerank
from langchain_causal2vec.retrievers import Causal2VecRetriever

__all__ = ["Causal2VecEmbeddings", "Causal2VecRerank", "Causal2VecRetriever"]
