# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml setup.py | cksum | cut -d' ' -f1)

.PHONY: demo demo-format test test-broker test-crash bench lint format prereqs clean docs typecheck
.PHONY: bench-avro bench-export bench-export-once bench-read soak bench-latency

prereqs:
	@PYTHON=$(PYTHON) scripts/check-prereqs

$(STAMP): pyproject.toml setup.py
	@PYTHON=$(PYTHON) scripts/check-prereqs
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,local,spark,iceberg]'
	@rm -f $(VENV)/.installed-* && touch $@

# Confluent's S3-sink quickstart on a local Apache Kafka broker (Tansu if its jars cannot be
# fetched), SeaweedFS S3, the registry stand-in and Spark local mode.
demo: $(STAMP)
	$(BIN)/blockgz quickstart

# The block-GZIP format alone: sample events -> block-GZIP + index -> seek one offset.
demo-format: $(STAMP)
	$(BIN)/python scripts/demo.py

test: $(STAMP) docs typecheck
	@scripts/install-tools
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n 2 --dist worksteal -m "not broker and not crash"
	$(BIN)/python -m pytest -p no:cacheprovider -m broker tests/integration/test_real_broker.py

# The user docs (docs/, mkdocs.yml) into build/site; the reference pages are generated from the
# code first (docs/gen_reference.py, through the hook in docs/hooks.py). Strict: a broken link,
# anchor or reference fails the build, and so `make test`.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

# mypy over blockgz, blockgz.sink and blockgz.reader under their installed names (config in
# pyproject.toml [tool.mypy]): sink/ and reader/ are linked into build/typecheck/blockgz/, since
# mypy does not run the editable install's import hook that maps them. Zero errors or it fails.
typecheck: $(STAMP)
	@mkdir -p build/typecheck/blockgz
	@ln -sfn ../../../sink build/typecheck/blockgz/sink
	@ln -sfn ../../../reader build/typecheck/blockgz/reader
	$(BIN)/mypy -p blockgz -p blockgz.sink -p blockgz.reader

# The Apache Kafka behaviours alone (transactions, compaction, retention, a broker restart).
test-broker: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider -m broker tests/integration/test_real_broker.py

# The export processes killed mid-batch, frozen past their lease, starved of checkpoint disk, or
# failed and restarted (metrics and secrets across a restart) (each launches two or three Spark
# drivers: a minute or two a test). CI runs it after `make test`.
test-crash: $(STAMP)
	@scripts/install-tools
	$(BIN)/python -m pytest -n 2 --dist worksteal -p no:cacheprovider -m crash

bench: $(STAMP)
	@scripts/install-tools
	$(BIN)/python -m pytest benchmarks -p no:cacheprovider --benchmark-only --benchmark-columns=median,rounds

# The export suite alone: hand-written Spark Kafka -> json/text vs blockgz export (Spark's source
# and blockgz-kafka) vs a plain confluent-kafka loop, on Apache Kafka 4.1 and SeaweedFS S3;
# interleaved, an uncounted warm-up round, medians of 3, CPU per record, targets PASS/FAIL.
bench-export: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m benchmarks.export_ab --rounds 5

# The same cases as pytest-benchmark runs them, one counted round each, with memory and the
# long report (benchmarks/results/export.md).
bench-export-once: $(STAMP)
	$(BIN)/python -m pytest benchmarks/test_export_bench.py -p no:cacheprovider --benchmark-only --benchmark-columns=median,rounds

# The Avro suite alone: export per avro.codec vs a plain fastavro loop, seek in a 1 GiB object.
bench-read: $(STAMP)
	$(BIN)/python -m pytest benchmarks/test_read_side_bench.py -p no:cacheprovider -s --benchmark-disable

# 30 minutes of a running export on a loopback standalone cluster (SOAK_MINUTES=5 for a look):
# memory slope per process group, lag, every record read back exactly once.
SOAK_MINUTES ?= 30
soak: $(STAMP)
	$(BIN)/python -m benchmarks.soak --minutes $(SOAK_MINUTES)

bench-avro: $(STAMP)
	$(BIN)/python -m pytest benchmarks/test_avro_bench.py -p no:cacheprovider --benchmark-only --benchmark-columns=median,rounds

# Produce-to-readable latency of a running export (issue 44): p50/p99/max per configuration
# (default trigger, held files), low and high traffic, a few minutes each
# (benchmarks/results/latency.md).
bench-latency: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m benchmarks.latency

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks build *.egg-info
