"""The facade, as a package: ``LongTermMemory`` and the parts it delegates to.

The seam: ``from longterm.memory import LongTermMemory, SaveResult`` (and ``MemoryService``,
``MemorySettings``, ``unsaved_error``). Inside, one module per job:

- ``facade``: ``LongTermMemory``, the public API (the simple API, facts, listings, tools);
- ``service``: ``MemoryService``, ADK's API over one store and what satellites may use of it;
- ``settings``: the fields, their validation, and what is fixed once a memory is open;
- ``wiring``: the engine, ledger and fact layer built from the settings;
- ``saving``, ``searching``, ``reading``, ``erasing``: the pipelines;
- ``fact_access``: the fact layer's calls; ``lifecycle``: the loop, auto-savers and close;
- ``inputs``: the argument checks every call starts with.

Why a package: the facade did fourteen jobs in one class; each now reads in a module of its
own, and the class says only what the API is and which part does it.
"""

from __future__ import annotations

from ..records import SaveResult
from .facade import LongTermMemory
from .lifecycle import unsaved_error
from .service import MemoryService
from .settings import MemorySettings

__all__ = ["LongTermMemory", "MemoryService", "MemorySettings", "SaveResult", "unsaved_error"]
