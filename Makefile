# sandboxd — the commands a newcomer types.  The build itself is Meson+Ninja.
#   make          build build/sandboxd, build/sbx and build/sbx-init
#   make run      install missing packages, build, start a dev daemon on 127.0.0.1:8080
#   make test     install missing packages, build (-Werror), run every suite, incl. ASan+UBSan
#                 and the driver-facing integration files on gvisor (make test-gvisor)
#   make bench    side-by-side benchmark; writes docs/benchmarks.md
#   make test-hosts  the host lab: Debian kernels under QEMU, suites inside (docs/hosts.md)

BUILD      ?= build
ASAN_BUILD ?= build-asan
PYTHON     ?= /usr/bin/python3
STATE      ?= $(CURDIR)/state
LISTEN     ?= 127.0.0.1:8080

.PHONY: all deps run test test-unit test-asan test-integration test-integration-pg test-gvisor \
        test-hosts bench clean

all: $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(BUILD)/build.ninja:
	meson setup $(BUILD) -Dwerror=true >/dev/null

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=true >/dev/null

deps:
	@./scripts/install-deps.sh

run: deps all
	@./scripts/dev-run.sh $(BUILD) $(STATE) $(LISTEN)

test: deps all test-unit test-asan test-integration test-integration-pg test-gvisor

test-unit: all
	meson test -C $(BUILD) --print-errorlogs

test-asan: $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	meson test -C $(ASAN_BUILD) --print-errorlogs

test-integration: all
	SANDBOXD_BUILD=$(CURDIR)/$(BUILD) $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration

# The same suite with every daemon on a temporary PostgreSQL (docs/postgres.md).
test-integration-pg: all
	SANDBOXD_TEST_DATABASE=postgres SANDBOXD_BUILD=$(CURDIR)/$(BUILD) \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration

# The integration files that exercise a driver, again with every per-profile
# case on gvisor (runsc must work: an unavailable gvisor fails, never skips).
# Not the whole suite: it takes 12+ min on 2 cores (docs/testing.md).
GVISOR_TESTS ?= exec files files_archive terminal contexts watch ports processes streaming \
                executions
test-gvisor: all
	SANDBOXD_TEST_PROFILES=gvisor SANDBOXD_TEST_REQUIRE_PROFILES=1 \
	  SANDBOXD_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider -m 'not slow' \
	  $(GVISOR_TESTS:%=tests/integration/test_%.py)

# The host lab (docs/hosts.md): boots each host of tests/hosts/hosts.json
# (Debian kernels, cgroup v1/v2) under QEMU and runs its subset inside.
# HOSTS=debian12-v2 runs one host; LAB_ARGS='--docs docs/hosts.md' rewrites
# the results table there from this run.
HOSTS    ?=
LAB_ARGS ?=
test-hosts: deps all
	$(PYTHON) tests/hosts/lab.py --build $(BUILD) $(LAB_ARGS) $(HOSTS)

bench: deps all
	$(PYTHON) bench/bench.py --build $(BUILD) --out docs/benchmarks.md

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
