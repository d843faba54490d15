# The two commands of the README. Each sets up its own virtual environment.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.benchcheck-installed
OUT ?= demo_out

.PHONY: demo test lint setup docs

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch from this machine's disk; a plain `torch` would pull a CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,ray]'
	# lmms-eval for the export round-trip test, without its dependencies (they pull torchvision and
	# a CUDA torch); its YAML task loader needs only loguru and pytz (dev extras). See docs/report.md.
	$(PY) -m pip install -q --no-deps lmms-eval==0.7.3 || echo "lmms-eval not installed: the export test uses its YAML rules by hand"
	touch $@

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/benchcheck demo run --out $(OUT)

# lint-imports: the package layers and no import cycles ([tool.importlinter] in pyproject.toml;
# docs/ARCHITECTURE.md, "Layers"); src first on the path so it reads this tree, whatever is installed.
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	PYTHONPATH=src $(VENV)/bin/lint-imports --no-cache --no-logo
	$(VENV)/bin/mypy

test: $(STAMP) lint
	$(VENV)/bin/pytest -q

# The documentation site, from docs/ into site/ (offline: no CDN, no web fonts). --strict fails on
# any warning: a broken link or anchor, a page left out of the nav. tests/docs builds it too.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
