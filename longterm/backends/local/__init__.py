"""The embedded default engine: one SQLite file (``store``), with vectors beside it (``vectors``)."""

from .store import LocalBackend

__all__ = ["LocalBackend"]
