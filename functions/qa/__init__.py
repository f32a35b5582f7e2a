"""Retrieval question answering: MiniLM ranks candidate sentences."""
