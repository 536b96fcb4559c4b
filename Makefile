# gpuvm: the entry point. CMake + Ninja do the building, CTest the testing; this file only names the jobs.
#   make run    the main job on the embedded default (software GPU, local hypervisor)
#   make test   build everything and run every test (what CI runs)
#   make bench  the benchmark programs; figures go to stdout and build/bench/
#   make asan   the tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make fuzz   build the libFuzzer targets with clang and run each for FUZZ_SECONDS
#   make xen-test  Xen 4.17 + dom0 + an HVM guest under QEMU/TCG with the stack inside (docs/XEN-TESTBED.md)
#   make install  PREFIX=/usr/local DESTDIR= (cmake --install: dom0 programs, guest libraries, docs)
#   make package  the Debian packages gpuvm-host and gpuvm-guest (CPack) in build/packages/
#   make format, make deps, make ptx, make clean
# BUILD=dir picks another build directory (parallel sessions each use their own).

BUILD ?= build
ASAN_BUILD ?= $(BUILD)-asan
FUZZ_BUILD ?= $(BUILD)-fuzz
FUZZ_SECONDS ?= 60
JOBS ?= $(shell nproc)
CTEST_ARGS ?=
NVCC ?= $(shell command -v nvcc || echo /usr/local/cuda/bin/nvcc)
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all test run bench asan fuzz fuzz-build clean deps format ptx configure xen-test install package

all: configure
	ninja -C $(BUILD)

deps:
	@scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

test: all
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) $(CTEST_ARGS)

run: all
	scripts/run.sh $(BUILD)

install: all
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

package: all
	cd $(BUILD) && cpack -G DEB

bench: all
	scripts/bench.sh $(BUILD)

# protect_shadow_gap=0: managed memory lives at fixed host addresses in [512 GiB, 1 TiB), inside
# ASan's shadow gap (CUDA programs under ASan need the same option for the same reason).
asan: deps
	@test -f $(ASAN_BUILD)/build.ninja || cmake -S . -B $(ASAN_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Debug -DGPUVM_SANITIZE=ON
	ninja -C $(ASAN_BUILD)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:protect_shadow_gap=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 GPUVM_SANITIZED=1 \
	  ctest --output-on-failure -j$(JOBS) $(CTEST_ARGS)

fuzz-build: deps
	@test -f $(FUZZ_BUILD)/build.ninja || CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUVM_FUZZ=ON
	ninja -C $(FUZZ_BUILD)

fuzz: fuzz-build
	scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

ptx:
	scripts/make-ptx.sh $(NVCC)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)

# The Xen test bed (docs/XEN-TESTBED.md): Xen 4.17 + dom0 + an HVM guest under QEMU/TCG, the stack inside.
xen-test: all
	scripts/xen-testbed/xen-test.sh $(BUILD)
