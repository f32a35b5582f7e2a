"""Face detection: dlib's HOG frontal face detector (pretrained, built into ``dlib-bin``).

Input: ``{"b64": base64 of a JPEG/PNG}``. Output: ``{"boxes": [{"left", "top", "right",
"bottom", "score"}]}`` in pixels of the decoded image, most confident first. Images run one by one:
the detector has no batch mode, so the cost grows linearly with the batch.
"""

from __future__ import annotations

from typing import Any

from functions import images
from functions.face_models import astronaut_photos, box_json, detect, detector
from functions.inputs import b64_encode, b64_field, image_bytes, rgb_image
from functions.model import Model
from functions.tensors import TensorSpec


def sample_pixels() -> list[images.Pixels]:
    """Sample images: the face functions' astronaut photos, and the cat (no face)."""
    return [*astronaut_photos(), images.named("chelsea")]


class FaceDetector(Model):
    kind = "face_detect"
    input = TensorSpec("input-0", "BYTES", (-1,), records=True)
    outputs = (TensorSpec("boxes", "BYTES", (-1,), "boxes"),)
    summary = "dlib HOG frontal face detector: face boxes"
    max_instances = 128

    def load(self) -> None:
        self._detector = detector()

    def validate(self, instance: Any) -> Any:
        return rgb_image(b64_field(instance))

    def predict(self, batch: list[Any]) -> list[Any]:
        results = []
        for pixels in batch:
            found = detect(self._detector, pixels)
            results.append(
                {"boxes": [{**box_json(rect), "score": round(score, 4)} for rect, score in found]}
            )
        return results

    def sample_instances(self, n: int) -> list[Any]:
        encoded = [b64_encode(image_bytes(p)) for p in sample_pixels()]
        return images.cycle(encoded, n)
