"""face_landmarks: eye aspect ratio, closed eyes and yaw, on hand-made points and real photos.

The geometry tests are pure. The ``models`` tests load dlib's 68-point predictor and check the
astronaut portrait: eyes open (EAR above the threshold), a near-frontal head whose yaw flips sign
with the mirrored photo, landmarks where a face's parts are; then the same photo with the eyes
painted shut (skin colour and a dark lid line) must read as closed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from functions.face_landmarks.model import (
    EYES_CLOSED_EAR,
    SAMPLE_BOXES,
    eye_aspect_ratio,
    fatigue_signs,
    yaw_degrees,
)
from functions.model import InvalidInput, Model


def _eye(x: float, opening: float) -> np.ndarray[Any, Any]:
    """Six points of a 30 px wide eye, lids ``opening`` px apart, in dlib's order."""
    half = opening / 2
    return np.array(
        [(x, 0), (x + 10, -half), (x + 20, -half), (x + 30, 0), (x + 20, half), (x + 10, half)],
        dtype=np.float64,
    )


def _face(opening: float, nose_x: float) -> np.ndarray[Any, Any]:
    """68 points: jaw ends at x=0 and x=100, the nose tip at ``nose_x``, two eyes."""
    points = np.zeros((68, 2))
    points[0] = (0, 50)
    points[16] = (100, 50)
    points[30] = (nose_x, 60)
    points[36:42] = _eye(15, opening)
    points[42:48] = _eye(55, opening)
    return points


def test_eye_aspect_ratio() -> None:
    assert eye_aspect_ratio(_eye(0, 10)) == pytest.approx(20 / 60)
    assert eye_aspect_ratio(_eye(0, 1)) == pytest.approx(2 / 60)
    assert eye_aspect_ratio(np.zeros((6, 2))) == 0.0
    with pytest.raises(ValueError, match="6"):
        eye_aspect_ratio(np.zeros((5, 2)))


def test_yaw_sign_and_size() -> None:
    assert yaw_degrees(_face(10, 50)) == pytest.approx(0.0)
    assert yaw_degrees(_face(10, 75)) == pytest.approx(30.0)
    assert yaw_degrees(_face(10, 25)) == pytest.approx(-30.0)
    assert yaw_degrees(_face(10, 500)) == pytest.approx(90.0)
    with pytest.raises(ValueError, match="68"):
        yaw_degrees(np.zeros((5, 2)))


def test_fatigue_signs_threshold() -> None:
    open_eyes = fatigue_signs(_face(10, 50))
    assert open_eyes["ear"]["mean"] == pytest.approx(0.3333, abs=1e-4)
    assert open_eyes["eyes_closed"] is False
    closed = fatigue_signs(_face(2, 60))
    assert closed["ear"]["mean"] < EYES_CLOSED_EAR and closed["eyes_closed"] is True
    assert closed["yaw_deg"] > 0


@pytest.fixture(scope="module")
def landmarks() -> Model:
    pytest.importorskip("dlib")
    pytest.importorskip("skimage")
    from functions.registry import create_model

    model = create_model("face_landmarks")
    model.load()
    return model


def _jpeg(pixels: np.ndarray[Any, Any], **extra: Any) -> dict[str, Any]:
    from functions.inputs import b64_encode, image_bytes

    return {**b64_encode(image_bytes(pixels)), **extra}


def _run(model: Model, instances: list[Any]) -> list[Any]:
    return model.predict([model.validate(i) for i in instances])


@pytest.mark.models
def test_astronaut_eyes_open_and_frontal(landmarks: Model) -> None:
    original, mirrored, small = _run(landmarks, landmarks.sample_instances(3))
    for result in (original, mirrored, small):
        assert result["eyes_closed"] is False
        assert min(result["ear"]["left"], result["ear"]["right"]) > EYES_CLOSED_EAR
        assert abs(result["yaw_deg"]) < 15
    assert abs(original["yaw_deg"] + mirrored["yaw_deg"]) < 5

    box = original["box"]
    assert 150 < box["left"] < box["right"] < 300 and 50 < box["top"] < box["bottom"] < 200
    points = np.asarray(original["landmarks"])
    assert points.shape == (68, 2)
    margin = 0.15 * (box["right"] - box["left"])
    assert (points[:, 0] >= box["left"] - margin).all()
    assert (points[:, 0] <= box["right"] + margin).all()
    assert (points[:, 1] >= box["top"] - margin).all()
    assert (points[:, 1] <= box["bottom"] + margin).all()
    eyes_y, nose_y, mouth_y = points[36:48, 1].mean(), points[30, 1], points[48:68, 1].mean()
    assert eyes_y < nose_y < mouth_y
    # the subject's right eye (36-41) is on the image's left
    assert points[36:42, 0].mean() < points[30, 0] < points[42:48, 0].mean()


@pytest.mark.models
def test_sample_boxes_are_the_detected_faces(landmarks: Model) -> None:
    samples = landmarks.sample_instances(3)
    assert [s["box"] for s in samples] == list(SAMPLE_BOXES)
    found = _run(landmarks, [{"b64": s["b64"]} for s in samples])  # no box: detects the face
    for sample, result in zip(samples, found, strict=True):
        box, detected = sample["box"], result["box"]
        assert all(abs(box[k] - detected[k]) <= 3 for k in box), (box, detected)


@pytest.mark.models
def test_eyes_painted_shut_read_closed(landmarks: Model) -> None:
    from functions import images

    pixels = images.named("astronaut")
    (found,) = _run(landmarks, [_jpeg(pixels)])
    points = np.asarray(found["landmarks"])
    shut = pixels.copy()
    for eye in (points[36:42], points[42:48]):
        left, right = eye[:, 0].min() - 3, eye[:, 0].max() + 3
        top, bottom = eye[:, 1].min() - 4, eye[:, 1].max() + 4
        skin = pixels[bottom + 6 : bottom + 10, left:right].reshape(-1, 3).mean(axis=0)
        shut[top:bottom, left:right] = skin.astype(np.uint8)
        lid = int(eye[:, 1].mean())
        shut[lid : lid + 2, left + 3 : right - 3] = (40, 30, 30)
    (result,) = _run(landmarks, [_jpeg(shut)])
    assert result["eyes_closed"] is True
    assert result["ear"]["mean"] < EYES_CLOSED_EAR < found["ear"]["mean"]


@pytest.mark.models
def test_no_face_and_bad_input(landmarks: Model) -> None:
    from functions import images

    (result,) = _run(landmarks, [_jpeg(images.named("coffee"))])
    assert result["error"] == "no face found"
    assert result["box"] is None and result["ear"] is None and result["landmarks"] is None
    pixels = images.named("astronaut")
    for bad, reason in (
        (_jpeg(pixels, box={"left": 0, "top": 0, "right": 600, "bottom": 10}), "does not fit"),
        (_jpeg(pixels, box={"left": 0, "top": 0, "right": 10}), "box"),
        (_jpeg(pixels, eyes="open"), "unknown keys: eyes"),
        ({"image": "x"}, "b64"),
    ):
        with pytest.raises(InvalidInput, match=reason):
            landmarks.validate(bad)
