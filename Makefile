# Two commands matter: `make demo` and `make test`. Both create .venv if it is missing and
# install evalnb with every dependency declared in pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install demo test bench soak lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/evalnb demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not soak"

lint: $(STAMP)
	$(BIN)/python -m ruff check evalnb tests bench examples
	$(BIN)/python -m mypy

# The runner alone, the whole `evalnb run` command, `evalnb suite`, then every call streamed beside none
# (bench/README.md); BENCH_ARGS=--quick: 1 repeat of the command benchmark and the suite's small configuration.
bench: $(STAMP)
	$(BIN)/python bench/bench_runner.py
	$(BIN)/python bench/bench_command.py $(BENCH_ARGS)
	$(BIN)/python bench/bench_suite.py $(BENCH_ARGS)
	$(BIN)/python bench/bench_stream.py
	$(BIN)/python bench/bench_smallsample.py
	$(BIN)/python bench/bench_compare_bootstrap.py
	$(BIN)/python bench/bench_cache.py

# About 15 minutes: the tests marked soak, then faults, kills and a concurrent run against the
# fake server (not part of test).
soak: $(STAMP)
	$(BIN)/python -m pytest -q -m soak
	$(BIN)/python bench/soak.py

clean:
	rm -rf $(VENV) build *.egg-info
