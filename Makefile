# Every target sets itself up: a fresh machine needs only python3.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DEMO   := demo-out
LOCK   := requirements.lock
UV     := uv==0.13.9

.PHONY: demo test check test-latest test-torch fuzz bench catalogue clean browser lock

# The project's own environment: exactly the versions (and hashes) in $(LOCK), every extra included; then
# the project itself, editable, with no dependency resolution of its own. A changed lock rebuilds the venv.
# Editable as a path in a .pth file (setuptools' compat mode), not an import hook: the hook's own imports were 10 ms of
# every process's start-up (a test run starts hundreds), which an installed wheel does not pay either.
# No bytecode is compiled ahead (--no-compile): a module is compiled where it is first imported, and a test run
# imports a fraction of what is installed (compiling every installed module was a fifth of the set-up's time).
# The venv is made without a pip of its own where $(PYTHON)'s pip can install into it (pip's --python, 22.3 and later):
# venv's own pip install compiles pip's 700 modules, a quarter of the set-up's time. $(VENV)/.pip says which pip.
$(STAMP): $(LOCK) pyproject.toml
	rm -rf $(VENV)
	@if $(PYTHON) -c "import pip, sys; sys.exit(tuple(map(int, pip.__version__.split('.')[:2])) < (22, 3))" 2>/dev/null; then \
	  echo "$(PYTHON) -m venv --without-pip $(VENV)"; $(PYTHON) -m venv --without-pip $(VENV) && \
	  echo "$(PYTHON) -m pip --python $(BIN)/python" > $(VENV)/.pip; \
	else echo "$(PYTHON) -m venv $(VENV)"; $(PYTHON) -m venv $(VENV) && echo "$(BIN)/python -m pip" > $(VENV)/.pip; fi
	$$(cat $(VENV)/.pip) install --quiet --disable-pip-version-check --no-compile --require-hashes --no-deps -r $(LOCK)
	$$(cat $(VENV)/.pip) install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . \
	  --config-settings editable_mode=compat
	$$(cat $(VENV)/.pip) check
	touch $(STAMP)

# Refresh the lock: the newest versions pyproject.toml's ranges allow, for every Python >= 3.10 and
# platform (uv's universal resolution), with hashes. Run it, then make test-latest's twin: make test.
lock:
	$(PYTHON) -m venv .venv-tools
	.venv-tools/bin/python -m pip install --quiet --disable-pip-version-check $(UV)
	.venv-tools/bin/uv pip compile pyproject.toml requirements-build.in --extra test --extra report \
	  --universal --python-version 3.10 --generate-hashes --upgrade -o $(LOCK)

demo: $(STAMP)
	$(BIN)/aclnn-cli gen -o $(DEMO)
	$(BIN)/aclnn-cli emulate $(DEMO)
	$(BIN)/aclnn-cli verify $(DEMO) --json $(DEMO)/verify.json

# -rs: skipped tests print their reason (the browser test's, where Chromium could not be installed).
# -n auto --dist loadfile: one pytest worker per core (pytest-xdist), each test file whole on one worker, the files in
# the order conftest.py gives them (--no-loadscope-reorder: the longest first, not the most tests first; a file's
# module fixtures are built once). PYTEST_ARGS adds more (make test PYTEST_ARGS="-n 0" runs serially).
# The tests' files (pytest's --basetemp and TMPDIR) go to a fresh directory from scripts/test_tmp.py: in memory
# where a tmpfs has room (most of a run's system time is creating and removing small files), removed after a
# passing run; a failing run's files are kept and their place printed.
PYTEST_ARGS ?=
PYTEST := -m pytest -q -rs -n auto --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)
# PYTHONDONTWRITEBYTECODE is unset for the run: with it, every CLI process a test starts compiled the package from
# source and every worker rewrote every test module's asserts (a quarter of the CPU of the subprocess-heavy files);
# the bytecode goes to __pycache__ directories, which git ignores. $(2): the python making the directory (.venv's).
IN_TEST_TMP = unset PYTHONDONTWRITEBYTECODE && tmp=$$($(or $(2),$(BIN)/python) scripts/test_tmp.py) && export TMPDIR=$$tmp && \
	{ $(1) --basetemp=$$tmp/pytest; rc=$$?; } && \
	if [ $$rc = 0 ]; then rm -rf "$$tmp"; else echo "make: the failing run's files are in $$tmp"; fi; (exit $$rc)
# The stub CANN toolkit the runner tests link against (tests/cann_build.py, kept in build/stub-cann) is built in the
# background while the venv installs (pip keeps one core busy) and on into the tests' first seconds: a test that needs
# a toolkit not yet built waits on its build's lock (cann_build.build_stub), then finds it built.
test: browser
	@$(PYTHON) tests/cann_build.py >/dev/null 2>&1 & stub=$$!; \
	$(MAKE) --no-print-directory $(STAMP) || { rc=$$?; wait $$stub; exit $$rc; }; \
	$(call IN_TEST_TMP,$(BIN)/python $(PYTEST)); rc=$$?; wait $$stub; exit $$rc

