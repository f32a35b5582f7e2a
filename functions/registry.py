"""Model kinds by name, imported lazily so the core never imports a heavy model package."""

from __future__ import annotations

import importlib

from functions.errors import FunctionsError
from functions.model import Model

#: kind -> "module:Class"; the module is imported only when the kind is used
KINDS: dict[str, str] = {
    "digits": "functions.digits.model:DigitsClassifier",
    "embed": "functions.embed.model:SentenceEmbedder",
    "qa": "functions.qa.model:RetrievalQA",
    "ner": "functions.ner.model:EntityTagger",
    "imagenet": "functions.imagenet.model:ImageNetClassifier",
    "face_detect": "functions.face_detect.model:FaceDetector",
    "face_embed": "functions.face_embed.model:FaceEmbedder",
    "face_landmarks": "functions.face_landmarks.model:FaceLandmarks",
    "asr": "functions.asr.model:SpeechRecognizer",
}


class UnknownModel(FunctionsError, KeyError):
    """No model kind of that name."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind

    def __str__(self) -> str:
        return f"unknown model kind {self.kind!r}; known: {', '.join(sorted(KINDS))}"


def model_class(kind: str) -> type[Model]:
    """The Model subclass for ``kind``."""
    try:
        target = KINDS[kind]
    except KeyError:
        raise UnknownModel(kind) from None
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, Model)):
        raise TypeError(f"{target} is not a Model subclass")
    return cls


def create_model(kind: str, *, threads: int = 1, device: str = "cpu") -> Model:
    """A fresh, unloaded instance of ``kind`` (DeviceUnavailable for a device its framework
    cannot compute on)."""
    return model_class(kind)(threads=threads, device=device)
