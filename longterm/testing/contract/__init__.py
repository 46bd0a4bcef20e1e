"""The backend contract as a kit: what "a backend works" means, for any backend.

The seam: subclass ``ContractSuite`` in a test module and give it two fixtures, the name
the backend is registered under and a ``backend_config`` for a fresh, empty store::

    import pytest
    from longterm.testing.contract import ContractSuite

    class TestMyBackend(ContractSuite):
        @pytest.fixture
        def backend_name(self):
            return "mine"  # an entry point in ``longterm.backends``, or core.registry.register

        @pytest.fixture
        def backend_config(self, tmp_path):
            return {"url": "http://127.0.0.1:9200", "prefix": tmp_path.name}

Optional: the fixture ``home_config`` (a config that leaves the store's location to
``LONGTERM_HOME``, for a backend with such a default; default None: it has none), and the
class attribute ``processes = False`` for a store that lives in one process's memory (its
two-writers test then runs the writers as two memories in two threads).

``ContractSuite`` is the whole contract: the mixins by behaviour, ``Saving``, ``Isolation``,
``Erasing``, ``Durability``, ``Text``, ``Context`` (a hit's session neighbours),
``SearchContext`` (search_memory's context=, the time in a question, an erased turn's words),
``Filters`` (filters applied before the top-k cut, held to the reference), ``ErasingBy``
(erasing by session, date and filter), ``Expiry`` and ``Updating`` (a memory's life, on an
injected clock), ``Concurrency``
and ``Inputs``, over ``Fixtures``. A suite that proves part of it composes the parts it wants, the fixtures last::

    class TestMyBackendSaves(Saving, Isolation, Fixtures): ...

Every test opens the store as a user does, by name and config, and several times where a
promise needs it (another index, another home, another process): that is why the suite
takes the recipe and not an instance. Each test runs with its own ``LONGTERM_HOME`` and no
other ``LONGTERM_*`` variable. Needs pytest and pytest-asyncio (strict or auto mode).

Why mixins of test classes: pytest collects the mixins' tests in the subclass, whose fixtures
override the kit's (fsspec's abstract tests work so); parametrizing ``backend_name`` runs one
subclass over many backends, as longterm's own ``tests/contract`` does.
"""

from __future__ import annotations

from .concurrency import FRUITS, Concurrency
from .context import Context
from .durability import Durability
from .erasing import Erasing
from .erasing_by import ErasingBy
from .filters import Filters
from .fixtures import HANG_LIMIT, Fixtures, hit_parts, in_threads, memories, search_texts
from .inputs import SHAPES, Inputs
from .isolation import HOSTILE_IDS, HOSTILE_QUERIES, Isolation
from .life import Expiry, Updating
from .metadata import MetadataValues
from .saving import Saving
from .search_context import SearchContext
from .text import Text


class ContractSuite(
    Concurrency,
    SearchContext,
    Context,
    Text,
    Durability,
    Erasing,
    ErasingBy,
    Expiry,
    Updating,
    Isolation,
    Saving,
    MetadataValues,
    Filters,
    Inputs,
    Fixtures,
):
    """The contract: subclass it and provide ``backend_name`` and ``backend_config`` (module docstring).

    pytest runs the tests of a class's bases from the last base to the first: listed so, they
    run inputs first, then metadata, saving, isolation, erasing, durability, text, context and concurrency."""


__all__ = [
    "FRUITS",
    "HANG_LIMIT",
    "HOSTILE_IDS",
    "HOSTILE_QUERIES",
    "SHAPES",
    "Concurrency",
    "Context",
    "SearchContext",
    "ContractSuite",
    "Durability",
    "Erasing",
    "ErasingBy",
    "Expiry",
    "Filters",
    "Fixtures",
    "Inputs",
    "Isolation",
    "MetadataValues",
    "Saving",
    "Text",
    "Updating",
    "hit_parts",
    "in_threads",
    "memories",
    "search_texts",
]
