"""Face embeddings: dlib's ResNet face recognition model (``face-recognition-models``) after
5-point alignment.

Input: ``{"b64": base64 of a JPEG/PNG, "box": {"left", "top", "right", "bottom"}}``; without
``box`` the largest face found by the HOG detector is used. Output: ``{"embedding": [128 floats],
"box": {...}}``; an image in which no face is found answers ``{"embedding": null, "box": null,
"error": "no face found"}`` without failing the rest of its batch. Two embeddings closer than 0.6
(Euclidean) are taken to be the same person (dlib's threshold).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from functions import images
from functions.face_models import (
    RECOGNITION_MODEL,
    Face,
    ShapedFaceModel,
    astronaut_photos,
    box_json,
    model_file,
)
from functions.inputs import b64_encode, image_bytes
from functions.tensors import TensorSpec

#: embeddings closer than this are the same person
SAME_PERSON_DISTANCE = 0.6


class FaceEmbedder(ShapedFaceModel):
    kind = "face_embed"
    input = TensorSpec("input-0", "BYTES", (-1,), records=True)
    outputs = tuple(TensorSpec(f, "BYTES", (-1,), f) for f in ("embedding", "box", "error"))
    summary = "dlib ResNet 128-d face embedding (5-point aligned)"
    max_instances = 64

    def load(self) -> None:
        import dlib

        super().load()
        self._net = dlib.face_recognition_model_v1(str(model_file(RECOGNITION_MODEL)))

    def describe(self, face: Face, rect: Any, shape: Any) -> dict[str, Any]:
        vector = np.asarray(self._net.compute_face_descriptor(face.pixels, shape))
        return {"embedding": [round(float(v), 6) for v in vector], "box": box_json(rect)}

    def sample_instances(self, n: int) -> list[Any]:
        encoded = [b64_encode(image_bytes(p)) for p in astronaut_photos()]
        return images.cycle(encoded, n)
