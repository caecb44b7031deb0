# OpenNeuron: `make demo` and `make test` do all set-up themselves (venv, system
# libraries, build) and are fast when nothing changed.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
CMAKE := $(VENV)/bin/cmake
BUILD := build/release
ASAN_BUILD := build/asan
TSAN_BUILD := build/tsan
JOBS ?= $(shell nproc)
# Debian packages the C++ layers build against (pinned where the version matters).
SYSTEM_PACKAGES := libdnnl-dev=2.6.3-1 libblis-serial-dev=0.9.0-1 libgtest-dev ccache iproute2


.PHONY: coverage
.PHONY: all build demo test lint test-cpp test-asan test-tsan test-python sysdeps clean

all: build

$(PY):
	python3 -m venv $(VENV)

$(VENV)/.deps: requirements/runtime.txt requirements/dev.txt | $(PY)
	$(PIP) install -q -r requirements/runtime.txt -r requirements/dev.txt
	touch $@

sysdeps:
	@if [ ! -f /usr/include/dnnl.h ] || [ ! -f /usr/include/gtest/gtest.h ] || ! command -v ip >/dev/null || \
	     [ ! -f /usr/include/$$(gcc -print-multiarch)/blis-serial/blis.h ]; then \
	  echo "installing system packages: $(SYSTEM_PACKAGES)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $(SYSTEM_PACKAGES); \
	fi

$(BUILD)/build.ninja: CMakeLists.txt | $(VENV)/.deps sysdeps
	$(CMAKE) -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$(abspath $(PY)) \
	  -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja)

# The editable install registers the package and its torch.backends entry point;
# the extension itself is rebuilt in place by cmake --build.
$(VENV)/.installed: pyproject.toml setup.py | $(VENV)/.deps $(BUILD)/build.ninja
	$(PIP) install -q --no-build-isolation --no-deps -e .
	touch $@

build: sysdeps $(BUILD)/build.ninja
	$(CMAKE) --build $(BUILD) -j $(JOBS)
	@$(MAKE) --no-print-directory $(VENV)/.installed

demo: build
	$(PY) examples/demo.py

# lint first: it needs neither the venv nor a build, and fails in a second.
test: lint test-cpp test-asan test-fuzz test-tsan test-python test-conformance-fast

# The layering of csrc/ (tools/check_layering.py): which layer may include which, torch
# headers only in csrc/torch, no file over 900 lines without a listed reason.
lint:
	python3 tools/check_layering.py

test-cpp: build
	$(VENV)/bin/ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# Torch-free layers again under AddressSanitizer and UndefinedBehaviorSanitizer.
test-asan: sysdeps | $(VENV)/.deps
	$(CMAKE) -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DOPENNEURON_BUILD_TORCH=OFF \
	  -DOPENNEURON_SANITIZE=ON -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) > /dev/null
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 $(VENV)/bin/ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

# And under ThreadSanitizer: streams, the intra-op pool, the DMA helpers, the allocator,
# the program cache and the shm transport are concurrent (tests/cpp/*/*_stress_test.cpp).
# OMP_NUM_THREADS=1: Debian's libgomp is not instrumented, so TSan cannot see the joins
# of oneDNN's OpenMP teams and would report them as races (attention.cpp is built without
# its team there); our own pool keeps its threads (OPENNEURON_INTRAOP_THREADS).
test-tsan: sysdeps | $(VENV)/.deps
	$(CMAKE) -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DOPENNEURON_BUILD_TORCH=OFF \
	  -DOPENNEURON_SANITIZE_THREAD=ON -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) > /dev/null
	$(CMAKE) --build $(TSAN_BUILD) -j $(JOBS)
	OMP_NUM_THREADS=1 OPENNEURON_INTRAOP_THREADS=4 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  $(VENV)/bin/ctest --test-dir $(TSAN_BUILD) --output-on-failure -j $(JOBS)

