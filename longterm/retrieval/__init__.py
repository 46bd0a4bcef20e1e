"""Retrieval building blocks shared by every backend: text processing and fusion."""
