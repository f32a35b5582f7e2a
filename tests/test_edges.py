"""Edge adapters on hand-made predictions: the next instance, every rejection, the lookup.

Pure and fast: no model is loaded. The predictions copy the shapes the real functions answer
(see ``functions/*/model.py``); tests/test_pipelines.py runs the same edges on real ones.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest

from functions.edges import (
    EDGES,
    EdgeError,
    NoEdge,
    check_chain,
    edge_for,
    label_to_question,
    landmarks_face,
    largest_face,
    text_to_question,
    transcript_to_text,
)
from functions.pipelines import PIPELINES
from functions.registry import KINDS

WIDTH, HEIGHT = 120, 90


def _png(width: int = WIDTH, height: int = HEIGHT) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 150, 120)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


IMAGE = {"b64": _png()}


def _box(left: int, top: int, right: int, bottom: int, score: float = 1.0) -> dict[str, Any]:
    return {"left": left, "top": top, "right": right, "bottom": bottom, "score": score}


def _ner(entities: int = 0, chunks: int = 0) -> dict[str, Any]:
    return {
        "entities": [{"text": "Paris", "label": "GPE", "start": 0, "end": 5}] * entities,
        "noun_chunks": [{"text": "the door", "start": 5, "end": 13}] * chunks,
        "tokens": [{"text": "open", "pos": "VERB", "tag": "VB"}],
    }


def test_the_known_pairs() -> None:
    assert set(EDGES) == {
        ("imagenet", "ner"),
        ("asr", "ner"),
        ("ner", "qa"),
        ("face_detect", "face_embed"),
        ("face_detect", "face_landmarks"),
        ("face_landmarks", "face_embed"),
    }
    for upstream, downstream in EDGES:
        assert upstream in KINDS and downstream in KINDS
        assert edge_for(upstream, downstream) is EDGES[(upstream, downstream)]


@pytest.mark.parametrize(
    ("label", "question"),
    [
        ("espresso", "What is an espresso?"),
        ("Egyptian cat", "What is an Egyptian cat?"),
        ("tabby, tabby cat", "What is a tabby?"),
        ("projectile, missile", "What is a projectile?"),
    ],
)
def test_label_to_question(label: str, question: str) -> None:
    top5 = [{"class": 1, "label": label, "p": 0.9}, {"class": 2, "label": "cup", "p": 0.1}]
    assert label_to_question(top5, IMAGE, IMAGE) == question


@pytest.mark.parametrize(
    ("prediction", "reason"),
    [
        ([], "imagenet returned no classes"),
        ({"label": "cup"}, "imagenet returned no classes"),
        ([{"class": 3, "p": 0.5}], "imagenet's top class has no 'label'"),
        ([{"label": 7}], "imagenet's label must be a string"),
        ([{"label": " , cup"}], "empty label"),
    ],
)
def test_label_to_question_rejects(prediction: Any, reason: str) -> None:
    with pytest.raises(EdgeError, match=reason):
        label_to_question(prediction, IMAGE, IMAGE)


def test_transcript_to_text() -> None:
    wav = {"b64": "UklGRg=="}
    assert transcript_to_text({"text": " open the front door "}, wav, wav) == "open the front door"
    for prediction, reason in [
        ({"text": ""}, "asr heard no words"),
        ({"text": "   "}, "asr heard no words"),
        ({"transcript": "hi"}, "asr's prediction has no 'text'"),
        ({"text": None}, "asr's 'text' must be a string"),
        ("hello", "asr's prediction has no 'text'"),
    ]:
        with pytest.raises(EdgeError, match=reason):
            transcript_to_text(prediction, wav, wav)


def test_text_to_question() -> None:
    text = "open the front door"
    assert text_to_question(_ner(chunks=1), text, {}) == {"question": text}
    assert text_to_question(_ner(entities=1), f" {text} ", {}) == {"question": text}
    with pytest.raises(EdgeError, match="ner found no entity or noun chunk to ask about in 'hm'"):
        text_to_question(_ner(), "hm", {})
    with pytest.raises(EdgeError, match="qa takes questions of at most 1000"):
        text_to_question(_ner(chunks=1), "door " * 300, {})
    with pytest.raises(EdgeError, match="ner's input must be a string"):
        text_to_question(_ner(chunks=1), {"text": text}, {})
    with pytest.raises(EdgeError, match="ner's prediction has no 'noun_chunks'"):
        text_to_question({"entities": []}, text, {})
    with pytest.raises(EdgeError, match="must be lists"):
        text_to_question({"entities": None, "noun_chunks": []}, text, {})


def test_largest_face_keeps_the_largest_box_and_drops_the_score() -> None:
    boxes = [_box(10, 10, 30, 30, 2.0), _box(40, 20, 80, 60, 0.5), _box(0, 0, 5, 5, 1.0)]
    instance = largest_face({"boxes": boxes}, IMAGE, IMAGE)
    assert instance == {
        "b64": IMAGE["b64"],
        "box": {"left": 40, "top": 20, "right": 80, "bottom": 60},
    }
    tied = [_box(0, 0, 20, 20, 2.0), _box(50, 50, 70, 70, 1.0)]
    assert largest_face({"boxes": tied}, IMAGE, IMAGE)["box"]["left"] == 0


def test_largest_face_clips_to_the_image() -> None:
    instance = largest_face({"boxes": [_box(-8, -3, WIDTH + 5, HEIGHT + 9)]}, IMAGE, IMAGE)
    assert instance["box"] == {"left": 0, "top": 0, "right": WIDTH, "bottom": HEIGHT}


@pytest.mark.parametrize(
    ("prediction", "stage_input", "reason"),
    [
        ({"boxes": []}, IMAGE, "face_detect found no face in the image"),
        ({"faces": []}, IMAGE, "face_detect's prediction has no 'boxes'"),
        ({"boxes": None}, IMAGE, "'boxes' must be a list"),
        ({"boxes": [{"left": 1, "top": 2}]}, IMAGE, r"boxes\[0\] is not a box"),
        ({"boxes": [{"left": 0, "top": 0, "right": 1.5, "bottom": 2}]}, IMAGE, "non-integer"),
        ({"boxes": [_box(WIDTH + 1, 0, WIDTH + 9, 9)]}, IMAGE, "outside the 120x90 image"),
        ({"boxes": [_box(0, 0, 9, 9)]}, {"image": "x"}, "face_detect's input has no 'b64'"),
        ({"boxes": [_box(0, 0, 9, 9)]}, {"b64": "not base64!"}, "not an image"),
        ({"boxes": [_box(0, 0, 9, 9)]}, {"b64": "aGVsbG8="}, "not an image"),
    ],
)
def test_largest_face_rejects(prediction: Any, stage_input: Any, reason: str) -> None:
    with pytest.raises(EdgeError, match=reason):
        largest_face(prediction, stage_input, stage_input)


def test_landmarks_face() -> None:
    box = {"left": 1, "top": 2, "right": 30, "bottom": 40}
    stage_input = {**IMAGE, "box": box}
    prediction = {"box": box, "ear": {"left": 0.3, "right": 0.3, "mean": 0.3}, "yaw_deg": 2.0}
    assert landmarks_face(prediction, stage_input, IMAGE) == {"b64": IMAGE["b64"], "box": box}
    no_face = {"box": None, "ear": None, "error": "no face found"}
    with pytest.raises(EdgeError, match=r"face_landmarks found no face in the image \(no face"):
        landmarks_face(no_face, stage_input, IMAGE)
    with pytest.raises(EdgeError, match="face_landmarks' prediction has no 'box'"):
        landmarks_face({"ear": None}, stage_input, IMAGE)
    with pytest.raises(EdgeError, match="face_landmarks' box is not a box"):
        landmarks_face({"box": [1, 2, 3, 4]}, stage_input, IMAGE)


GARBAGE: list[Any] = [None, 0, 1.5, "", "x", [], [None], {}, {"boxes": [None]}, {"box": 3}]


@pytest.mark.parametrize("pair", sorted(EDGES), ids=lambda p: "->".join(p))
def test_garbage_raises_only_edge_error(pair: tuple[str, str]) -> None:
    edge = EDGES[pair]
    for prediction in GARBAGE:
        for stage_input in GARBAGE:
            try:
                edge(prediction, stage_input, stage_input)
            except EdgeError as exc:
                assert str(exc)


def test_no_edge_names_both_kinds_and_the_known_pairs() -> None:
    with pytest.raises(NoEdge) as caught:
        edge_for("imagenet", "face_embed")
    assert isinstance(caught.value, KeyError)
    message = str(caught.value)
    assert "'imagenet' to 'face_embed'" in message
    assert "asr -> ner" in message and "face_landmarks -> face_embed" in message


def test_check_chain() -> None:
    for pipeline in PIPELINES.values():
        check_chain(pipeline.stages)
        assert set(pipeline.stages) <= set(KINDS)
    check_chain(["qa"])
    with pytest.raises(NoEdge) as caught:
        check_chain(["asr", "ner", "face_embed", "qa"])
    assert (caught.value.upstream, caught.value.downstream) == ("ner", "face_embed")
    with pytest.raises(ValueError, match="at least one stage"):
        check_chain([])


def test_pipelines_shape() -> None:
    assert set(PIPELINES) == {"img_query", "face_security", "ipa_query", "detect_fatigue"}
    assert PIPELINES["detect_fatigue"].stages == ("face_detect", "face_landmarks", "face_embed")
    for name, pipeline in PIPELINES.items():
        assert pipeline.name == name and pipeline.description and pipeline.paper
        assert pipeline.sample_inputs(0) == []
        with pytest.raises(ValueError, match="non-negative"):
            pipeline.sample_inputs(-1)
