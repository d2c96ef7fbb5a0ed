# Measure First: everything a newcomer needs is `make demo` and `make test`.
# Both create .venv from the pinned requirements.lock when it is missing or stale.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv demo test clean clean-demo book

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
	@echo "== Grading: release the example assignment, grade every sample submission (into grading-demo/, never the real grading/)"
	$(BIN)/course release example
	$(BIN)/course grade example --submissions examples/submissions --grading-dir grading-demo --timeout 10 --memory-limit 400MB || test $$? -eq 1
	$(BIN)/course report --grading-dir grading-demo
	@echo "== Feedback for each student: grading-demo/feedback/STUDENT/example/example.html; flags explained in grading-demo/flags.csv; class report grading-demo/report.html"
	@$(MAKE) --no-print-directory book
	@echo "== What to open next"
	@echo "   a student's feedback: $(CURDIR)/grading-demo/feedback/correct_slow/example/example.html"
	@echo "   the class report:     $(CURDIR)/grading-demo/report.html"
	@echo "   the book:             $(CURDIR)/$(BOOK_HTML)/index.html"
	@echo "   the students' public repository (no solutions): $(BIN)/course student-repo ../students --url https://github.com/ORG/REPO --git"

# Two pytest-xdist workers, each running whole groups of tests (scopes: tests/conftest.py): on the
# 2-core machines CI and Codespaces give, each worker is the other's busy neighbour, the
# condition every timed check here is sized for. TEST_WORKERS=0 runs in one process.
# --no-loadscope-reorder: hand groups out in collection order (conftest puts the long
# self-tests first); xdist's default sends the groups with most tests first, one-test
# self-tests last, so week 8's 17 minutes started 10-18 minutes into the run.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# The book (Jupyter Book 1): strict (-W -n), executed chapters cached by their code.
# MEASURE_FIRST_SIZE=small (the default here) builds the whole book in minutes; =full
# runs the syllabus sizes into _build/full, because the cache ignores the environment.
# MPLBACKEND is unset so that the notebook kernels draw their figures inline.
MEASURE_FIRST_SIZE ?= small
BOOK_HTML := $(if $(filter full,$(MEASURE_FIRST_SIZE)),_build/full/_build/html,_build/html)
book: $(STAMP)
	env -u MPLBACKEND MEASURE_FIRST_STRICT=1 MEASURE_FIRST_SIZE=$(MEASURE_FIRST_SIZE) $(BIN)/jupyter-book build . -W -n --keep-going \
	  $(if $(filter full,$(MEASURE_FIRST_SIZE)),--path-output _build/full)
	@echo "== The book ($(MEASURE_FIRST_SIZE) size): open $(CURDIR)/$(BOOK_HTML)/index.html"

# Only the demo's grading folder; `course reset --yes` clears the real grading/ and keeps .venv.
clean-demo:
	$(BIN)/course reset --grading-dir grading-demo --yes

clean:
	rm -rf $(VENV) _build grading grading-demo .pytest_cache
