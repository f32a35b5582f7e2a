"""The GPU profile set: our stages on one H100, from measured batch-latency curves.

Most of our models have no GPU build, so each stage is mapped to the nearest of the models whose
batch latency was measured on one H100 (PyTorch eager fp16, median ms per batch; shared
MODELS.md, GPU table) and takes that curve. embed and qa were measured on a GPU once
(``functions/profiles/gpu/h200``; docs/gpu.md sets the MiniLM-L6 curve against them: a bare fp16
forward pass, it is 2-16x faster than the real functions); qa keeps the curve below until the
mixed fleets' tables are regenerated with the measured one:

======================  ==============  ==================================================
stage                   GPU model       why
======================  ==============  ==================================================
imagenet                ResNet-50       an ImageNet CNN classifier (ours: EfficientNet-Lite0)
face_embed              ResNet-50       dlib's face embedding is a ResNet
face_detect             VGG16           a plain conv net over the image (ours: HOG, no CNN)
face_landmarks          VGG16           a small conv regressor over the face crop
ner                     BERT-base       a token-level language model over a sentence
asr                     BERT-base       a transformer encoder over a 128-frame sequence
qa                      MiniLM-L6       ours ranks sentences with MiniLM-L6 itself
======================  ==============  ==================================================

Assumptions, stated in every file's ``source``: the P95 is the median × 1.1 (GPU batch times
are tight; the curves give medians only), a cold start is 10 s (container start, CUDA context,
weights to device), and the linear fit is least squares over the measured points. Batch sizes
between measured ones are interpolated by :class:`simulator.service.ServiceCurve`.

``python -m simulator.gpu_profiles`` rewrites ``functions/profiles/gpu/*.json``; the committed
files are its output.
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

__all__ = ["CURVES", "STAGE_MODEL", "gpu_profile_document"]

#: median ms per batch on one H100, by batch size
CURVES: dict[str, dict[int, float]] = {
    "ResNet-50": {1: 5.3, 16: 5.6, 64: 6.3, 128: 9.8, 256: 18.6, 512: 36.3},
    "BERT-base": {1: 4.0, 32: 4.5, 128: 8.6, 512: 31.5},
    "MiniLM-L6": {1: 3.4, 128: 3.8, 512: 6.9},
    "VGG16": {1: 0.8, 32: 4.4, 128: 16.3},
}
STAGE_MODEL: dict[str, str] = {
    "imagenet": "ResNet-50",
    "face_embed": "ResNet-50",
    "face_detect": "VGG16",
    "face_landmarks": "VGG16",
    "ner": "BERT-base",
    "asr": "BERT-base",
    "qa": "MiniLM-L6",
}
P95_OVER_MEDIAN = 1.1
COLD_START_S = 10.0


def _fit(points: dict[int, float]) -> tuple[float, float]:
    xs, ys = list(points), list(points.values())
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - b * mx, b


def gpu_profile_document(stage: str) -> dict[str, object]:
    """The profile JSON (``functions.profile_format`` schema, plus ``source``) of ``stage``."""
    model = STAGE_MODEL[stage]
    curve = CURVES[model]
    table = {
        str(n): {"median": ms, "p95": round(ms * P95_OVER_MEDIAN, 3)} for n, ms in curve.items()
    }
    a, b = _fit(curve)
    return {
        "kind": stage,
        "threads": 1,
        "machine": {"cpu_model": "NVIDIA H100 (derived)", "cores": 1},
        "measured_at": "derived",
        "repeats": 0,
        "source": (
            f"{model} on one H100, PyTorch eager fp16 (shared MODELS.md GPU table); "
            f"p95 = median x {P95_OVER_MEDIAN}; cold start {COLD_START_S:g} s assumed"
        ),
        "cold_start_s": {
            "ready_s": COLD_START_S,
            "load_ms": COLD_START_S * 1000.0,
            "first_request_ms": None,
        },
        "batch_ms": {"inprocess": table, "http": table, "server_compute": {}},
        "linear_fit": {"a_ms": round(a, 3), "b_ms_per_item": round(b, 4)},
    }


def write_all(directory: Path) -> list[Path]:
    """Write one file per stage into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for stage in STAGE_MODEL:
        path = directory / f"{stage}.json"
        path.write_text(json.dumps(gpu_profile_document(stage), indent=1) + "\n")
        out.append(path)
    return out


if __name__ == "__main__":
    for written in write_all(Path(str(files("functions.profiles").joinpath("gpu")))):
        print(written)
