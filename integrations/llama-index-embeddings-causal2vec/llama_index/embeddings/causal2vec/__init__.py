from llama_index.embeddings.causal2vec.base import Causal2VecEmbedding
from llama_index.embeddings.causal2vec.postprocessor import Causal2VecRerank
from llama_index.embeddings.causal2vec.retriever import Causal2VecRetriever

__all__ = ["Causal2VecEmbedding", "Causal2VecRerank", "Causal2VecRetriever"]
