"""Edge adapters: how one stage's prediction becomes the next stage's instance in a pipeline.

A multi-stage app (``functions.pipelines``) runs model functions in sequence; between two
stages an *edge* turns the upstream function's prediction for one request into exactly one
instance for the downstream function (1:1, so a request stays one request through the whole
pipeline: where the upstream finds several faces, the edge keeps the largest). Edges are pure:
no model, no I/O, only the shapes of the functions' V1 instances and predictions (see each
``functions/*/model.py``), so the orchestrator can call them between batches on its event loop.

An edge is called as ``edge(prediction, stage_input, app_input)``: ``prediction`` is one element
of the upstream's ``predictions`` list, ``stage_input`` the instance the upstream received and
``app_input`` the instance the client sent to the app. When a prediction cannot feed the next
stage (no face, empty transcript, ...) the edge raises :class:`EdgeError` naming the stage and
what it found; the orchestrator answers that request with HTTP 422 and the reason. An edge
raises nothing else for bad data.

The edges, by (upstream, downstream) model kind:

- ``imagenet -> ner``: top-5 ``[{"class", "label", "p"}]`` -> the question ``"What is an
  espresso?"`` built from the top class's first name (the label before its first comma).
- ``asr -> ner``: ``{"text"}`` -> the transcript, stripped.
- ``ner -> qa``: ``{"entities", "noun_chunks", "tokens"}`` of the text ``stage_input`` ->
  ``{"question": stage_input}`` once the tagger found something to ask about (an entity or a
  noun chunk); answered from the QA function's built-in passages.
- ``face_detect -> face_embed`` and ``face_detect -> face_landmarks``: ``{"boxes": [{"left",
  "top", "right", "bottom", "score"}]}`` of the image ``{"b64"}`` -> ``{"b64", "box"}`` with the
  largest box, clipped to the image (dlib's boxes may stick out of it; the face functions
  reject a box that does not fit).
- ``face_landmarks -> face_embed``: ``{"box", "ear", "eyes_closed", "yaw_deg", "landmarks"}``
  -> ``{"b64", "box"}``: the same image and face box.
"""

from __future__ import annotations

import base64
import binascii
import io
import itertools
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from functions.errors import FunctionsError
from functions.qa.model import MAX_CHARS as QA_MAX_CHARS

#: ``edge(prediction, stage_input, app_input) -> next_instance``
Edge = Callable[[Any, Any, Any], Any]

_BOX_KEYS = ("left", "top", "right", "bottom")


class EdgeError(FunctionsError, ValueError):
    """A prediction that cannot feed the next stage; the message is the reason (HTTP 422)."""


class NoEdge(FunctionsError, KeyError):
    """No edge adapter joins these two model kinds."""

    def __init__(self, upstream: str, downstream: str) -> None:
        super().__init__(upstream, downstream)
        self.upstream = upstream
        self.downstream = downstream

    def __str__(self) -> str:
        known = ", ".join(f"{up} -> {down}" for up, down in sorted(EDGES))
        return (
            f"no edge from model kind {self.upstream!r} to {self.downstream!r}; "
            f"known pairs: {known}"
        )


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _field(value: Any, key: str, where: str) -> Any:
    """``value[key]`` of a JSON object, or EdgeError naming where it was expected."""
    if not isinstance(value, dict) or key not in value:
        raise EdgeError(f"{where} has no {key!r}: got {_short(value)}")
    return value[key]


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise EdgeError(f"{where} must be a string, got {_short(value)}")
    return value


