"""Sentence embeddings with all-MiniLM-L6-v2."""
