"""dlib models shared by the face functions: the HOG frontal face detector built into dlib and
the 5-point shape predictor and ResNet recognition model shipped in ``face-recognition-models``.

The ``.dat`` files are located with :func:`importlib.util.find_spec` without importing that
package, whose ``__init__`` needs ``pkg_resources`` (gone from setuptools 81).
dlib offers no thread setting for these models; they run on the calling thread.
"""

from __future__ import annotations

import abc
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from functions import images
from functions.inputs import b64_field, rgb_image
from functions.model import InvalidInput, Model

#: dlib's detector upsamples the image this many times before looking for faces
UPSAMPLE = 0
#: detections scoring below this are dropped (dlib's default of 0 lets through a patch of the
#: astronaut's suit at about 0.1-0.2 on JPEG copies; true faces there score above 1)
MIN_SCORE = 0.3
SHAPE_PREDICTOR = "shape_predictor_5_face_landmarks.dat"
RECOGNITION_MODEL = "dlib_face_recognition_resnet_model_v1.dat"
#: what an image in which no face is found answers besides a None for every other output
NO_FACE = {"error": "no face found"}
_BOX_KEYS = ("left", "top", "right", "bottom")


def model_file(name: str) -> Path:
    """The path of one ``.dat`` file inside the face-recognition-models package."""
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package face-recognition-models is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from face-recognition-models")
    return path


def detector() -> Any:
    """dlib's HOG + linear SVM frontal face detector."""
    import dlib

    return dlib.get_frontal_face_detector()


def detect(face_detector: Any, pixels: npt.NDArray[np.uint8]) -> list[tuple[Any, float]]:
    """(rectangle, score) for each face found, most confident first."""
    rects, scores, _ = face_detector.run(pixels, UPSAMPLE, MIN_SCORE)
    found = [(rect, float(score)) for rect, score in zip(rects, scores, strict=True)]
    return sorted(found, key=lambda item: -item[1])


def box_json(rect: Any) -> dict[str, int]:
    """A dlib rectangle as ``{"left", "top", "right", "bottom"}`` pixel coordinates."""
    return {
        "left": int(rect.left()),
        "top": int(rect.top()),
        "right": int(rect.right()),
        "bottom": int(rect.bottom()),
    }


def parse_box(value: Any, pixels: npt.NDArray[np.uint8]) -> tuple[int, int, int, int]:
    """Check a box object against the image; returns (left, top, right, bottom)."""
    if not isinstance(value, dict) or set(value) != set(_BOX_KEYS):
        raise InvalidInput('\'box\' must be {"left", "top", "right", "bottom"} in pixels')
    coords = [value[k] for k in _BOX_KEYS]
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in coords):
        raise InvalidInput("box coordinates must be integers")
    left, top, right, bottom = coords
    height, width = pixels.shape[:2]
    if not (0 <= left < right <= width and 0 <= top < bottom <= height):
        raise InvalidInput(f"box {value} does not fit inside the {width}x{height} image")
    return left, top, right, bottom


@dataclass(frozen=True)
class Face:
    """A validated face-function instance: the image and, when the caller gave it, the face box
    (the face detector's output, passed on by a chain's edge)."""

    pixels: npt.NDArray[np.uint8]
    box: tuple[int, int, int, int] | None


def face_instance(instance: Any) -> Face:
    """``{"b64": image, "box"?: {...}}`` -> :class:`Face`; InvalidInput names what is wrong."""
    pixels = rgb_image(b64_field(instance))
    unknown = set(instance) - {"b64", "box"}
    if unknown:
        raise InvalidInput(f"unknown keys: {', '.join(sorted(unknown))}")
    box = parse_box(instance["box"], pixels) if "box" in instance else None
    return Face(pixels, box)


def astronaut_photos() -> list[images.Pixels]:
    """The face functions' sample photos: the astronaut portrait, mirrored and at 75 % size
    (one person, one open-eyed face, in three photos)."""
    astronaut = images.named("astronaut")
    return [astronaut, images.mirrored(astronaut), images.scaled(astronaut, 0.75)]


def face_rect(face_detector: Any, rectangle: Any, face: Face) -> Any | None:
    """The dlib rectangle of ``face``: its given box, else the largest face the detector finds
    (None when it finds none)."""
    if face.box is not None:
        return rectangle(*face.box)
    found = detect(face_detector, face.pixels)
    if not found:
        return None
    return max((r for r, _ in found), key=lambda r: r.area())


class ShapedFaceModel(Model):
    """A face function that fits a dlib shape predictor to each face (its given box, else the
    largest the detector finds) and answers what :meth:`describe` reads from the shape; an image
    in which no face is found answers every output ``None`` and ``error: "no face found"``,
    without failing the rest of its batch."""

    #: the shape predictor's ``.dat`` file in face-recognition-models
    shape_predictor: str = SHAPE_PREDICTOR

    def load(self) -> None:
        import dlib

        self._detector = detector()
        self._shapes = dlib.shape_predictor(str(model_file(self.shape_predictor)))
        self._rectangle = dlib.rectangle

    def validate(self, instance: Any) -> Any:
        return face_instance(instance)

    def predict(self, batch: list[Any]) -> list[Any]:
        results: list[dict[str, Any]] = []
        for face in batch:
            rect = face_rect(self._detector, self._rectangle, face)
            if rect is None:
                results.append({**dict.fromkeys(o.name for o in self.outputs), **NO_FACE})
            else:
                results.append(self.describe(face, rect, self._shapes(face.pixels, rect)))
        return results

    @abc.abstractmethod
    def describe(self, face: Face, rect: Any, shape: Any) -> dict[str, Any]:
        """The answer for ``face`` found at ``rect`` with the predictor's ``shape``."""
