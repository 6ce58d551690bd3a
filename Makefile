# One venv for everything. torchvision is removed after install: `unstructured[pdf]` pulls it
# (via timm), and PyPI's torchvision breaks `import transformers` beside the local torch 2.13 CPU build.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SHARED ?= $(or $(RAG_SHARED_DIR),../shared)
# Without the shared data set (a fresh clone), `make demo` runs on the sample shipped in the repository:
# three laws of the corpus (tests/fixtures/laws) and 15 of their questions (tests/fixtures/laws_qa.jsonl).
SAMPLE_CORPUS := tests/fixtures/laws
SAMPLE_QA := tests/fixtures/laws_qa.jsonl
HAVE_SHARED := $(wildcard $(SHARED)/data/legal_zh/corpus)
CORPUS ?= $(if $(HAVE_SHARED),$(SHARED)/data/legal_zh/corpus,$(SAMPLE_CORPUS))
QA ?= $(if $(HAVE_SHARED),$(SHARED)/data/legal_zh/qa_dev.jsonl,$(SAMPLE_QA))

# `make test`: the suite on PYTEST_WORKERS processes (pytest-xdist; a test file stays on one worker, so
# its module fixtures are built once), less the `heavy` tests, then the notebook, which runs even when
# pytest failed. Its last line names both outcomes, and the recipe's status reports both: make prints
# "Error 1" (pytest failed), "Error 2" (the notebook failed) or "Error 3" (both), and exits non-zero.
# `make test-heavy` runs the `heavy` tests (minutes of CPU each); CI (.ci/run) runs both targets.
PYTEST_WORKERS ?= 2
PYTEST_ARGS ?=

.PHONY: install demo test test-heavy notebooks bench clean cli-help settings-docs screenshots

$(BIN)/rag: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	$(BIN)/pip uninstall -y -q torchvision || true
	touch $(BIN)/rag

install: $(BIN)/rag

demo: install
	@$(if $(filter $(SAMPLE_CORPUS),$(CORPUS)),echo "$(SHARED)/data not found: the demo runs on the sample in $(SAMPLE_CORPUS) (3 laws); set RAG_SHARED_DIR for the full corpus",:)
	$(BIN)/rag demo --corpus $(CORPUS) --qa $(QA)

test: install
	@tests=0; notebook=0; \
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "not heavy" $(PYTEST_ARGS) || tests=$$?; \
	$(MAKE) --no-print-directory notebooks || notebook=$$?; \
	nb=$$( [ $$notebook != 0 ] && echo FAILED || { [ -d "$(SHARED)/data" ] && echo passed || echo "not run, no shared data"; } ); \
	echo "make test: pytest exit $$tests ($$( [ $$tests = 0 ] && echo passed || echo FAILED)), notebook exit $$notebook ($$nb)"; \
	exit $$(( ($$tests != 0) + 2 * ($$notebook != 0) ))

test-heavy: install
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) -m heavy $(PYTEST_ARGS)

notebooks: install
	@if [ -d "$(SHARED)/data" ]; then RAG_SHARED_DIR="$(abspath $(SHARED))" $(BIN)/python -m pytest -q -p no:xdist --nbmake notebooks; \
	elif [ "$$RAG_REQUIRE_SHARED_DATA" = 1 ]; then echo "error: $(SHARED)/data not found (set RAG_SHARED_DIR)" >&2; exit 1; \
	else echo "notebooks not run: $(SHARED)/data not found (set RAG_SHARED_DIR)"; fi

# The help text `rag`/`rag --help` print without importing typer (rag_app/cli/entry.py); rerun after
# changing a command or a help string (tests/unit/cli/test_cli_help_shipped.py fails until then).
cli-help: install
	PYTHONPATH=. $(BIN)/python -m rag_app.cli.help_text

# .env.example and docs/settings.md, written from the settings' declarations (rag_app/config/settings.py,
# rag_app/query/knobs.py); rerun after adding or changing a setting (tests/unit/config/test_settings_docs.py fails until then).
settings-docs: install
	PYTHONPATH=. $(BIN)/python -m rag_app.config.envfile --write

clean:
	rm -rf .rag .pytest_cache

# The README's pictures, docs/images/{dashboard-home,query-page,experiment-page}.png: the browser tests' scripted
# runs photograph them (tests/e2e/test_dashboard_browser.py: 12 questions through `rag serve` with a scripted
# LLM; two days of a ramped split experiment). Needs Debian's chromium and fonts-noto-cjk (.ci/run installs them).
screenshots: install
	DASHBOARD_SCREENSHOTS=docs/images $(BIN)/python -m pytest -q -p no:xdist tests/e2e/test_dashboard_browser.py \
		-k "shows_the_ledger or experiment_page"
