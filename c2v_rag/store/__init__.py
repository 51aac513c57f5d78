"""The vector store: Qdrant connections and backends, collections, points, aliases, sparse vectors."""
