# Every target sets itself up: a fresh machine needs only python3.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DEMO   := demo-out

.PHONY: demo test bench clean browser

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/aclnn-cli gen -o $(DEMO)
	$(BIN)/aclnn-cli emulate $(DEMO)
	$(BIN)/aclnn-cli verify $(DEMO) --json $(DEMO)/verify.json

# -rs: skipped tests print their reason (the browser test's, where Chromium could not be installed).
test: $(STAMP) browser
	$(BIN)/python -m pytest -q -rs

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

bench: $(STAMP)
	$(BIN)/python bench/bench.py

clean:
	rm -rf $(VENV) $(DEMO) build *.egg-info
