# The two set-up-and-go commands (see README.md): `make run` and `make test`.
# Both install what is missing (scripts/bootstrap.sh), configure and build.
BUILD ?= build
LLVM_PREFIX ?= /usr/lib/llvm-22
JOBS ?= 2
# Debian's python3, whose numpy, pybind11 and pytest bootstrap installs.
PYTHON ?= /usr/bin/python3

.PHONY: run test build bootstrap clean fuzz test-sanitize

bootstrap:
	@scripts/bootstrap.sh

$(BUILD)/build.ninja: | bootstrap
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DMLIR_DIR=$(LLVM_PREFIX)/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_PREFIX)/bin/lit \
	  -DPython_EXECUTABLE=$(PYTHON)

build: bootstrap $(BUILD)/build.ninja
	ninja -C $(BUILD) -j $(JOBS)

# Main job: compile the example mla.decode for the host and for gfx950, and
# run it on the cpu and emu backends, checked against the float64 reference.
run: build
	scripts/run-example.sh $(BUILD)

# Every test: lit (dialect, passes, tools, integration), the unit tests and
# the Python package's (pytest; its PyTorch op's with Debian's python3-torch).
test: build
	@scripts/bootstrap.sh test
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# libFuzzer targets (fuzz/), built with clang-22 in their own directory and
# run FUZZ_SECONDS each (docs/reliability.md).
FUZZ_SECONDS ?= 60
fuzz:
	@scripts/bootstrap.sh fuzz
	scripts/fuzz.sh $(BUILD)-fuzz $(FUZZ_SECONDS) .

# The project under ASan + UBSan and its tests, then the concurrent-launch
# test under TSan, each in its own build directory (docs/reliability.md).
test-sanitize:
	@scripts/bootstrap.sh fuzz
	scripts/test-sanitize.sh $(BUILD)-sanitize . $(JOBS)

clean:
	rm -rf $(BUILD)
