# Two commands on a fresh machine: `make run` and `make test`. Everything installs from here.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CONFIG ?= experiments/embed-twitter.yaml
DURATION ?= 60

.PHONY: run demo test install lint unit profile bench bench-peers bench-overload bench-overload-ab bench-models bench-chains clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[all,dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/slackwise experiment -c $(CONFIG) --duration-s $(DURATION) \
		--json runs/experiment.json --plots runs/experiment

demo: $(STAMP)
	$(VENV)/bin/slackwise demo -c experiments/local.yaml

bench: $(STAMP)
	$(PY) benchmarks/adapter_overhead.py --json docs/results/adapter_overhead.json --docs docs/benchmarks.md

# slackwise vs KServe, Ray Serve, BentoML (each in its own throwaway venv) and the function alone,
# each at its best on the same cores: max rate under the SLO, medians of 3 (about 80 minutes)
bench-peers: $(STAMP)
	$(PY) benchmarks/peers.py --json docs/results/peers.json --docs docs/benchmarks.md

# digits, embed and the img-query chain open-loop at 0.5x..10x their open-loop capacity, the load
# generator on a CPU of its own, two kinds of clients, 3 repeats (about 60 minutes)
bench-overload: $(STAMP)
	$(PY) benchmarks/overload.py --repeat 3 --json docs/results/overload.json --docs docs/reliability.md

# the same overload before and after: this revision against BASELINE at fixed offered rates
BASELINE ?= a19949d
bench-overload-ab: $(STAMP)
	$(PY) benchmarks/overload_ab.py --baseline $(BASELINE) --repeat 3 \
		--json docs/results/overload_ab.json --docs docs/reliability.md

# the img-query chain live under GS-T, GS and ED-DYN on a fixed fleet: the largest rate under
# the SLO and each stage's P99 there, medians of 3 (about 30 minutes)
bench-chains: $(STAMP)
	$(PY) benchmarks/chain_split.py --repeat 3 --json docs/results/chain-split.json --docs docs/benchmarks.md

# the advisor's models against live runs: the replay and batched models against the adapter in
# front of a fixed fleet, and Swayam's Eq. 1 / Theorem 2 against a live RAND frontend (~50 minutes)
bench-models: $(STAMP)
	$(PY) benchmarks/model_error_live.py --repeat 3 --json docs/results/model_error_live.json --docs docs/advisor.md
	$(PY) benchmarks/swayam_model_live.py --repeat 3 --json docs/results/swayam_model_live.json --docs docs/advisor.md

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# fail fast: lint and the import contracts, then the fast tests, then the slow and model ones
test: $(STAMP) lint
	$(PY) -m pytest -x -m 'not slow and not models' $(PYTEST_ARGS)
	$(PY) -m pytest -m 'slow or models' $(PYTEST_ARGS)

unit: $(STAMP)
	$(PY) -m pytest -m 'not slow and not models' $(PYTEST_ARGS)

profile: $(STAMP)
	for kind in digits embed qa ner imagenet face_detect face_embed face_landmarks asr; do \
		$(VENV)/bin/slackwise profile $$kind --out functions/profiles/cpu/ || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
