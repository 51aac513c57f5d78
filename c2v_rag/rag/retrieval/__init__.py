"""search: queries -> vectors -> Qdrant requests -> hits."""
