"""Reading what callers pass to ingest into documents, and chunking them."""
