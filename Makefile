# profshim: `make` builds build/libprofshim.so; `make test` runs every test;
# `make demo` profiles the bundled demo. Each target installs what it needs.
# `make ARCH=arm64` cross-builds for aarch64 with Debian's cross toolchain
# and its arm64 -dev packages (scripts/install-deps --arm64), into
# build-arm64 by default; what it builds runs under qemu-aarch64-static
# (EMU), and `make ARCH=arm64 test-arm64` tests it so (docs/DESIGN.md, "arm64").
ARCH     ?= native
ifeq ($(ARCH),arm64)
CROSS    := aarch64-linux-gnu-
CXX      := $(CROSS)g++
CC       := $(CROSS)gcc
BUILD    := build-arm64
# Debian's arm64 jemalloc is built without profiling (its rules enable it
# on i386 and amd64 only): install-deps --arm64 builds Debian's own source
# of it with --enable-prof, as its amd64 build is, into OWN_JEMALLOC.
EMU      := qemu-aarch64-static
DEPS_ARGS := --arm64
else ifneq ($(filter $(ARCH),native x86_64 amd64),)
CROSS    :=
CXX      ?= g++
CC       ?= gcc
BUILD    := build
EMU      :=
DEPS_ARGS :=
else
$(error ARCH=$(ARCH): only native (the default) and arm64 are known)
endif
OBJCOPY  := $(CROSS)objcopy
AR       := $(CROSS)ar
LIB      := $(BUILD)/libprofshim.so
OPTIONS  := $(BUILD)/profshim-options.tsv
# arm64's is named, not asked of the cross compiler: on a fresh machine
# that comes with install-deps, after this Makefile is read.
ifeq ($(ARCH),arm64)
MULTIARCH := aarch64-linux-gnu
else
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
endif
LIBDIR   := /usr/lib/$(MULTIARCH)

CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=c++17 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden \
            -fno-exceptions -fno-rtti -ftls-model=initial-exec -pthread \
            -Wall -Wextra -Wno-unused-parameter -fno-omit-frame-pointer
CPPFLAGS += -Ishim -D_GNU_SOURCE

