# kuota — the two commands are `make demo` and `make test`; both do all set-up.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PY := .venv/bin/python
VENV_STAMP := .venv/.installed
STACK := scripts/stack
# Load the stack's addresses (Kafka, Redis, kubeconfig) for commands that need them.
WITH_STACK := set -a; . $${KUOTA_STACK_DIR:-.stack}/stack.env; set +a;

.PHONY: help venv native stack-up stack-down operators training browser demo test test-unit check lint typecheck schemas \
	bench-core bench-kueue-baseline bench-kueue-large bench-replay bench-e2e chaos \
	bench-template-churn plan kueue-install kueue-stack-up kueue-stack-down diff-kueue bench-vs-kueue \
	bench-fragmentation

help:
	@echo "make demo        set everything up, start the stack, run the main job"
	@echo "make test        set everything up, start the stack, run every test"
	@echo "make check       ruff + mypy --strict + import layering + tests"
	@echo "make test-unit   unit tests only (no stack needed)"
	@echo "make bench-core / bench-kueue-baseline / bench-kueue-large / bench-replay / bench-e2e"
	@echo "                 (bench-core with the Nodes, every Job placed: BENCH_ARGS=\"--nodes-known --workloads 20000\")"
	@echo "make bench-template-churn  one tenant churns 1,000 templates, another's latency"
	@echo "make chaos       seeded fault runs on a stack of its own (CHAOS_ARGS=\"--seed 2 --jobs 1000\")"
	@echo "make plan        fewest GPUs per accounting model for a trace (PLAN_ARGS=\"--jobs 2000 --report out/plan\")"
	@echo "make diff-kueue  every e2e scenario on Kueue v0.19.2 itself and on kuota's fold (DIFF_ARGS=\"cohort-reclaim\")"
	@echo "make bench-vs-kueue  the same burst through kuota's stack and Kueue's, ratios (BENCH_ARGS=\"--cqs 1\")"
	@echo "make bench-fragmentation  a mixed DRA trace on 8 kwok nodes through kuota and Kueue (BENCH_ARGS=\"--seed 2\")"
	@echo "make stack-up / stack-down / kueue-stack-up / kueue-stack-down"
	@echo "make operators   the training-operator and KubeRay on the stack (built once, ~3-7 min each)"
	@echo "make browser     Debian chromium for the dashboard's browser test"

# constraints.txt pins every transitive dependency (how to update it: its header).
$(VENV_STAMP): pyproject.toml constraints.txt
	@# which Python 3.11: scripts/python-for-venv (KUOTA_PYTHON=... to choose)
	@[ -x .venv/bin/python ] || { python=$$(scripts/python-for-venv) \
		&& echo "venv: $$python ($$($$python -V 2>&1))" && $$python -m venv .venv; }
	.venv/bin/pip install -q --upgrade pip -c constraints.txt
	.venv/bin/pip install -q -e '.[dev]' -c constraints.txt
	@touch $@

venv: $(VENV_STAMP)

# The core's hot path compiled with mypyc, cached per machine and source version
# (docs/design/native-core.md); an edited source falls back to pure Python until then.
native: venv
	$(PY) scripts/native.py build

stack-up: venv
	$(STACK) up

stack-down:
	$(STACK) down

# The Kubeflow training-operator v1.8.1 and the KubeRay operator v1.5.0, built from
# the Go module proxy into ~/.cache/kuota (once per machine), run out of cluster on
# the stack; the stack remembers them, so a later `stack-up` starts them again
# (docs/design/operators.md). The tests of PyTorchJobs and RayClusters need them.
operators: stack-up
	$(STACK) up training kuberay

# The Kubeflow training-operator alone: the demo's PyTorchJobs need it.
training: stack-up
	$(STACK) up training

# Debian's chromium and chromium-driver for the dashboard's browser test
# (tests/e2e/test_e2e_dashboard.py); apt-get only if they are missing.
browser:
	$(STACK) browser

# The main job: stack + the four services + a sample GPU cluster, the admission
# stream printed live, a usage table at the end. `make demo DEMO_ARGS=--down` stops
# everything afterwards.
demo: native stack-up training
	@$(STACK) versions
	$(WITH_STACK) $(PY) scripts/demo $(DEMO_ARGS)

