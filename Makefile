# Huddle — build, test and demo. `make test` installs what is missing (needs root for apt).
SHELL := /bin/bash
SWIFT ?= swift
BIN := $(CURDIR)/.build/debug/huddle
export HUDDLE_NOISE_VECTORS ?= $(abspath $(CURDIR)/../shared/vectors/noise-25519-chachapoly.json)
export HUDDLE_BIN ?= $(BIN)

.PHONY: deps build test demo clean

deps:
	@scripts/deps.sh

build: deps
	$(SWIFT) build --product huddle
	$(SWIFT) build --product drawtogether

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

demo: build
	@examples/demo.sh "$(BIN)"
	@examples/DrawTogether/demo.sh "$(dir $(BIN))"

clean:
	rm -rf .build
