"""The OpenSearch engine's fixed parts: index names, mappings, the tombstone, the error hints.

The seam: ``index_name(prefix, index)`` is a store's data index (its ledger is that name and
``LEDGER_SUFFIX``); ``data_index(embedder, names)`` the settings and mappings a new data index
is created with (the scope fields ``keyword``, our terms analysed by ``ANALYSIS``, the filter
tokens a ``keyword`` (``TOKENS``), ``timestamp`` and ``expires_at`` (``EXPIRY``) ``double``s, the
record kept whole in ``doc``, a ``knn_vector`` with an embedder, and ``MARKED``: each record's place
on the store's clock and the fields of the erasure marks kept beside the records, ``erasing``'s);
``LEDGER_MAPPINGS`` the ledger's.
The engine (``engine.py``) only uses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.scope import safe_name

if TYPE_CHECKING:
    from ...retrieval.embedders import Embedder

ANALYSIS = {
    "analyzer": {
        "lt_text": {"type": "custom", "tokenizer": "lt_words", "filter": ["lowercase", "asciifolding", "porter_stem"]}
    },
    "tokenizer": {"lt_words": {"type": "pattern", "pattern": "[^\\p{L}\\p{N}]+"}},
}
KEYWORD = {"type": "keyword"}
#: A record's filter tokens (``core.where.record_tokens``): one ``keyword`` holding them all.
TOKENS = "ftags"
#: The ``_meta`` key saying every record of the index carries its ``TOKENS`` (``filtering.add_tokens``).
TOKENS_META = "filter_tokens"
FILTERED = ("app_name", "user_id", "session_id", "timestamp")
LEDGER_SUFFIX = ".ledger"
#: Longest data index name: OpenSearch allows 255 bytes, and the ledger's name is longer.
MAX_NAME = 255 - len(LEDGER_SUFFIX)
#: Ledger entries per read (the most a search may return).
LEDGER_PAGE = 10_000
#: Rounds in a row that erase nothing (every item changed since read, or rejected) before an erase gives up.
ERASE_ROUNDS = 5
#: ``_meta`` keys naming the index as the caller does (``_indices``): its name is sanitised.
INDEX_META, PREFIX_META = "index", "prefix"
BUSY = ("es_rejected_execution_exception", "unavailable_shards_exception", "no_shard_available_action_exception")
TLS_HINT = "Pass the cluster's CA with backend_config['ca_certs'], or (a test node only) verify_certs=False."
AUTH_HINT = "Check username/password (LONGTERM_OPENSEARCH_USERNAME / LONGTERM_OPENSEARCH_PASSWORD)."
BLOCKED_HINT = "The index is read-only: a write block, or a disk past its flood-stage watermark; free disk, lift it."
KNN_HINT = "Vectors need the k-NN plugin: install opensearch-knn on the cluster, or use no embedder."
TOO_LARGE_HINT = (
    "One memory is larger than the cluster accepts in a request (http.max_content_length; 10 MB on small AWS "
    "domains): exclude such events with the auto-save policy, or raise the limit."
)


def index_name(prefix: str, index: str) -> str:
    """``prefix + index`` made a valid index name (lower case, at most ``MAX_NAME`` characters)."""
    return safe_name(f"{prefix}{index}", "a-z0-9_-", limit=MAX_NAME, lower=True)


#: The erase's tombstone field, mapped in a data index made by an earlier release too.
ERASED = {"erased": {"type": "boolean"}}
#: A record's ``expires_at`` (written only when it has one), mapped in an index of an earlier release
#: too, before any write: a ``double`` as ``timestamp`` is (a dynamic ``float`` would round it to minutes).
EXPIRES_AT = "expires_at"
EXPIRY = {EXPIRES_AT: {"type": "double"}}
#: The erasure marks' fields (``erasing``), mapped in a data index of an earlier release too: ``SAVED``
#: is each record's place on the store's clock when it was written (the ``_version`` of the document
#: ``CLOCK_ID``); a mark is a document of the data index holding its scope's tag (``MARK_SCOPE``), its
#: ``Erasure.spec`` (kept, never searched) and the clock at its start (``MARK_AT``). No record query
#: matches a mark or the clock: neither has a record's ``app_name``, ``user_id`` or ``record_id``.
SAVED, MARK_SCOPE, MARK_SPEC, MARK_AT = "saved", "erasing", "erasure", "before"
MARKED = {
    SAVED: {"type": "long"},
    MARK_SCOPE: KEYWORD,
    MARK_SPEC: {"type": "keyword", "index": False, "doc_values": False},
    MARK_AT: {"type": "long"},
}
#: The document whose ``_version`` is the store's clock (a record id is a hex digest: never this).
CLOCK_ID = "~clock"
LEDGER_MAPPINGS = {
    "dynamic": "strict",
    "properties": dict.fromkeys(("app_name", "user_id", "session_id", "event_id"), KEYWORD),
}


def data_index(embedder: Embedder | None, names: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(settings, mappings) of a new data index; its ``_meta`` names the embedder and the index (``names``)."""
    props: dict[str, Any] = {
        **dict.fromkeys(("record_id", "app_name", "user_id", "session_id"), KEYWORD),
        "timestamp": {"type": "double"},
        **EXPIRY,
        "terms": {"type": "text", "analyzer": "lt_text"},
        TOKENS: KEYWORD,
        "doc": {"type": "object", "enabled": False},
        **ERASED,
        **MARKED,
    }
    settings: dict[str, Any] = {"analysis": ANALYSIS}
    if embedder is not None:
        settings["knn"] = True
        method = {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}
        props["embedding"] = {"type": "knn_vector", "dimension": embedder.dim, "method": method}
    meta = {"embedder": embedder.id if embedder is not None else "", TOKENS_META: "1", **names}
    return settings, {"properties": props, "_meta": meta}
