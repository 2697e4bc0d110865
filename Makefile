# Two commands: `make run` (the quickstart) and `make test` (the suite). Both install first.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
# torch is pinned to the CPU build that lies on this disk; an unpinned torch pulls CUDA.
TORCH  := torch==2.13.0

.PHONY: install run test bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --disable-pip-version-check $(TORCH)
	$(PIP) install -q --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

run: install
	$(VENV)/bin/posttrain quickstart

test: install
	@$(PY) -m pytest -q -p no:cacheprovider tests; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

clean:
	rm -rf $(VENV) runs .pytest_cache
