"""Real sample images from scikit-image's bundled data, for sample instances and checks.

Only images that scikit-image ships inside the package are used (no download): the astronaut
portrait (one frontal face), the cat (Chelsea), a cup of coffee, the rocket and the 8-bit
camera man. Variants of the astronaut (mirrored, scaled) stand in for several photos of one
person.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

Pixels = npt.NDArray[np.uint8]


def _skimage(name: str) -> Pixels:
    import skimage.data

    loader: Callable[[], npt.NDArray[Any]] = getattr(skimage.data, name)
    pixels = np.asarray(loader(), dtype=np.uint8)
    if pixels.ndim == 2:
        pixels = np.stack([pixels] * 3, axis=-1)
    return pixels[..., :3]


def named(name: str) -> Pixels:
    """One bundled image by its ``skimage.data`` name, as RGB ``uint8``."""
    return _skimage(name)


def mirrored(pixels: Pixels) -> Pixels:
    """The image flipped left to right."""
    return np.ascontiguousarray(pixels[:, ::-1])


def scaled(pixels: Pixels, factor: float) -> Pixels:
    """The image resized by ``factor`` (bilinear)."""
    from PIL import Image

    height, width = pixels.shape[:2]
    size = (max(1, round(width * factor)), max(1, round(height * factor)))
    return np.asarray(Image.fromarray(pixels).resize(size, Image.Resampling.BILINEAR))


def cycle(images: list[Any], n: int) -> list[Any]:
    """``n`` items taken round-robin from ``images``."""
    return [images[i % len(images)] for i in range(n)]


def lfw_faces(count: int, *, size: int = 200) -> list[Pixels]:
    """``count`` faces from scikit-image's bundled LFW subset (25x25 grey), upscaled to RGB.

    The subset's first 100 images are faces of various people; every 20th is taken so that the
    faces differ. They are too small for the HOG detector, so callers pass the whole image as
    the face box.
    """
    import skimage.data

    loader: Callable[[], npt.NDArray[Any]] = skimage.data.lfw_subset
    faces = loader()[:100]
    step = max(1, len(faces) // max(1, count))
    picked = [np.asarray(faces[i * step] * 255, dtype=np.uint8) for i in range(count)]
    return [scaled(np.stack([face] * 3, axis=-1), size / face.shape[0]) for face in picked]