# Fuzzing (tests/fuzz, docs/architecture.md): the parsers of outside data built with
# Debian's clang under libFuzzer, ASan and UBSan in build/fuzz; replays the committed
# corpora and crashes, then fuzzes each target FUZZ_SECONDS (on a scratch copy of its
# corpus: nothing is written to the source tree). A crash fails and names its input.
FUZZ_BUILD := build/fuzz
FUZZ_SECONDS ?= 20
FUZZ_TARGETS := graph_io config
.PHONY: test-fuzz clang
clang:
	@if ! command -v clang++ >/dev/null || [ "$$(clang++ -print-file-name=libomp.so)" = libomp.so ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q clang libomp-dev; \
	fi

test-fuzz: sysdeps clang | $(VENV)/.deps
	CC=clang CXX=clang++ $(CMAKE) -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DOPENNEURON_BUILD_TORCH=OFF \
	  -DOPENNEURON_BUILD_TESTS=OFF -DOPENNEURON_FUZZ=ON -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) > /dev/null
	$(CMAKE) --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all
	$(VENV)/bin/ctest --test-dir $(FUZZ_BUILD) --output-on-failure -j $(JOBS)
	@rm -rf $(FUZZ_BUILD)/scratch $(FUZZ_BUILD)/artifacts && mkdir -p $(FUZZ_BUILD)/artifacts; \
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/scratch/$$t && cp tests/fuzz/corpus/$$t/* $(FUZZ_BUILD)/scratch/$$t/ || exit 1; \
	  if ls tests/fuzz/crashes/$$t/* >/dev/null 2>&1; then cp tests/fuzz/crashes/$$t/* $(FUZZ_BUILD)/scratch/$$t/; fi; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS) s (log: $(FUZZ_BUILD)/$$t.log)"; \
	  if ! $(FUZZ_BUILD)/tests/fuzz/$${t}_fuzz $(FUZZ_BUILD)/scratch/$$t -max_total_time=$(FUZZ_SECONDS) \
	       -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	       -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t- > $(FUZZ_BUILD)/$$t.log 2>&1; then \
	    tail -n 40 $(FUZZ_BUILD)/$$t.log; \
	    echo "test-fuzz: $$t failed on input(s):" $(FUZZ_BUILD)/artifacts/$$t-*; \
	    echo "(fix the parser, then add the input under tests/fuzz/crashes/$$t/)"; exit 1; \
	  fi; \
	  grep -E "stat::(number_of_executed_units|average_exec_per_sec)" $(FUZZ_BUILD)/$$t.log; \
	done

test-python: build chromium
	$(PY) -m pytest -q tests/python

# Headless Chromium renders `openneuron report --html` pages in tests/python/test_report.py
# (skipped without it) and takes the README's screenshot of one.
.PHONY: chromium report-screenshot
chromium:
	@if ! command -v chromium >/dev/null; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends chromium; \
	fi

# docs/images/report.png: the report of examples/report_demo.py as Chromium shows it.
report-screenshot: build chromium
	mkdir -p build docs/images
	$(PY) -m openneuron report examples/report_demo.py --html build/report.html > /dev/null
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1600 \
	  --screenshot=docs/images/report.png file://$(abspath build/report.html)

# PyTorch's OpInfo and ModuleInfo databases on neuron against the CPU (tests/conformance):
# fast subsets (every op family, representative modules) in `make test`; everything, with
# docs/op-coverage.md, here.
.PHONY: test-conformance-fast conformance
test-conformance-fast: build
	$(PY) -m pytest -q tests/conformance

conformance: build
	$(PY) -m tests.conformance.sweep
	$(PY) -m tests.conformance.sweep --modules

# PyTorch's own device-generic test files (a copy of its test/ folder outside this tree,
# TESTS=dir) on neuron, each failure re-run on the CPU; writes docs/pytorch-suite.md. A
# measurement, not part of `make test`. FILES='shape_ops view_ops' runs a subset.
.PHONY: pytorch-suite
pytorch-suite: build
	$(PY) tools/pytorch_suite.py $(if $(TESTS),--tests $(TESTS)) $(if $(FILES),--files $(FILES))

# Benchmarks: ratios against CPU eager, Inductor and Gloo measured in the same run; write
# benchmarks/results/*.json and docs/BENCHMARKS.md. PRICES=file.toml adds cost per work.
.PHONY: bench bench-quick
bench: build
	$(PY) -m benchmarks.run --profile full $(if $(PRICES),--prices $(PRICES))

bench-quick: build
	$(PY) -m benchmarks.run --profile quick $(if $(PRICES),--prices $(PRICES))

clean:
	rm -rf build python/openneuron/_C*.so

# Hugging Face architecture coverage: every causal-LM architecture (and the second-tier
# mappings) generating on neuron against the CPU; writes docs/model-coverage.md.
coverage: build
	$(PY) -m openneuron.coverage --all --markdown docs/model-coverage.md
