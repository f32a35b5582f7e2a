#!/bin/bash
# One embed replica against two on one CPU: `slackwise serve` (the adapter, its platform and the
# replicas) pinned to CPU 0, benchmarks/loadgen.py open loop at RATE req/s on CPU 1, the count
# fixed at 1 or 2 (min-scale = max-scale), each twice, alternating. A diagnosis behind
# docs/reliability.md "Embed's misses are its cold starts"; needs two CPUs and port 8721 free.
#   bash benchmarks/replicas_on_one_cpu.sh > docs/results/replicas-on-one-cpu.txt
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# commit $(git rev-parse --short HEAD), rate $RATE req/s, SLO 300 ms, $(date -u +%FT%TZ)"
for n in 1 2 1 2; do
  sed -e "s/min-scale: \"1\"/min-scale: \"$n\"/" -e "s/max-scale: \"2\"/max-scale: \"$n\"/" \
    experiments/overload/embed.yaml > "$tmp/embed-$n.yaml"
  taskset -c 0 .venv/bin/slackwise serve -c "$tmp/embed-$n.yaml" > "$tmp/serve-$n.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do
    curl -s http://127.0.0.1:8721/v1/models/embed > /dev/null 2>&1 && break
    sleep 1
  done
  sleep 20 # the replicas load
  out=$(taskset -c 1 .venv/bin/python benchmarks/loadgen.py \
    --url http://127.0.0.1:8721/v1/models/embed:predict --model embed --rate "$RATE" \
    --warmup-s 3 --duration-s 10 --slo-ms 300 2> /dev/null | tail -1)
  echo "replicas $n: $out"
  kill "$pid"
  wait "$pid" 2> /dev/null || true
  sleep 3
done