SHIM_SRCS := $(wildcard shim/*.cc)
SHIM_OBJS := $(patsubst shim/%.cc,$(BUILD)/shim/%.o,$(SHIM_SRCS))

# The allocator lives inside the shim (a preloaded object's own dependencies
# come after libc in lookup, so -ljemalloc would not serve malloc). libdw
# (and zlib) are dlopen()ed RTLD_LOCAL only when profiling is active, so
# their symbols never bind for the host. libgcc's unwinder is linked in,
# hidden: jemalloc's _Unwind_Backtrace and the sampler's walks use this
# private copy, never a program's libunwind, and an inert process maps no
# libgcc_s (docs/DESIGN.md).
# -z now: every symbol the shim's signal handlers reach is bound at load,
# never lazily inside a handler (the lazy resolver saves the whole vector
# state on whatever stack the handler runs on).
# --wrap=_Unwind_Find_FDE: the lookup is the shim's, lock-free (shim/fde_lookup.h),
# and the shim's walks end where a frame has no unwind
# information, before that copy of the unwinder reads code at a wild address
# (shim/stackwalk_guard.h).
# glibc 2.31 (Debian 11) and newer from one build: every function that would
# bind a glibc version newer than 2.31 is wrapped onto its old version or a
# stand-in (shim/glibc_compat.cc, whose OLD and OLD_AS lines name them), and
# scripts/check-glibc-versions fails the link if one is left.
COMPAT_WRAP  := $(shell sed -n 's/^OLD[_A-Z]*.\([A-Za-z0-9_]*\),.*/\1/p' shim/glibc_compat.cc) stat lstat fstat fstatat arc4random _dl_find_object
SHIM_LDFLAGS := -shared -Wl,--version-script=$(BUILD)/exports.map -Wl,--wrap=_Unwind_Find_FDE \
                $(foreach f,$(COMPAT_WRAP),-Wl,--wrap=$(f)) \
                -Wl,-z,nodelete -Wl,-z,now -Wl,--no-undefined \
                -static-libstdc++ -static-libgcc -Wl,--as-needed
# libiberty: its Rust demangler (rust-demangle.o and the character table it
# uses, nothing else of the archive), linked in and hidden as libgcc is.
LIBIBERTY    := $(LIBDIR)/libiberty.a
# libpthread.so.0, libdl.so.2, librt.so.1 named as needed (by file: -lpthread
# would find the empty libpthread.a of glibc 2.34+): where the old versions
# the wraps bind live on glibc before 2.34; empty stubs after.
SHIM_LDLIBS  := -Wl,--whole-archive $(BUILD)/jemalloc_pic.a -Wl,--no-whole-archive \
                $(LIBIBERTY) -Wl,--exclude-libs,libiberty.a \
                -Wl,--no-as-needed -l:libpthread.so.0 -l:libdl.so.2 -l:librt.so.1 -Wl,--as-needed

.PHONY: all deps test unit integration demo bench bench-smoke clean install uninstall deb test-arm64

all: $(LIB) $(OPTIONS)

deps:
	@scripts/install-deps $(DEPS_ARGS)

$(BUILD)/.deps-ok: scripts/install-deps
	@scripts/install-deps $(DEPS_ARGS)
	@mkdir -p $(BUILD) && touch $@

# Each object depends on the headers it includes, as the compiler found
# them (-MMD; -MP: a header since removed does not stop the build).
# An object built before its .d existed (a build directory older than this
# rule) is rebuilt once: the stamp is newer than it.
$(BUILD)/shim/%.o: shim/%.cc $(BUILD)/.dep-files | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -MMD -MP -c $< -o $@
-include $(SHIM_OBJS:.o=.d)
$(BUILD)/.dep-files:
	@mkdir -p $(BUILD) && touch $@

# Debian's archive with its code moved into one named section, so the shim
# knows the allocator's address range exactly (__start_/__stop_profshim_alloc)
# and cuts heap stacks at the allocation call (docs/DESIGN.md); its profiling
# code (prof*.o) into a second one (profshim_heapprof), so that CPU spent
# sampling the heap is labeled the shim's (wrappers.h). Its API is
# renamed profshim_je_*: the program's calls reach the shim's functions,
# which pass them to jemalloc only when the heap is profiled and to the next
# allocator otherwise (shim/alloc_choice.h); the shim calls the originals.
# jemalloc's C++ operators are left out: the shim's own (recover.cc) never
# throw, and a failed allocation in the stop ends the stop, not the process.
# Its count of pages held from the system (extent.c's static curpages, what
# its prof_gdump watches) is made global for the heap-peak check (peak.h);
# a jemalloc without it fails the link. Its calls to open() go to the
# shim's filter (heap_dump_maps.cc), which keeps the process's maps out of
# heap dumps; its creat() there too, which hands it the memfd the shim dumps
# into (no path, so no /proc, whatever root the program has). Its calls to
# madvise() go to the shim's (heap_advice.cc), which makes none once a
# seccomp filter the program put in would kill it. Its
# constructor (.init_array) is dropped: it would boot jemalloc at load in
# every process, reading MALLOC_CONF meant for another jemalloc; jemalloc
# boots at its first call instead, which comes only where the heap is
# profiled (shim/alloc_choice.h).
JEMALLOC_API := malloc calloc realloc free posix_memalign aligned_alloc memalign valloc malloc_usable_size \
                mallocx rallocx xallocx sallocx dallocx sdallocx nallocx mallctl mallctlnametomib mallctlbymib \
                malloc_stats_print
# On a Debian older than 12, install-deps puts bookworm's jemalloc 5.3 under
# OWN_JEMALLOC; it is taken over the system's (chosen when the recipe runs:
# install-deps may have put it there after this Makefile was read).
OWN_JEMALLOC := /usr/local/lib/profshim/$(MULTIARCH)/libjemalloc_pic.a
ifeq ($(ARCH),arm64)
JEMALLOC_A := $(OWN_JEMALLOC)
else
JEMALLOC_A := $(LIBDIR)/libjemalloc_pic.a
endif
$(BUILD)/jemalloc_pic.a: $(JEMALLOC_A) Makefile | $(BUILD)/.deps-ok
	src=$<; [ "$(ARCH)" = arm64 ] || [ ! -f $(OWN_JEMALLOC) ] || src=$(OWN_JEMALLOC); \
	$(OBJCOPY) --rename-section .text=profshim_alloc --rename-section .text.unlikely=profshim_alloc \
	        --rename-section .text.startup=profshim_alloc \
	        $(foreach f,$(JEMALLOC_API),--redefine-sym $(f)=profshim_je_$(f)) \
	        --redefine-sym curpages=profshim_je_curpages --globalize-symbol=profshim_je_curpages \
	        --redefine-sym open=profshim_je_open --redefine-sym creat=profshim_je_creat \
	        --redefine-sym madvise=profshim_je_madvise --remove-section=.init_array $$src $@.tmp
	$(AR) d $@.tmp jemalloc_cpp.pic.o
	rm -rf $@.prof && mkdir $@.prof
	cd $@.prof && m=$$($(AR) t ../$(notdir $@).tmp | grep '^prof') && $(AR) x ../$(notdir $@).tmp $$m \
	  || { echo "# profshim: error: the jemalloc archive has no prof*.o: a jemalloc built without profiling" >&2; exit 1; }
	for o in $@.prof/*.o; do $(OBJCOPY) --rename-section profshim_alloc=profshim_heapprof $$o || exit 1; done
	$(AR) r $@.tmp $@.prof/*.o
	rm -rf $@.prof
	mv -f $@.tmp $@

# On a fresh machine the archives come with install-deps, run once, as
# $(BUILD)/.deps-ok's recipe: a recipe here would run it a second time, at
# once under -j, and lose the race for apt's lock.
$(JEMALLOC_A) $(LIBIBERTY): | $(BUILD)/.deps-ok
	@test -f $@ || { echo "# profshim: error: $@ is missing after scripts/install-deps" >&2; exit 1; }

# The version script is made from the one list of exported names, which
# scripts/check-exports also holds the library to.
$(BUILD)/exports.map: shim/exports.list
	@mkdir -p $(dir $@)
	{ echo '{'; echo '  global:'; sed 's/.*/    &;/' $<; echo '  local: *;'; echo '};'; } >$@.tmp && mv -f $@.tmp $@

