"""Facial landmarks for fatigue checks: dlib's 68-point shape predictor
(``face-recognition-models``).

This is the "pose / fatigue" stage of the DETECT-Fatigue pipeline. GrandSLAM runs a human-pose
network there; no pose model that runs here ships in a package, so the stage reads the face
instead: the 68 iBUG landmarks give the eyes' opening and the head's left-right turn.

Input: ``{"b64": base64 of a JPEG/PNG, "box": {"left", "top", "right", "bottom"}}`` (the face
box, e.g. from ``face_detect``); without ``box`` the largest face found by the HOG detector is
used, which costs about ten times the landmarks' own few milliseconds. Output::

    {"box": {...}, "ear": {"left": float, "right": float, "mean": float},
     "eyes_closed": bool, "yaw_deg": float, "landmarks": [[x, y], ... 68 points]}

- ``ear`` is the eye aspect ratio of Soukupová and Čech (2016), ``(|p2-p6| + |p3-p5|) /
  (2 |p1-p4|)`` over each eye's six points: about 0.25-0.35 for an open eye and near 0 for a
  closed one. ``left``/``right`` are the subject's own eyes (``right`` is points 36-41, on the
  image's left in a frontal photo).
- ``eyes_closed`` is ``mean < EYES_CLOSED_EAR`` (0.2, the usual threshold for that ratio). It
  judges one image; a fatigue alarm would require it over consecutive frames.
- ``yaw_deg`` is a rough head yaw from where the nose tip (point 30) sits between the jaw's ends
  (points 0 and 16): ``asin(offset / half the jaw width)`` in degrees, 0 for a frontal face,
  positive when the nose points to the image's right (the subject's left). Good to about 15°;
  it tells a driver looking ahead from one looking aside, no more.

An image in which no face is found answers ``{"box": null, "ear": null, "eyes_closed": null,
"yaw_deg": null, "landmarks": null, "error": "no face found"}`` without failing its batch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from functions import images
from functions.face_models import Face, ShapedFaceModel, astronaut_photos, box_json
from functions.inputs import b64_encode, image_bytes
from functions.tensors import TensorSpec

#: the 68-point iBUG shape predictor shipped in face-recognition-models
SHAPE_PREDICTOR_68 = "shape_predictor_68_face_landmarks.dat"
#: a mean eye aspect ratio below this counts as closed eyes
EYES_CLOSED_EAR = 0.2
#: point indices in the 68-point scheme
RIGHT_EYE = slice(36, 42)
LEFT_EYE = slice(42, 48)
JAW_RIGHT_END, JAW_LEFT_END, NOSE_TIP = 0, 16, 30

Points = npt.NDArray[np.float64]


def eye_aspect_ratio(eye: Points) -> float:
    """The eye aspect ratio of six eye points in dlib order (corner, top, top, corner, bottom,
    bottom); 0 for a degenerate eye whose corners coincide."""
    if eye.shape != (6, 2):
        raise ValueError(f"an eye has 6 (x, y) points, got shape {eye.shape}")
    width = float(np.linalg.norm(eye[0] - eye[3]))
    if width == 0.0:
        return 0.0
    height = float(np.linalg.norm(eye[1] - eye[5]) + np.linalg.norm(eye[2] - eye[4]))
    return height / (2.0 * width)


def yaw_degrees(points: Points) -> float:
    """Rough head yaw from 68 landmarks: the nose tip's offset from the jaw's midpoint over half
    the jaw's width, as an angle; positive toward the image's right."""
    if points.shape != (68, 2):
        raise ValueError(f"expected 68 (x, y) points, got shape {points.shape}")
    right_x, left_x = points[JAW_RIGHT_END, 0], points[JAW_LEFT_END, 0]
    half_width = abs(left_x - right_x) / 2.0
    if half_width == 0.0:
        return 0.0
    offset = (points[NOSE_TIP, 0] - (left_x + right_x) / 2.0) / half_width
    return math.degrees(math.asin(max(-1.0, min(1.0, float(offset)))))


def fatigue_signs(points: Points) -> dict[str, Any]:
    """The ``ear``, ``eyes_closed`` and ``yaw_deg`` fields for 68 landmarks."""
    right = eye_aspect_ratio(points[RIGHT_EYE])
    left = eye_aspect_ratio(points[LEFT_EYE])
    mean = (left + right) / 2.0
    return {
        "ear": {"left": round(left, 4), "right": round(right, 4), "mean": round(mean, 4)},
        "eyes_closed": mean < EYES_CLOSED_EAR,
        "yaw_deg": round(yaw_degrees(points), 1),
    }


#: the face boxes face_detect finds in the sample photos (functions.face_models.astronaut_photos:
#: fixed images, so fixed boxes; tests/test_face_landmarks.py checks them against the detector)
SAMPLE_BOXES = (
    {"left": 179, "top": 83, "right": 266, "bottom": 170},
    {"left": 246, "top": 83, "right": 333, "bottom": 170},
    {"left": 133, "top": 61, "right": 205, "bottom": 133},
)


class FaceLandmarks(ShapedFaceModel):
    kind = "face_landmarks"
    input = TensorSpec("input-0", "BYTES", (-1,), records=True)
    outputs = tuple(
        TensorSpec(f, "BYTES", (-1,), f)
        for f in ("box", "ear", "eyes_closed", "yaw_deg", "landmarks", "error")
    )
    summary = "dlib 68-point landmarks: eye aspect ratio, closed eyes, head yaw"
    max_instances = 64
    shape_predictor = SHAPE_PREDICTOR_68

    def describe(self, face: Face, rect: Any, shape: Any) -> dict[str, Any]:
        points = np.array([(p.x, p.y) for p in shape.parts()], dtype=np.float64)
        return {
            "box": box_json(rect),
            **fatigue_signs(points),
            "landmarks": [[int(x), int(y)] for x, y in points],
        }

    def sample_instances(self, n: int) -> list[Any]:
        """The sample photos with their face boxes, as the stage after face_detect gets them
        (so a profile times the landmarks, not a second face detection)."""
        encoded = [
            {**b64_encode(image_bytes(p)), "box": dict(box)}
            for p, box in zip(astronaut_photos(), SAMPLE_BOXES, strict=True)
        ]
        return images.cycle(encoded, n)
