"""The OpenSearch engine (``engine``): one index per ``index`` name holding every user, BM25 and
k-NN, its ledger beside it; its names and mappings (``schema``), bounded bulk requests (``bulk``),
filters as bool-query clauses (``filtering``) and purging (``purge``)."""

from .bulk import Incomplete
from .engine import OpenSearchBackend
from .schema import ANALYSIS, index_name

__all__ = ["ANALYSIS", "Incomplete", "OpenSearchBackend", "index_name"]
