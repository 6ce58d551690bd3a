# One venv for everything. torchvision is removed after install: `unstructured[pdf]` pulls it
# (via timm), and PyPI's torchvision breaks `import transformers` beside the local torch 2.13 CPU build.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SHARED ?= $(or $(RAG_SHARED_DIR),../shared)
CORPUS ?= $(SHARED)/data/legal_zh/corpus
QA ?= $(SHARED)/data/legal_zh/qa_dev.jsonl

.PHONY: install demo test bench clean

$(BIN)/rag: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	$(BIN)/pip uninstall -y -q torchvision || true
	touch $(BIN)/rag

install: $(BIN)/rag

demo: install
	$(BIN)/rag demo --corpus $(CORPUS) --qa $(QA)

test: install
	$(BIN)/python -m pytest -q
	@if [ -d "$(SHARED)/data" ]; then RAG_SHARED_DIR="$(abspath $(SHARED))" $(BIN)/python -m pytest -q --nbmake notebooks; \
	elif [ "$$RAG_REQUIRE_SHARED_DATA" = 1 ]; then echo "error: $(SHARED)/data not found (set RAG_SHARED_DIR)" >&2; exit 1; \
	else echo "notebooks not run: $(SHARED)/data not found (set RAG_SHARED_DIR)"; fi

clean:
	rm -rf .rag .pytest_cache
