# Measure First: everything a newcomer needs is `make demo` and `make test`.
# Both create .venv from the pinned requirements.lock when it is missing or stale.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv demo test clean

# The one install path: make, CI and the Codespaces post-create command all use it.
venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps -e .
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m course_lib.demo

test: $(STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) _build grading .pytest_cache
