"""Retrieval question answering with all-MiniLM-L6-v2.

No extractive question-answering model ships inside a PyPI package, so this function answers by
retrieval: it embeds the question and each candidate sentence and returns the candidate with the
highest cosine similarity. Candidates come with the question, or else from a small built-in
passage set shipped as ``passages.txt`` (embedded once at load).

Input: ``{"question": str, "candidates": [str, ...]}`` or ``{"question": str}``.
Output: ``{"answer": str, "score": float, "index": int}`` (index into the candidates used).
A batch's questions and candidates are encoded in one call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import numpy as np

from functions.inputs import JSON_SLACK_BYTES, json_text_bytes, text
from functions.model import InvalidInput, Model
from functions.tensors import TensorSpec

MAX_CHARS = 1000
MAX_CANDIDATES = 64
_HERE = files("functions.qa")
_PASSAGES = _HERE / "passages.txt"
_QUESTIONS = _HERE / "samples" / "questions.json"


@dataclass(frozen=True)
class _Query:
    question: str
    candidates: tuple[str, ...] | None


def builtin_passages() -> list[str]:
    """The built-in passage set, one sentence per line."""
    return [line for line in _PASSAGES.read_text(encoding="utf-8").splitlines() if line.strip()]


def sample_questions() -> list[dict[str, Any]]:
    """Sample questions with the index of the right answer (key ``answer``)."""
    questions: list[dict[str, Any]] = json.loads(_QUESTIONS.read_text(encoding="utf-8"))
    return questions


class RetrievalQA(Model):
    kind = "qa"
    input = TensorSpec("input-0", "BYTES", (-1,), records=True)
    outputs = (
        TensorSpec("answer", "BYTES", (-1,), "answer"),
        TensorSpec("score", "FP32", (-1,), "score"),
        TensorSpec("index", "INT64", (-1,), "index"),
    )
    summary = "question answering by ranking candidate sentences with MiniLM"
    max_instances = 128
    #: a question and up to MAX_CANDIDATES candidate sentences
    max_instance_bytes = (1 + MAX_CANDIDATES) * (json_text_bytes(MAX_CHARS) + JSON_SLACK_BYTES)
    devices = ("cpu", "cuda")

    def check_device(self) -> None:
        from functions.device import torch_device

        torch_device(self.device)

    def load(self) -> None:
        from functions.minilm import MiniLM

        self._encoder = MiniLM(threads=self.threads, device=self.device)
        self._passages = builtin_passages()
        self._passage_vectors = self._encoder.encode(self._passages)

    def validate(self, instance: Any) -> Any:
        if not isinstance(instance, dict):
            raise InvalidInput(
                f'expected {{"question": str, "candidates": [str]}}, got {type(instance).__name__}'
            )
        unknown = set(instance) - {"question", "candidates"}
        if unknown:
            raise InvalidInput(f"unknown keys: {', '.join(sorted(unknown))}")
        if "question" not in instance:
            raise InvalidInput("missing 'question'")
        question = text(instance["question"], max_chars=MAX_CHARS, field="question")
        if "candidates" not in instance:
            return _Query(question, None)
        candidates = instance["candidates"]
        if not isinstance(candidates, list) or not candidates:
            raise InvalidInput("'candidates' must be a non-empty list of strings")
        if len(candidates) > MAX_CANDIDATES:
            raise InvalidInput(f"{len(candidates)} candidates; the limit is {MAX_CANDIDATES}")
        checked = tuple(
            text(c, max_chars=MAX_CHARS, field=f"candidates[{i}]") for i, c in enumerate(candidates)
        )
        return _Query(question, checked)

    def predict(self, batch: list[Any]) -> list[Any]:
        queries: list[_Query] = batch
        texts = [q.question for q in queries]
        offsets: list[int] = []
        for q in queries:
            offsets.append(len(texts))
            texts.extend(q.candidates or ())
        vectors = self._encoder.encode(texts)
        answers = []
        for i, (q, start) in enumerate(zip(queries, offsets, strict=True)):
            if q.candidates is None:
                pool, candidates = self._passage_vectors, self._passages
            else:
                pool = vectors[start : start + len(q.candidates)]
                candidates = list(q.candidates)
            scores = pool @ vectors[i]
            best = int(np.argmax(scores))
            answers.append(
                {"answer": candidates[best], "score": round(float(scores[best]), 6), "index": best}
            )
        return answers

    def sample_instances(self, n: int) -> list[Any]:
        questions = [
            {k: v for k, v in q.items() if k in ("question", "candidates")}
            for q in sample_questions()
        ]
        return [questions[i % len(questions)] for i in range(n)]
