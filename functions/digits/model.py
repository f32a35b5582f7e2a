"""A scikit-learn MLP trained at load time on the 8x8 digits data that scikit-learn ships.

Input: 64 pixel intensities in [0, 16] (flat, or 8 rows of 8). Output: the digit and its
probability. Training uses a fixed, stratified 80/20 split (seed 0) and is part of the measured
cold start; the accuracy on the held-out 20 % is kept as ``heldout_accuracy``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from functions.inputs import JSON_SLACK_BYTES
from functions.model import InvalidInput, Model
from functions.tensors import TensorSpec

#: share of the data held out from training, and the split's seed
HELDOUT_FRACTION = 0.2
SEED = 0


class DigitsClassifier(Model):
    kind = "digits"
    input = TensorSpec("input-0", "FP32", (-1, 64))
    outputs = (
        TensorSpec("label", "INT64", (-1,), "label"),
        TensorSpec("probability", "FP32", (-1,), "probability"),
    )
    summary = "scikit-learn MLP on the bundled 8x8 digits data (trained at load)"
    max_instances = 1024
    #: 64 numbers of up to 48 characters, separators and whitespace included
    max_instance_bytes = 64 * 48 + JSON_SLACK_BYTES

    heldout_accuracy: float = 0.0
    train_accuracy: float = 0.0

    def load(self) -> None:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
        from sklearn.neural_network import MLPClassifier
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=self.threads)
        data = load_digits()
        x_train, x_test, y_train, y_test = train_test_split(
            data.data,
            data.target,
            test_size=HELDOUT_FRACTION,
            random_state=SEED,
            stratify=data.target,
        )
        self._clf = MLPClassifier(hidden_layer_sizes=(64,), max_iter=300, random_state=SEED)
        self._clf.fit(x_train, y_train)
        self.train_accuracy = float(self._clf.score(x_train, y_train))
        self.heldout_accuracy = float(self._clf.score(x_test, y_test))
        # the trained weights, for a forward pass without scikit-learn's per-call input checks
        # (validate() has checked every instance already; those checks cost more than the
        # network on a small batch)
        self._layers = list(zip(self._clf.coefs_, self._clf.intercepts_, strict=True))

    def probabilities(self, pixels: np.ndarray) -> np.ndarray:
        """Class probabilities for rows of 64 pixels: the MLP's ReLU layers, then softmax."""
        h = pixels
        for weights, bias in self._layers[:-1]:
            h = np.maximum(h @ weights + bias, 0.0)
        weights, bias = self._layers[-1]
        logits = h @ weights + bias
        logits -= logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        proba: np.ndarray = exp / exp.sum(axis=1, keepdims=True)
        return proba

    def validate(self, instance: Any) -> Any:
        if (
            isinstance(instance, list)
            and len(instance) == 8
            and all(isinstance(row, list) for row in instance)
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
        proba = self.probabilities(np.stack(batch))
        labels = proba.argmax(axis=1)
        return [
            {"label": int(label), "probability": round(float(p[label]), 6)}
            for label, p in zip(labels, proba, strict=True)
        ]

    def sample_instances(self, n: int) -> list[Any]:
        from sklearn.datasets import load_digits

        images = load_digits().data
        return [images[i % len(images)].tolist() for i in range(n)]
