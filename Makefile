# Set-up is part of every target: a fresh machine needs nothing but python3.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint fuzz bench clean

# Run again with M2MC_PURE=1 by `make test`: what the compiled loops replace.
PURE_TESTS := tests/group/test_speedups.py tests/group/test_store.py tests/group/test_inbox.py \
	tests/group/test_basic.py tests/group/test_hostile.py tests/golden \
	tests/architecture/test_fastobj.py

$(STAMP): pyproject.toml setup.py src/m2mc/_speedups.c  # (the C: rebuilt when it changes)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[all]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/m2mc demo --out demo-out

test: $(STAMP)
	# --no-cache: a local .ruff_cache once hid errors a clean checkout (CI) finds
	$(VENV)/bin/ruff check --no-cache src tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/vulture
	# two workers (pytest-xdist): the suite serially took 29 of CI's 40 minutes on a slow day
	$(VENV)/bin/pytest -q -n 2
	# the pure-Python path of the compiled loops (m2mc.speedups), end to end
	M2MC_PURE=1 $(VENV)/bin/pytest -q -p no:cacheprovider $(PURE_TESTS)

lint: $(STAMP)
	$(VENV)/bin/ruff check --no-cache src tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/vulture

fuzz: $(STAMP)
	$(VENV)/bin/python bench/fuzz.py --inputs 1000000

bench: $(STAMP)
	for b in bench/*.py; do $(VENV)/bin/python $$b || exit 1; done

clean:
	rm -rf $(VENV) demo-out .pytest_cache .mypy_cache .ruff_cache build src/m2mc/*.so
