# Huddle — build, test and demo. `make test` installs what is missing (needs root for apt).
SHELL := /bin/bash
SWIFT ?= swift
BIN := $(CURDIR)/.build/debug/huddle
# The suite runs on a release build (with testable imports): the real nodes it starts and the heavy
# simulations it runs take a third of the time they take in debug. Tests find the executables of
# their own build (Sources/HuddleTestSupport/BuiltExecutables.swift).
TEST_BUILD := -c release -Xswiftc -enable-testing
TEST_RESULTS := $(CURDIR)/.build/test-results.xml
export HUDDLE_NOISE_VECTORS ?= $(abspath $(CURDIR)/../shared/vectors/noise-25519-chachapoly.json)
# The independent Noise implementation NoiseInteropTests runs (scripts/noise-venv.sh makes it).
NOISE_VENV := $(CURDIR)/.build/noise-venv
export HUDDLE_NOISE_PYTHON ?= $(NOISE_VENV)/bin/python
# The DrawTogether browser test: headless Chromium driven by Selenium (scripts/browser-venv.sh makes it).
BROWSER_VENV := $(CURDIR)/.build/browser-venv
export HUDDLE_BROWSER_PYTHON ?= $(BROWSER_VENV)/bin/python
export HUDDLE_CHROMIUM ?= /usr/bin/chromium
export HUDDLE_CHROMEDRIVER ?= /usr/bin/chromedriver
# The Python client (clients/python): pytest, mypy and the client itself (scripts/python-client-venv.sh
# makes it). Its checks: mypy --strict on the client, its tests and examples/python, then its tests
# against real nodes of the release build (well under a minute).
PYTHON_VENV := $(CURDIR)/.build/python-venv
PYTHON_TEST := $(PYTHON_VENV)/bin/mypy --strict --cache-dir "$(CURDIR)/.build/mypy-cache" \
	clients/python/src/huddle clients/python/tests examples/python \
	&& HUDDLE_BIN="$(CURDIR)/.build/release/huddle" $(PYTHON_VENV)/bin/pytest -q clients/python/tests

.PHONY: deps noise-venv browser-venv python-venv build test python-test fuzz demo clean

deps:
	@scripts/deps.sh

noise-venv:
	@scripts/noise-venv.sh "$(NOISE_VENV)"

browser-venv:
	@scripts/browser-venv.sh "$(BROWSER_VENV)"

python-venv:
	@scripts/python-client-venv.sh "$(PYTHON_VENV)"

build: deps
	$(SWIFT) build --product huddle
	$(SWIFT) build --product drawtogether

# The Swift suite, then the Python client's checks (run whatever the Swift suite's outcome): the
# status fails when either failed (the Swift suite's own status when it did).
test: deps noise-venv browser-venv python-venv
	$(SWIFT) build $(TEST_BUILD) --build-tests
	@status=0; $(SWIFT) test $(TEST_BUILD) --skip-build --xunit-output "$(TEST_RESULTS)" || status=$$?; \
	  scripts/suite-times.py "$(basename $(TEST_RESULTS))-swift-testing.xml"; \
	  echo "== the Python client (make python-test)"; \
	  ( $(PYTHON_TEST) ) || { [ $$status -ne 0 ] || status=1; }; \
	  exit $$status

# Needs the release build of huddle (make test makes it; or swift build -c release --product huddle).
python-test: python-venv
	$(PYTHON_TEST)

# A million inputs per parser a peer (or a local program) could send — link messages and datagrams
# through every decoder and core, epoch changes and grants, the link handshake's Noise messages,
# the pairing frames and CPace, control-protocol lines — in release with AddressSanitizer (its own
# build under .build/asan). Each run prints its seed; HUDDLE_FUZZ_SEED=S replays one. Leak detection
# is off: the one leak it reports is XCTest's own runner (144 bytes in XCTMain), not ours.
FUZZ_COUNT ?= 1000000
FUZZ_BUILD := -c release -Xswiftc -enable-testing --sanitize=address --scratch-path $(CURDIR)/.build/asan
FUZZ_TESTS := noInputAPeerCanSendTrapsTheDecodersOrTheCores|noEpochInputAPeerCanSendTrapsTheDecodersOrTheEpochCore|noLinkHandshakeMessageAPeerCanSendTraps|noPairingFrameAPeerCanSendTraps|noLineAProgramCanSendTrapsTheControlParser
fuzz: deps
	$(SWIFT) build $(FUZZ_BUILD) --build-tests
	HUDDLE_FUZZ_COUNT=$(FUZZ_COUNT) ASAN_OPTIONS=detect_leaks=0 $(SWIFT) test $(FUZZ_BUILD) --skip-build --filter '$(FUZZ_TESTS)'

demo: build
	@examples/demo.sh "$(BIN)"
	@examples/DrawTogether/demo.sh "$(dir $(BIN))"

clean:
	rm -rf .build