# Kueue v0.19.2 built from the Go module proxy into ~/.cache/kuota/kueue-v0.19.2 (once
# per machine, ~9 min on 2 cores), for the differential subset in tests/kueue/
# (which starts and stops the Kueue stack, .stack-kueue, itself).
kueue-install:
	scripts/kueue-stack install

# Kueue's own stack (scripts/kueue-stack: .stack-kueue, its own ports) beside the main one.
kueue-stack-up: venv
	scripts/kueue-stack up

kueue-stack-down:
	scripts/kueue-stack down

# Every scenario of tests/e2e/scenarios/ on Kueue itself and on kuota's fold (issue #16);
# the last line is scenarios=M agree=K departures=D differ=N.
diff-kueue: native kueue-stack-up
	$(PY) scripts/diff_kueue.py $(DIFF_ARGS)

# The same burst through kuota's stack (bench_e2e --held) and Kueue's, one after the
# other; the last line has the ratios (BENCH_ARGS="--jobs 2000 --cqs 1").
bench-vs-kueue: native stack-up kueue-stack-up
	$(WITH_STACK) $(PY) scripts/bench_vs_kueue.py $(BENCH_ARGS)

# Issue #17: one mixed DRA trace (whole GPUs, 1g.10gb and 3g.40gb slices, 2- and 4-GPU
# pods, 2-pod gangs) on 8 kwok nodes through kuota's stack, then Kueue's; the last line
# has each system's admitted-but-unplaceable Job-seconds, GPU utilisation and p95 wait
# (BENCH_ARGS="--seed 2 --jobs 48").
bench-fragmentation: native stack-up kueue-stack-up
	$(WITH_STACK) $(PY) scripts/bench_fragmentation.py $(BENCH_ARGS)

# Two passes: everything on the compiled core, then tests/pure on the pure-Python one;
# then the demo itself, last (it applies its sample cluster to the shared stack), so
# `make demo` cannot break unseen; it fails unless every workload finishes.
test: native stack-up operators browser kueue-install
	$(WITH_STACK) .venv/bin/pytest -q -p no:cacheprovider
	KUOTA_NATIVE=0 .venv/bin/pytest -q -p no:cacheprovider tests/pure
	$(WITH_STACK) $(PY) scripts/demo --stop-services

test-unit: native
	.venv/bin/pytest -q tests/unit
	KUOTA_NATIVE=0 .venv/bin/pytest -q tests/pure

# Fails on a lint finding or on a file `ruff format` would change (run
# `.venv/bin/ruff format shared services tests scripts examples` to fix the latter).
lint: venv
	.venv/bin/ruff check shared services tests scripts examples
	.venv/bin/ruff format --check shared services tests scripts examples

typecheck: venv
	.venv/bin/mypy
	.venv/bin/lint-imports

check: lint typecheck test

bench-core: native
	$(PY) scripts/bench_core.py $(BENCH_ARGS)

bench-kueue-baseline: native
	$(PY) scripts/bench_kueue.py --shape baseline

bench-kueue-large: native
	$(PY) scripts/bench_kueue.py --shape large

bench-replay: native
	$(PY) scripts/bench_replay.py

bench-e2e: native stack-up
	$(WITH_STACK) $(PY) scripts/bench_e2e.py

bench-template-churn: native
	$(PY) scripts/bench_template_churn.py --before

# Capacity planning (issue #20): the fewest GPUs meeting p95 wait <= 300 s, per
# accounting model, for a trace generated from Alibaba's PAI GPU trace
# (docs/capacity-planning.md). No stack needed.
plan: native
	$(PY) -m kuota.cli plan $(PLAN_ARGS)

schemas: venv
	$(PY) -m kuota.events.jsonschema docs/schemas

# Seeded fault runs (issue #8) on a second stack of their own (.stack-chaos, its
# own ports), so their restarts never touch the stack the tests use. `make test`
# runs a short one (tests/chaos/test_chaos_short.py).
chaos: native
	$(PY) scripts/chaos.py $(CHAOS_ARGS)
