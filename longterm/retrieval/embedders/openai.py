"""An embedder for any OpenAI-compatible ``/v1/embeddings`` endpoint (httpx).

The seam: ``OpenAIEmbedder(model=, base_url=, api_key=, dim=)`` implements ``Embedder``.
Base URL and key come from the arguments, else ``LONGTERM_EMBEDDING_BASE_URL`` /
``LONGTERM_EMBEDDING_API_KEY``, else ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.

Why it is shaped so: ``embed`` is blocking, like every embedder: the engine core runs it
off the event loop, so one ``httpx.Client`` (thread-safe, bound to no loop) serves every
caller and is closed with the memory. Batches keep request counts low; 429 and 5xx are retried with
exponential backoff (honouring ``Retry-After``) because rate limits are routine; any
other 4xx is the caller's mistake (bad key, unknown model) and fails at once with the
server's message, never as an empty result.

``timeout`` (seconds, default ``DEFAULT_TIMEOUT``) bounds a whole ``embed`` call, every batch
and retry included: a deadline, not a per-request setting, so no retry loop runs past it and
an agent's search degrades to full text within it. A refused connection fails at once
(nothing listens there: waiting would only hold the caller); a service that accepts and
never answers is given what is left of the deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...config import env
from ...errors import BackendError, BackendUnavailableError, ConfigurationError, require
from .base import Kind, need_numpy, normalize

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
#: Seconds one ``embed`` call may take, retries included, unless ``timeout=`` says otherwise.
DEFAULT_TIMEOUT = 10.0

#: Dimensions of common embedding models, by model name (lower case, a provider prefix such as
#: ``openai/`` or ``BAAI/`` dropped). A model not listed is asked once: its first embedding says.
KNOWN_DIMS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    # Volcengine Ark (VeADK's defaults)
    "doubao-embedding": 2560,
    "doubao-embedding-text-240715": 2560,
    "doubao-embedding-text-240515": 2048,
    "doubao-embedding-large": 4096,
    "doubao-embedding-large-text-240915": 4096,
    "doubao-embedding-large-text-250515": 2048,
    # BAAI and E5 models as served by OpenAI-compatible servers (vLLM, TEI, Ollama, ...)
    "bge-m3": 1024,
    "bge-large-en-v1.5": 1024,
    "bge-base-en-v1.5": 768,
    "bge-small-en-v1.5": 384,
    "bge-large-zh-v1.5": 1024,
    "bge-base-zh-v1.5": 768,
    "bge-small-zh-v1.5": 512,
    "multilingual-e5-large": 1024,
    "multilingual-e5-base": 768,
    "multilingual-e5-small": 384,
    "e5-large-v2": 1024,
    "e5-base-v2": 768,
    "e5-small-v2": 384,
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
}


def known_dim(model: str) -> int | None:
    """The dimension of ``model`` by ``KNOWN_DIMS`` (``BAAI/bge-m3`` and ``bge-m3:latest`` too)."""
    name = model.strip().lower().rsplit("/", 1)[-1].split(":", 1)[0]
    return KNOWN_DIMS.get(name)


class OpenAIEmbedder:
    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        batch_size: int = 128,
        max_retries: int = 5,
        timeout: float = DEFAULT_TIMEOUT,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        need_numpy("The OpenAI-compatible embedder", "embeddings")
        self._httpx = require("httpx", package="httpx", extra="embeddings", purpose="The OpenAI-compatible embedder")
        self.base_url = (
            base_url or env("LONGTERM_EMBEDDING_BASE_URL", "OPENAI_BASE_URL") or "https://api.openai.com/v1"
        ).rstrip("/")
        self.api_key = api_key or env("LONGTERM_EMBEDDING_API_KEY", "OPENAI_API_KEY")
        self.model = model
        self.batch_size = batch_size
        self.max_retries = max_retries
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise ConfigurationError(
                f"the openai embedder's timeout must be a positive number of seconds, got {timeout!r}."
            )
        self.timeout = float(timeout)
        self._prefix = {"query": query_prefix, "passage": passage_prefix}
        self._dim = dim or known_dim(model)
        self._dim_given = dim is not None  # only a dimension the caller chose is sent as "dimensions"
        self.id = f"openai-{model}" + (f"-{dim}" if dim else "")
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """The model's dimension: ``dim=``, else ``KNOWN_DIMS``, else learned from one embedding
        (asked the first time a store needs it, never at construction)."""
        if self._dim is None:
            self.embed(["dimension"])
        if self._dim is None:  # an answer of no vectors at all
            raise ConfigurationError(
                f"the embedding service returned no vector for model {self.model!r}, so its dimension is "
                "unknown; pass dim= (e.g. {'name': 'openai', 'model': ..., 'dim': 1536})."
            )
        return self._dim

    def _http(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._httpx.Client(timeout=self.timeout)
            return self._client

    def _late(self, url: str, what: str) -> BackendUnavailableError:
        return BackendUnavailableError(
            f"the embedding service at {url} did not answer within {self.timeout:g} s ({what}); check that it is up, "
            "or raise the embedder's timeout (e.g. {'name': 'openai', ..., 'timeout': 30})."
        )

    def _post(self, batch: list[str], deadline: float) -> list[list[float]]:
        """One batch, retried within ``deadline`` (``time.monotonic()``)."""
        client = self._http()
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body: dict[str, Any] = {"model": self.model, "input": batch}
        if self._dim and self._dim_given:
            body["dimensions"] = self._dim
        url = f"{self.base_url}/embeddings"
        delay, failure = 0.5, "no answer"
        for attempt in range(self.max_retries + 1):
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._late(url, failure)
            try:
                resp = client.post(url, json=body, headers=headers, timeout=left)
            except self._httpx.ConnectError as exc:  # refused, no route, no such host: nothing to wait for
                raise BackendUnavailableError(
                    f"cannot reach the embedding service at {url}: {exc or type(exc).__name__}. Check that it is "
                    "running and LONGTERM_EMBEDDING_BASE_URL (or the embedder's base_url)."
                ) from exc
            except self._httpx.TimeoutException as exc:
                raise self._late(url, f"{type(exc).__name__}") from exc
            except self._httpx.TransportError as exc:
                failure = f"{type(exc).__name__}: {exc}"
                if attempt == self.max_retries:
                    raise BackendUnavailableError(f"cannot reach the embedding service at {url}: {failure}") from exc
            else:
                if resp.status_code == 200:
                    data = sorted(resp.json()["data"], key=lambda d: d["index"])
                    return [d["embedding"] for d in data]
                if resp.status_code not in RETRY_STATUS or attempt == self.max_retries:
                    detail = resp.text[:300]
                    raise BackendError(
                        f"the embedding service at {url} answered {resp.status_code} for model "
                        f"{self.model!r}: {detail}. Check the model name and LONGTERM_EMBEDDING_API_KEY."
                    )
                failure = f"it answered {resp.status_code}"
                retry_after = resp.headers.get("retry-after")
                if retry_after and retry_after.replace(".", "", 1).isdigit():
                    delay = max(delay, float(retry_after))
            if time.monotonic() + delay >= deadline:  # the retry would start past the deadline
                raise self._late(url, failure)
            log.debug("embedding service %s: %s; retrying in %g s", url, failure, delay)
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
        raise AssertionError("unreachable")

    def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray:
        import numpy as np

        prefix = self._prefix[kind]
        deadline = time.monotonic() + self.timeout
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            out.extend(self._post([prefix + t for t in texts[i : i + self.batch_size]], deadline))
        if not out:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        arr = normalize(np.asarray(out, dtype=np.float32))
        if self._dim is None:
            self._dim = arr.shape[1]
        elif arr.shape[1] != self._dim:
            raise BackendError(f"the embedding service returned {arr.shape[1]} dimensions, expected {self._dim}.")
        return arr

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
