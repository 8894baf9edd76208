# Huddle — build, test and demo. `make test` installs what is missing (needs root for apt).
SHELL := /bin/bash
SWIFT ?= swift
BIN := $(CURDIR)/.build/debug/huddle
export HUDDLE_NOISE_VECTORS ?= $(abspath $(CURDIR)/../shared/vectors/noise-25519-chachapoly.json)
export HUDDLE_BIN ?= $(BIN)
# The independent Noise implementation NoiseInteropTests runs (scripts/noise-venv.sh makes it).
NOISE_VENV := $(CURDIR)/.build/noise-venv
export HUDDLE_NOISE_PYTHON ?= $(NOISE_VENV)/bin/python
# The DrawTogether browser test: headless Chromium driven by Selenium (scripts/browser-venv.sh makes it).
BROWSER_VENV := $(CURDIR)/.build/browser-venv
export HUDDLE_BROWSER_PYTHON ?= $(BROWSER_VENV)/bin/python
export HUDDLE_CHROMIUM ?= /usr/bin/chromium
export HUDDLE_CHROMEDRIVER ?= /usr/bin/chromedriver

.PHONY: deps noise-venv browser-venv build test fuzz demo clean

deps:
	@scripts/deps.sh

noise-venv:
	@scripts/noise-venv.sh "$(NOISE_VENV)"

browser-venv:
	@scripts/browser-venv.sh "$(BROWSER_VENV)"

build: deps
	$(SWIFT) build --product huddle
	$(SWIFT) build --product drawtogether

test: deps noise-venv browser-venv
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# A million inputs a peer could send, through every decoder and core (PeerInputFuzzTests).
FUZZ_COUNT ?= 1000000
fuzz: deps
	$(SWIFT) build --build-tests
	HUDDLE_FUZZ_COUNT=$(FUZZ_COUNT) $(SWIFT) test --skip-build --filter noInputAPeerCanSendTrapsTheDecodersOrTheCores

demo: build
	@examples/demo.sh "$(BIN)"
	@examples/DrawTogether/demo.sh "$(dir $(BIN))"

clean:
	rm -rf .build
