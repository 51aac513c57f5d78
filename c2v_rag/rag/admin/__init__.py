"""Maintenance of collections: reindex and migrate."""