# The edit-test loop: every test but those slow-tests.txt names (over 0.4 s each), on every core. make test runs
# them all.
check: $(STAMP)
	@$(call IN_TEST_TMP,$(BIN)/python -m pytest -q -rs -n auto --dist load -m "not slow" -p no:cacheprovider $(PYTEST_ARGS))

# The HTML report's browser test needs Chromium (Debian's chromium package). Installed here where it can be
# without asking (root, or sudo without a password, and apt-get); else the test is skipped, saying why.
# BROWSER_INSTALL=no leaves the machine alone.
BROWSER_INSTALL ?= yes
browser:
	@if [ "$(BROWSER_INSTALL)" = yes ] && ! command -v chromium >/dev/null 2>&1 \
	    && ! command -v chromium-browser >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo=no; fi; \
	  if [ "$$sudo" = no ]; then echo "make: chromium is not installed and cannot be without a password:" \
	    "the browser test will be skipped"; \
	  else echo "make: installing chromium for the browser test (apt-get)"; \
	    ($$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium \
	      >/dev/null) || echo "make: could not install chromium: the browser test will be skipped"; fi; \
	fi

# What a user gets: a fresh venv from pyproject.toml's ranges alone (the newest release of everything), then
# the same suite. A release that breaks us shows up here before it reaches a user.
LATEST := .venv-latest
test-latest: browser
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(LATEST)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade --upgrade-strategy eager -e '.[test]'
	$(LATEST)/bin/python -m pip list --format=freeze | grep -iE '^(click|numpy|ml.dtypes|rich|pyyaml|pytest|pytest.xdist|hypothesis|mpmath|python.flint|quicktions|matplotlib)=='
	$(LATEST)/bin/python $(PYTEST)

# PyTorch CPU as the independent device of the contraction and window ops (tests/torch_device.py; docs/contributing.md):
# its own venv, the lock's packages as $(STAMP) installs them plus PyTorch's CPU wheel (TORCH; 190 MB, which is why
# make test's venv, whose install time CI budgets, does not carry it). The wheel comes from pip's configured sources
# and TORCH_INDEX (pip's --extra-index-url, given only when non-empty: make test-torch TORCH_INDEX= where the index
# cannot be reached, so pip never waits on it); torch's test helpers in newer Python's syntax are not compiled. Then
# the tests that use torch, on one worker, in make test's fresh directory (IN_TEST_TMP, the venv's python making it).
TORCH       ?= torch==2.13.0+cpu
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_VENV  := .venv-torch
TORCH_STAMP := $(TORCH_VENV)/.installed-stamp
TORCH_TESTS := tests/test_torch_device.py
$(TORCH_STAMP): $(LOCK) pyproject.toml
	rm -rf $(TORCH_VENV)
	$(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-compile --require-hashes --no-deps -r $(LOCK)
	$(TORCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-compile \
	  $(if $(strip $(TORCH_INDEX)),--extra-index-url $(TORCH_INDEX)) '$(TORCH)'
	$(TORCH_VENV)/bin/python -m compileall -q -j 0 -x 'torch/testing/_internal/py3[0-9]+_' $(TORCH_VENV)/lib >/dev/null
	$(TORCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . \
	  --config-settings editable_mode=compat
	$(TORCH_VENV)/bin/python -m pip check
	touch $(TORCH_STAMP)

test-torch: $(TORCH_STAMP)
	@$(call IN_TEST_TMP,$(TORCH_VENV)/bin/python -m pytest -q -rs -p no:cacheprovider $(PYTEST_ARGS) $(TORCH_TESTS),$(TORCH_VENV)/bin/python)

# Every reader of outside bytes under its structured fuzz target (tests/fuzzing.py), FUZZ_SECONDS in all
# shared among the targets (make test runs each briefly). make fuzz FUZZ_SECONDS=3600 for an hour.
FUZZ_SECONDS ?= 600
fuzz: $(STAMP)
	ACLNN_FUZZ_TOTAL_SECONDS=$(FUZZ_SECONDS) $(BIN)/python -m pytest -q -rs -m fuzz -p no:cacheprovider

# Whole processes timed as users meet them: bench.py compiles the package's bytecode first, as pip compiles it when a
# user installs (where PYTHONDONTWRITEBYTECODE is set, a changed module was compiled from source in every process).
bench: $(STAMP)
	$(BIN)/python bench/bench.py

# docs/catalogue.md from a local checkout of hicann/ops-nn (a work tree or a bare clone; nothing is fetched):
# make catalogue OPS_NN=/path/to/ops-nn [CATALOGUE_ONLY='norm/*']
CATALOGUE_ONLY ?= *
catalogue: $(STAMP)
	@test -n "$(OPS_NN)" || { echo "make catalogue: give OPS_NN=<a checkout of hicann/ops-nn>"; exit 2; }
	$(BIN)/python scripts/catalogue.py "$(OPS_NN)" --only '$(CATALOGUE_ONLY)'

clean:
	rm -rf $(VENV) $(LATEST) $(TORCH_VENV) .venv-tools $(DEMO) build *.egg-info
