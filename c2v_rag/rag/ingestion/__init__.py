"""ingest and embed: documents -> chunks -> vectors -> a store or Parquet."""
