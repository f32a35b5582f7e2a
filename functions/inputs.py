"""Decoding helpers shared by the models: text, base64 payloads, images and WAV audio.

Each helper checks one JSON value and either returns the decoded value or raises
:class:`~functions.model.InvalidInput` with the reason the client gets back. Pillow and NumPy
are imported inside the functions so that importing a model module stays cheap.
"""

from __future__ import annotations

import base64
import binascii
import io
import wave
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from functions.model import InvalidInput

#: the largest base64 payload accepted (characters), about 12 MB of binary data
MAX_B64_CHARS = 16 * 1024 * 1024
#: the largest decoded image accepted, in pixels (width x height)
MAX_IMAGE_PIXELS = 4096 * 4096


#: room for the whitespace and keys around one instance's values in a request's JSON
JSON_SLACK_BYTES = 256


def json_text_bytes(max_chars: int) -> int:
    """The most bytes a JSON string of ``max_chars`` characters can take: quotes, and each
    character escaped as a ``\\uXXXX`` surrogate pair (12 bytes) at worst."""
    return 12 * max_chars + 2


def text(instance: Any, *, max_chars: int, field: str = "text") -> str:
    """A non-empty string of at most ``max_chars`` characters."""
    if not isinstance(instance, str):
        raise InvalidInput(f"{field} must be a string, got {type(instance).__name__}")
    if not instance.strip():
        raise InvalidInput(f"{field} is empty")
    if len(instance) > max_chars:
        raise InvalidInput(f"{field} has {len(instance)} characters; the limit is {max_chars}")
    return instance


def b64_field(instance: Any) -> bytes:
    """The bytes of ``{"b64": "..."}`` (the TF Serving convention for binary inputs)."""
    if not isinstance(instance, dict) or "b64" not in instance:
        raise InvalidInput('expected an object {"b64": "<base64 data>"}')
    payload = instance["b64"]
    if not isinstance(payload, str):
        raise InvalidInput(f"'b64' must be a string, got {type(payload).__name__}")
    if not payload:
        raise InvalidInput("'b64' is empty")
    if len(payload) > MAX_B64_CHARS:
        raise InvalidInput(f"'b64' has {len(payload)} characters; the limit is {MAX_B64_CHARS}")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput(f"'b64' is not valid base64: {exc}") from None


def b64_encode(data: bytes) -> dict[str, str]:
    """The ``{"b64": ...}`` instance for ``data``."""
    return {"b64": base64.b64encode(data).decode("ascii")}


def rgb_image(data: bytes) -> npt.NDArray[np.uint8]:
    """Decode JPEG/PNG (or any format Pillow reads) bytes to an RGB ``uint8`` array (H, W, 3)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > MAX_IMAGE_PIXELS:
                raise InvalidInput(
                    f"image of {width}x{height} pixels exceeds the limit of {MAX_IMAGE_PIXELS}"
                )
            rgb = image.convert("RGB")
    except UnidentifiedImageError:
        raise InvalidInput("'b64' does not decode to an image Pillow can read") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise InvalidInput(f"image cannot be decoded: {exc}") from None
    return np.asarray(rgb, dtype=np.uint8)


def image_bytes(pixels: npt.NDArray[Any], *, fmt: str = "JPEG") -> bytes:
    """Encode an RGB or grey ``uint8`` array as JPEG (quality 90) or PNG bytes."""
    from PIL import Image

    buffer = io.BytesIO()
    image = Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8))
    if fmt == "JPEG":
        image.convert("RGB").save(buffer, format="JPEG", quality=90)
    else:
        image.save(buffer, format=fmt)
    return buffer.getvalue()


@dataclass(frozen=True)
class Audio:
    """Mono 16-bit PCM samples and their rate."""

    pcm: bytes
    sample_rate: int

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / 2 / self.sample_rate


def wav_audio(data: bytes, *, sample_rate: int, max_duration_s: float) -> Audio:
    """Read WAV bytes that must be mono, 16-bit PCM at ``sample_rate`` Hz."""
    try:
        with wave.open(io.BytesIO(data), "rb") as reader:
            channels = reader.getnchannels()
            width = reader.getsampwidth()
            rate = reader.getframerate()
            frames = reader.getnframes()
            if channels != 1:
                raise InvalidInput(f"audio has {channels} channels; send mono")
            if width != 2:
                raise InvalidInput(f"audio has {8 * width}-bit samples; send 16-bit PCM")
            if rate != sample_rate:
                raise InvalidInput(f"audio is sampled at {rate} Hz; send {sample_rate} Hz")
            if frames / rate > max_duration_s:
                raise InvalidInput(
                    f"audio lasts {frames / rate:.1f} s; the limit is {max_duration_s:.0f} s"
                )
            pcm = reader.readframes(frames)
    except (wave.Error, EOFError) as exc:
        raise InvalidInput(f"'b64' is not a PCM WAV file: {exc}") from None
    if not pcm:
        raise InvalidInput("audio has no samples")
    return Audio(pcm=pcm, sample_rate=rate)
