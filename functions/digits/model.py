"""A scikit-learn MLP trained at load time on the 8x8 digits data that scikit-learn ships.

Input: 64 pixel intensities in [0, 16] (flat, or 8 rows of 8). Output: the digit and its
probability. Training is deterministic (fixed seed) and is part of the measured cold start.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from functions.model import InvalidInput, Model


class DigitsClassifier(Model):
    kind = "digits"
    summary = "scikit-learn MLP on the bundled 8x8 digits data (trained at load)"
    max_instances = 1024

    def load(self) -> None:
        from sklearn.datasets import load_digits
        from sklearn.neural_network import MLPClassifier

        data = load_digits()
        self._images = data.data
        self._clf = MLPClassifier(hidden_layer_sizes=(64,), max_iter=300, random_state=0)
        self._clf.fit(data.data, data.target)
        self.train_accuracy = float(self._clf.score(data.data, data.target))

    def validate(self, instance: Any) -> Any:
        if isinstance(instance, list) and len(instance) == 8 and all(
            isinstance(row, list) for row in instance
        ):
            instance = [v for row in instance for v in row]
        if not isinstance(instance, list) or len(instance) != 64:
            raise InvalidInput("expected 64 pixel values (flat or 8x8)")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in instance):
            raise InvalidInput("pixel values must be numbers")
        pixels = np.asarray(instance, dtype=np.float64)
        if not np.all(np.isfinite(pixels)) or pixels.min() < 0 or pixels.max() > 16:
            raise InvalidInput("pixel values must be finite and within [0, 16]")
        return pixels

    def predict(self, batch: list[Any]) -> list[Any]:
        proba = self._clf.predict_proba(np.stack(batch))
        labels = proba.argmax(axis=1)
        return [
            {"label": int(label), "probability": round(float(p[label]), 6)}
            for label, p in zip(labels, proba, strict=True)
        ]

    def sample_instances(self, n: int) -> list[Any]:
        from sklearn.datasets import load_digits

        images = load_digits().data
        return [images[i % len(images)].tolist() for i in range(n)]
