"""Texts -> token batches -> vectors: prompts, batching, the encode loop, long texts, output precision."""