$(LIB): $(SHIM_OBJS) $(BUILD)/exports.map $(BUILD)/jemalloc_pic.a $(LIBIBERTY) Makefile scripts/check-exports scripts/check-glibc-versions
	$(CXX) $(CXXFLAGS) $(SHIM_LDFLAGS) -o $@.tmp $(SHIM_OBJS) $(SHIM_LDLIBS)
	@scripts/check-exports $@.tmp
	@scripts/check-glibc-versions $@.tmp
	@mv -f $@.tmp $@  # a process loading the shim never sees a half-written file

# profshim --help is generated from the shim's own option table: this dumps
# it (shim/config.cc) as tab-separated lines beside the library.
$(BUILD)/cli/options_dump: cli/options_dump.cc $(BUILD)/shim/config.o shim/config.h
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -o $@ $< $(BUILD)/shim/config.o
$(OPTIONS): $(BUILD)/cli/options_dump
	$(EMU) $< >$@.tmp && mv -f $@.tmp $@

# --- tests -----------------------------------------------------------------
UNIT_SRCS := $(wildcard tests/unit/*_test.cc)
UNIT_BINS := $(patsubst tests/unit/%.cc,$(BUILD)/tests/unit/%,$(UNIT_SRCS))
# Unit tests link the shim's pure objects directly (no preload): the
# encoders, the writer, the parsers, the symbolizer with the list of
# unloaded libraries it reads (unload_records.o; the dlclose work that fills
# it, unload.o, asks the engines and is the shim's alone), the stack table
# and a fatal signal's verdict.
CORE_OBJS := $(addprefix $(BUILD)/shim/,atomic_file.o config.o exp_log.o fatal_state.o fde_lookup.o fsroot.o glibc_compat.o glibc_compat_objects.o gzip.o heap_dump.o identity.o pb.o pprof.o \
               go_unwind.o procmaps.o real.o seccomp_bpf.o stack_table.o summary.o sys.o unload_records.o unnamed.o) \
             $(filter $(BUILD)/shim/symbolize%,$(SHIM_OBJS))

$(BUILD)/tests/unit/%: tests/unit/%.cc $(CORE_OBJS) | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) -Itests/unit $(CXXFLAGS) -MMD -MP -o $@ $< $(CORE_OBJS) $(LIBIBERTY) -lz -ldl -lpthread -lrt
-include $(UNIT_BINS:=.d)

WORKLOAD_SRCS := $(wildcard tests/workloads/*.c tests/workloads/*.cc)
WORKLOAD_BINS := $(patsubst tests/workloads/%,$(BUILD)/workloads/%,$(basename $(WORKLOAD_SRCS)))

# -lrt: glibc 2.31 (Debian 11) keeps timer_create in librt; as needed, so
# that on 2.34 and later (librt an empty stub) no workload loads it.
$(BUILD)/workloads/%: tests/workloads/%.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fno-omit-frame-pointer -fno-inline -pthread -o $@ $< -ldl -Wl,--push-state,--as-needed -lrt -Wl,--pop-state

# je_*: programs built for jemalloc, linked with Debian's libjemalloc.so.2
# as such programs are (redis-server, bind9's libisc).
$(BUILD)/workloads/je_%: tests/workloads/je_%.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fno-omit-frame-pointer -fno-inline -pthread -o $@ $< -ljemalloc -ldl

# tc_*: programs linked with gperftools' tcmalloc.
$(BUILD)/workloads/tc_%: tests/workloads/tc_%.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fno-omit-frame-pointer -fno-inline -pthread -o $@ $< -ltcmalloc

# C++17 spelled out: GCC 10 (Debian 11) defaults to C++14, without
# std::align_val_t; GCC 12 and later default to this.
WL_CXXSTD := -std=gnu++17
$(BUILD)/workloads/%: tests/workloads/%.cc | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CXX) $(WL_CXXSTD) -O1 -g -fno-omit-frame-pointer -fno-inline -pthread -o $@ $< -ldl -Wl,--push-state,--as-needed -lrt -Wl,--pop-state

# Inlining is what sym_cxx_names is about: -O2, not the pattern's -fno-inline.
$(BUILD)/workloads/sym_cxx_names: tests/workloads/sym_cxx_names.cc | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CXX) $(WL_CXXSTD) -O2 -g -fno-omit-frame-pointer -pthread -o $@ $<

# A program that unwinds itself with libunwind (the sampler must share no
# lock with it).
$(BUILD)/workloads/unwinds_itself: tests/workloads/unwinds_itself.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fno-omit-frame-pointer -o $@ $< -lunwind

$(BUILD)/workloads/uses_zlib: tests/workloads/uses_zlib.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fno-omit-frame-pointer -fno-inline -o $@ $< -lz

test: $(LIB) $(OPTIONS) $(UNIT_BINS) $(WORKLOAD_BINS)
	@python3 tests/run.py --build $(BUILD)

unit: $(UNIT_BINS)
	@python3 tests/run.py --build $(BUILD) --only unit

integration: $(LIB) $(OPTIONS) $(WORKLOAD_BINS)
	@python3 tests/run.py --build $(BUILD) --only integration

# The arm64 build under qemu-user (tests/arm64/run.py): its unit tests and a
# few workloads, plain and under the shim. `make ARCH=arm64 test-arm64`; not
# part of `make test`.
ARM64_WORKLOADS := $(addprefix $(BUILD)/workloads/,cpu_split heap_hold stop_paths fork_exec)
test-arm64: $(LIB) $(OPTIONS) $(UNIT_BINS) $(ARM64_WORKLOADS)
	@test "$(ARCH)" = arm64 || { echo "# profshim: error: test-arm64 is for the arm64 build: make ARCH=arm64 test-arm64" >&2; exit 1; }
	@python3 tests/arm64/run.py --build $(BUILD) --emu "$(EMU)"

demo: $(LIB) $(BUILD)/workloads/demo
	@scripts/demo $(BUILD)

bench: $(LIB) $(WORKLOAD_BINS)
	@scripts/install-deps --bench
	@python3 tests/bench/bench.py --build $(BUILD)

clean:
	rm -rf $(BUILD)

# --- install, uninstall, a Debian package ----------------------------------
# The installed profshim finds the library at ../lib, the shim's parsers
# for `profshim check` at ../lib/profshim/options_dump, and its Python parts
# and option table at ../share/profshim from where it is; the env files
# name the installed library.
PREFIX   ?= /usr/local
SHAREDIR  = $(DESTDIR)$(PREFIX)/share/profshim
DOCDIR    = $(DESTDIR)$(PREFIX)/share/doc/profshim
CLI_SRCS := $(wildcard cli/*.py)
DOC_SRCS := $(wildcard docs/*.md)

install: $(LIB) $(OPTIONS)
	install -d $(DESTDIR)$(PREFIX)/lib/profshim $(DESTDIR)$(PREFIX)/bin $(SHAREDIR)/cli $(DOCDIR)/docs
	install -m 0644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libprofshim.so
	install -m 0755 $(BUILD)/cli/options_dump $(DESTDIR)$(PREFIX)/lib/profshim/options_dump
	install -m 0755 scripts/profshim $(DESTDIR)$(PREFIX)/bin/profshim
	install -m 0644 $(CLI_SRCS) $(SHAREDIR)/cli/
	install -m 0644 $(OPTIONS) $(SHAREDIR)/options.tsv
	for f in profshim.conf profshim.env; do \
	  sed 's|/usr/local/lib/libprofshim.so|$(PREFIX)/lib/libprofshim.so|g' env/$$f >$(SHAREDIR)/$$f && \
	  chmod 0644 $(SHAREDIR)/$$f || exit 1; done
	install -m 0644 README.md $(DOCDIR)/
	install -m 0644 $(DOC_SRCS) $(DOCDIR)/docs/

# Only what install put there: PREFIX/lib/profshim is also where
# install-deps keeps the parts it builds (/usr/local/lib/profshim: Debian
# 11's jemalloc and Go, arm64's jemalloc).
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libprofshim.so $(DESTDIR)$(PREFIX)/bin/profshim \
	  $(DESTDIR)$(PREFIX)/lib/profshim/options_dump
	rmdir $(DESTDIR)$(PREFIX)/lib/profshim 2>/dev/null || true
	rm -rf $(SHAREDIR) $(DOCDIR)

# build/profshim_VERSION_ARCH.deb: `make install PREFIX=/usr` into a staging
# root, then dpkg-deb (scripts/make-deb says what it depends on and why).
deb: $(LIB) $(OPTIONS)
	rm -rf $(BUILD)/deb && $(MAKE) --no-print-directory install PREFIX=/usr DESTDIR=$(abspath $(BUILD))/deb/root
	scripts/make-deb $(BUILD)
