# profshim: `make` builds build/libprofshim.so; `make test` runs every test;
# `make demo` profiles the bundled demo. Each target installs what it needs.
CXX      ?= g++
CC       ?= gcc
BUILD    := build
LIB      := $(BUILD)/libprofshim.so
MULTIARCH := $(shell gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
LIBDIR   := /usr/lib/$(MULTIARCH)

CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=c++17 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden \
            -fno-exceptions -fno-rtti -ftls-model=initial-exec -pthread \
            -Wall -Wextra -Wno-unused-parameter -fno-omit-frame-pointer
CPPFLAGS += -Ishim -D_GNU_SOURCE

SHIM_SRCS := $(wildcard shim/*.cc)
SHIM_OBJS := $(patsubst shim/%.cc,$(BUILD)/shim/%.o,$(SHIM_SRCS))

# The allocator lives inside the shim (a preloaded object's own dependencies
# come after libc in lookup, so -ljemalloc would not serve malloc). libunwind
# and libdw are dlopen()ed RTLD_LOCAL only when profiling is active, so their
# symbols never bind for the host. libgcc's unwinder is linked in, hidden:
# jemalloc's _Unwind_Backtrace binds to it at link time, never to libunwind's,
# and an inert process maps no libgcc_s (docs/DESIGN.md).
SHIM_LDFLAGS := -shared -Wl,--version-script=shim/exports.map \
                -Wl,-z,nodelete -Wl,--no-undefined \
                -static-libstdc++ -static-libgcc -Wl,--as-needed
SHIM_LDLIBS  := -Wl,--whole-archive $(BUILD)/jemalloc_pic.a -Wl,--no-whole-archive \
                -ldl -lpthread

.PHONY: all deps test unit integration demo bench bench-smoke clean install

all: $(LIB)

deps:
	@scripts/install-deps

$(BUILD)/.deps-ok: scripts/install-deps
	@scripts/install-deps
	@mkdir -p $(BUILD) && touch $@

$(BUILD)/shim/%.o: shim/%.cc $(wildcard shim/*.h) | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

# Debian's archive with its code moved into one named section, so the shim
# knows the allocator's address range exactly (__start_/__stop_profshim_alloc)
# and cuts heap stacks at the allocation call (docs/DESIGN.md).
$(BUILD)/jemalloc_pic.a: $(LIBDIR)/libjemalloc_pic.a | $(BUILD)/.deps-ok
	objcopy --rename-section .text=profshim_alloc --rename-section .text.unlikely=profshim_alloc \
	        --rename-section .text.startup=profshim_alloc $< $@

$(LIB): $(SHIM_OBJS) shim/exports.map $(BUILD)/jemalloc_pic.a Makefile scripts/check-exports
	$(CXX) $(CXXFLAGS) $(SHIM_LDFLAGS) -o $@.tmp $(SHIM_OBJS) $(SHIM_LDLIBS)
	@scripts/check-exports $@.tmp
	@mv -f $@.tmp $@  # a process loading the shim never sees a half-written file

# --- tests -----------------------------------------------------------------
UNIT_SRCS := $(wildcard tests/unit/*_test.cc)
UNIT_BINS := $(patsubst tests/unit/%.cc,$(BUILD)/tests/unit/%,$(UNIT_SRCS))
# Unit tests link the shim's objects directly (no preload), minus the
# interposition layer and the allocator.
CORE_OBJS := $(filter-out $(addprefix $(BUILD)/shim/,hooks.o allocator.o lifecycle.o heap.o finish.o signals.o sampler.o real.o),$(SHIM_OBJS))

$(BUILD)/tests/unit/%: tests/unit/%.cc $(CORE_OBJS) tests/unit/check.h $(wildcard tests/fixtures/*.h) | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) -Itests/unit $(CXXFLAGS) -o $@ $< $(CORE_OBJS) -lz -ldl -lpthread

WORKLOAD_SRCS := $(wildcard tests/workloads/*.c tests/workloads/*.cc)
WORKLOAD_BINS := $(patsubst tests/workloads/%,$(BUILD)/workloads/%,$(basename $(WORKLOAD_SRCS)))

$(BUILD)/workloads/%: tests/workloads/%.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fno-omit-frame-pointer -fno-inline -pthread -o $@ $< -ldl

$(BUILD)/workloads/%: tests/workloads/%.cc | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CXX) -O1 -g -fno-omit-frame-pointer -fno-inline -pthread -o $@ $< -ldl

test: $(LIB) $(UNIT_BINS) $(WORKLOAD_BINS)
	@python3 tests/run.py --build $(BUILD)

demo: $(LIB) $(BUILD)/workloads/demo
	@scripts/demo $(BUILD)

bench: $(LIB) $(WORKLOAD_BINS)
	@scripts/install-deps --bench
	@python3 tests/bench/bench.py --build $(BUILD)

clean:
	rm -rf $(BUILD)

install: $(LIB)
	install -D -m 0755 $(LIB) $(DESTDIR)/usr/local/lib/libprofshim.so
	install -D -m 0755 scripts/profshim $(DESTDIR)/usr/local/bin/profshim