def _image_size(b64: str, where: str) -> tuple[int, int]:
    """(width, height) of a base64 JPEG/PNG from its header (Pillow reads no pixels here)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(base64.b64decode(b64, validate=True))) as image:
            width, height = image.size
    except (binascii.Error, UnidentifiedImageError, OSError, ValueError) as exc:
        raise EdgeError(f"{where} is not an image: {exc}") from None
    return int(width), int(height)


def _box(value: Any, where: str) -> dict[str, int]:
    """A ``{"left", "top", "right", "bottom"}`` box of integers (extra keys such as score
    dropped)."""
    if not isinstance(value, dict) or not all(k in value for k in _BOX_KEYS):
        raise EdgeError(f"{where} is not a box with {', '.join(_BOX_KEYS)}: got {_short(value)}")
    coords = {k: value[k] for k in _BOX_KEYS}
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in coords.values()):
        raise EdgeError(f"{where} has non-integer coordinates: {_short(value)}")
    return coords


def _area(box: dict[str, int]) -> int:
    return max(0, box["right"] - box["left"]) * max(0, box["bottom"] - box["top"])


def label_to_question(prediction: Any, stage_input: Any, app_input: Any) -> str:
    """imagenet -> ner: ask what the top class is (``"What is a tiger cat?"``)."""
    if not isinstance(prediction, list) or not prediction:
        raise EdgeError(f"imagenet returned no classes for the image: got {_short(prediction)}")
    label = _string(_field(prediction[0], "label", "imagenet's top class"), "imagenet's label")
    name = label.split(",")[0].strip()
    if not name:
        raise EdgeError(f"imagenet's top class has an empty label: {_short(prediction[0])}")
    article = "an" if name[0].lower() in "aeiou" else "a"
    return f"What is {article} {name}?"


def transcript_to_text(prediction: Any, stage_input: Any, app_input: Any) -> str:
    """asr -> ner: the transcript, which must hold at least one word."""
    transcript = _string(_field(prediction, "text", "asr's prediction"), "asr's 'text'").strip()
    if not transcript:
        raise EdgeError("asr heard no words in the audio (empty transcript)")
    return transcript


def text_to_question(prediction: Any, stage_input: Any, app_input: Any) -> dict[str, str]:
    """ner -> qa: the tagged text becomes the question, if the tagger found a subject in it."""
    text = _string(stage_input, "ner's input").strip()
    entities = _field(prediction, "entities", "ner's prediction")
    chunks = _field(prediction, "noun_chunks", "ner's prediction")
    if not isinstance(entities, list) or not isinstance(chunks, list):
        raise EdgeError(f"ner's entities and noun_chunks must be lists: got {_short(prediction)}")
    if not entities and not chunks:
        raise EdgeError(f"ner found no entity or noun chunk to ask about in {_short(text)}")
    if len(text) > QA_MAX_CHARS:
        raise EdgeError(
            f"ner's text has {len(text)} characters; qa takes questions of at most {QA_MAX_CHARS}"
        )
    return {"question": text}


def largest_face(prediction: Any, stage_input: Any, app_input: Any) -> dict[str, Any]:
    """face_detect -> face_embed / face_landmarks: the image with its largest face's box."""
    boxes = _field(prediction, "boxes", "face_detect's prediction")
    if not isinstance(boxes, list):
        raise EdgeError(f"face_detect's 'boxes' must be a list: got {_short(boxes)}")
    if not boxes:
        raise EdgeError("face_detect found no face in the image")
    b64 = _string(_field(stage_input, "b64", "face_detect's input"), "face_detect's 'b64'")
    parsed = [_box(box, f"face_detect's boxes[{i}]") for i, box in enumerate(boxes)]
    largest = max(parsed, key=_area)  # max keeps the first (most confident) of equal areas
    width, height = _image_size(b64, "face_detect's input")
    clipped = {
        "left": max(0, largest["left"]),
        "top": max(0, largest["top"]),
        "right": min(width, largest["right"]),
        "bottom": min(height, largest["bottom"]),
    }
    if clipped["left"] >= clipped["right"] or clipped["top"] >= clipped["bottom"]:
        raise EdgeError(
            f"face_detect's largest box {largest} lies outside the {width}x{height} image"
        )
    return {"b64": b64, "box": clipped}


def landmarks_face(prediction: Any, stage_input: Any, app_input: Any) -> dict[str, Any]:
    """face_landmarks -> face_embed: the same image and face box."""
    box = _field(prediction, "box", "face_landmarks' prediction")
    if box is None:
        reason = prediction.get("error") or "no box"
        raise EdgeError(f"face_landmarks found no face in the image ({reason})")
    b64 = _string(_field(stage_input, "b64", "face_landmarks' input"), "face_landmarks' 'b64'")
    return {"b64": b64, "box": _box(box, "face_landmarks' box")}


#: (upstream kind, downstream kind) -> edge adapter
EDGES: Mapping[tuple[str, str], Edge] = MappingProxyType(
    {
        ("imagenet", "ner"): label_to_question,
        ("asr", "ner"): transcript_to_text,
        ("ner", "qa"): text_to_question,
        ("face_detect", "face_embed"): largest_face,
        ("face_detect", "face_landmarks"): largest_face,
        ("face_landmarks", "face_embed"): landmarks_face,
    }
)


def edge_for(upstream_kind: str, downstream_kind: str) -> Edge:
    """The edge adapter from ``upstream_kind`` to ``downstream_kind``; raises :class:`NoEdge`."""
    try:
        return EDGES[(upstream_kind, downstream_kind)]
    except KeyError:
        raise NoEdge(upstream_kind, downstream_kind) from None


def check_chain(kinds: Sequence[str]) -> None:
    """Check that every consecutive pair of ``kinds`` has an edge; raises :class:`NoEdge` for
    the first pair that has none (and ValueError for an empty chain)."""
    if not kinds:
        raise ValueError("a pipeline needs at least one stage")
    for upstream, downstream in itertools.pairwise(kinds):
        edge_for(upstream, downstream)
