"""Multi-stage apps built from this project's real functions, after GrandSLAM's Table 3.

GrandSLAM (seed 000) evaluates sequential pipelines of shared microservices; four of its apps
map onto the functions here. Each stage is a model kind (``functions.registry.KINDS``); between
two stages an edge adapter (``functions.edges``) turns the upstream prediction for one
request into
exactly one instance for the next stage, or rejects the request (HTTP 422) when it cannot, e.g.
when no face is found.

``img_query`` (IMG-Query, IMG -> NLP -> QA): ``{"b64": JPEG}`` -> ``imagenet`` (top-5 classes)
-> ``ner`` gets the question ``"What is an espresso?"`` made from the top class -> ``qa`` gets
``{"question": ...}`` and answers from its built-in passages, which describe the sample images'
classes. The paper's app produces a description of the image; here the "description" is the
passage retrieved for the recognised class.

``face_security`` (FACE-Security, FACED -> FACER): ``{"b64": JPEG}`` -> ``face_detect`` (boxes)
-> ``face_embed`` gets ``{"b64", "box"}`` with the largest face and answers its 128-d embedding;
two photos of one person lie within 0.6 of each other. The paper's FACER gives the probability
of a known person; matching the embedding against enrolled ones is left to the caller.

``ipa_query`` (IPA-Query, ASR -> NLP -> QA): ``{"b64": 16 kHz WAV}`` -> ``asr`` (transcript) ->
``ner`` gets the transcript -> ``qa`` gets ``{"question": transcript}`` and answers from its
passages (the sample clips ask about an alarm, the front door and the weather).

``detect_fatigue`` (DETECT-Fatigue, HS -> AP -> FACED -> FACER): ``{"b64": JPEG}`` ->
``face_detect`` -> ``face_landmarks`` gets ``{"b64", "box"}`` and measures the eyes' opening and
the head's yaw -> ``face_embed`` gets the same ``{"b64", "box"}`` and identifies the driver.
This one differs most from the paper: no human-segmentation or pose model that runs here ships in
a package, so the pose stage reads 68 facial landmarks instead (eye aspect ratio, closed eyes,
yaw), and segmentation is dropped; the face is found first because the landmarks need its box.

POSE-Sign and Translation need pose and sequence-to-sequence models we do not have.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from functions import images
from functions.inputs import b64_encode, image_bytes

#: img_query's sample images (scikit-image names), each with a passage about its top class
IMG_QUERY_IMAGES = ("coffee", "chelsea", "rocket", "camera", "stereo_motorcycle")


@dataclass(frozen=True)
class Pipeline:
    """A sequential app: its model kinds in order and where its sample inputs come from."""

    name: str
    stages: tuple[str, ...]
    description: str
    #: the app as GrandSLAM's Table 3 names it, with its stages there
    paper: str
    samples: Callable[[], list[Any]] = field(repr=False, compare=False)

    def sample_inputs(self, n: int) -> list[Any]:
        """``n`` real app inputs (the JSON instances a client sends), taken round-robin."""
        if n < 0:
            raise ValueError(f"n must be non-negative, got {n}")
        return images.cycle(self.samples(), n) if n else []


def _image(name: str) -> images.Pixels:
    if name == "stereo_motorcycle":  # a (left, right, disparity) triple; the left view
        import numpy as np
        import skimage.data

        loader: Callable[[], tuple[Any, ...]] = skimage.data.stereo_motorcycle
        left: images.Pixels = np.asarray(loader()[0], dtype=np.uint8)
        return left
    return images.named(name)


def _jpeg(pixels: images.Pixels) -> dict[str, str]:
    return b64_encode(image_bytes(pixels))


def img_query_inputs() -> list[Any]:
    """Espresso, the cat, the rocket, the camera man on his tripod and a moped."""
    return [_jpeg(_image(name)) for name in IMG_QUERY_IMAGES]


def face_inputs() -> list[Any]:
    """The astronaut portrait, mirrored and at 75 % size: one face, three photos."""
    astronaut = images.named("astronaut")
    return [
        _jpeg(p) for p in (astronaut, images.mirrored(astronaut), images.scaled(astronaut, 0.75))
    ]


def speech_inputs() -> list[Any]:
    """The bundled spoken requests (alarm, door, weather) as WAV instances."""
    from functions.asr.model import sample_transcripts, sample_wav

    return [b64_encode(sample_wav(name)) for name in sorted(sample_transcripts())]


PIPELINES: Mapping[str, Pipeline] = MappingProxyType(
    {
        "img_query": Pipeline(
            name="img_query",
            stages=("imagenet", "ner", "qa"),
            description="classify an image, ask what its class is, answer from the passages",
            paper="IMG-Query: IMG -> NLP -> QA",
            samples=img_query_inputs,
        ),
        "face_security": Pipeline(
            name="face_security",
            stages=("face_detect", "face_embed"),
            description="find the largest face in an image and embed it for identification",
            paper="FACE-Security: FACED -> FACER",
            samples=face_inputs,
        ),
        "ipa_query": Pipeline(
            name="ipa_query",
            stages=("asr", "ner", "qa"),
            description="transcribe a spoken question, tag it, answer from the passages",
            paper="IPA-Query: ASR -> NLP -> QA",
            samples=speech_inputs,
        ),
        "detect_fatigue": Pipeline(
            name="detect_fatigue",
            stages=("face_detect", "face_landmarks", "face_embed"),
            description="find a driver's face, check closed eyes and head yaw, identify the driver",
            paper="DETECT-Fatigue: HS -> AP -> FACED -> FACER (pose replaced by face landmarks)",
            samples=face_inputs,
        ),
    }
)
