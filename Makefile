# Set-up is part of every target: a fresh machine needs nothing but python3.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint fuzz bench clean native-check

# Run again with M2MC_PURE=1 by `make test`: what the compiled loops replace (m2mc.native),
# end to end: M2MP (tests/wire), the group layer with its codec, log and inbox (tests/group).
# Not the tests that time real processes against each other (multiprocess: they test the
# runtime, and the keyed one misses its outsider on a loaded machine), the Spark job
# (spark: it checks a trace the other tests' simulations make too), nor the slow sweeps of
# simulated seeds (slow: 20 seeds of lossy-adhoc and more, two thirds of the pass; the
# same faults' code runs in the pass's other simulations, and tests/native/test_twins.py
# holds each compiled loop to its Python twin), minutes of CPU each.
PURE_TESTS := tests/native tests/wire tests/group tests/golden tests/architecture/test_fastobj.py

# `make native-check`: the C built with every warning an error, then with AddressSanitizer
# and UndefinedBehaviorSanitizer, under which the native tests and a short fuzz pass of the
# targets that reach the C run (docs/decisions.md, "One native seam").
NATIVE_C := src/m2mc/native/_speedups.c
NATIVE_CHECK := build/native-check
CC ?= cc
WARNINGS := -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers
SANITIZE := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
NATIVE_FUZZ := m2mp.segments,m2mp.layer,group.frame
PY_INCLUDE = $(shell $(VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['include'])")

$(STAMP): pyproject.toml setup.py $(NATIVE_C)  # (the C: rebuilt when it changes)
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
	# two workers (pytest-xdist): the suite serially took 29 of CI's 40 minutes on a slow day;
	# the compiled loops must be in use (tests/native/test_loader.py fails, not skips)
	M2MC_REQUIRE_NATIVE=1 $(VENV)/bin/pytest -q -n 2
	# the pure-Python path of the compiled loops (m2mc.native), end to end
	M2MC_PURE=1 $(VENV)/bin/pytest -q -n 2 -p no:cacheprovider -m "not multiprocess and not spark and not slow" $(PURE_TESTS)
	$(MAKE) --no-print-directory native-check

lint: $(STAMP)
	$(VENV)/bin/ruff check --no-cache src tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/vulture

native-check: $(STAMP)
	@mkdir -p $(NATIVE_CHECK)
	$(CC) -O2 $(WARNINGS) -fPIC -I$(PY_INCLUDE) -c $(NATIVE_C) -o $(NATIVE_CHECK)/warnings.o
	$(CC) -shared -fPIC $(WARNINGS) $(SANITIZE) -I$(PY_INCLUDE) $(NATIVE_C) -o $(NATIVE_CHECK)/_speedups.so
	# Python is not built with ASan: the runtime goes in first (LD_PRELOAD); Python's own
	# allocations through malloc, so that ASan sees past the end of an object too
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	PYTHONMALLOC=malloc M2MC_NATIVE_PATH=$(NATIVE_CHECK)/_speedups.so M2MC_REQUIRE_NATIVE=1 \
	sh -c '$(VENV)/bin/pytest -q -p no:cacheprovider tests/native \
	  && $(VENV)/bin/python bench/fuzz.py --engine builtin --inputs 3000 --targets $(NATIVE_FUZZ) >$(NATIVE_CHECK)/fuzz.json'

fuzz: $(STAMP)
	$(VENV)/bin/python bench/fuzz.py --inputs 1000000

bench: $(STAMP)
	for b in bench/*.py; do $(VENV)/bin/python $$b || exit 1; done

clean:
	rm -rf $(VENV) demo-out .pytest_cache .mypy_cache .ruff_cache build src/m2mc/*.so src/m2mc/native/*.so
