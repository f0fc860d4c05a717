# sandboxd — the commands a newcomer types.  The build itself is Meson+Ninja.
#   make          build build/sandboxd, build/sbx and build/sbx-init
#   make run      install missing packages, build, start a dev daemon on 127.0.0.1:8080
#   make test     install missing packages, build (-Werror), run every suite, incl. ASan+UBSan
#                 the driver-facing integration files on gvisor (make test-gvisor) and
#                 on microVMs (make test-microvm), the wasm profile (make test-wasm), the
#                 real E2B SDKs against the E2B-compatible API (make test-compat), the
#                 Python, TypeScript, Go and Java SDKs (make test-sdk), the MCP server (make test-mcp)
#                 and the .deb (make test-deb)
#   make bench    side-by-side benchmark; writes docs/benchmarks.md
#   make deb      build/deb/sandboxd_<version>_amd64.deb with Debian's tooling (debhelper)
#   make fuzz     every libFuzzer harness of tests/fuzz for FUZZ_SECONDS each (clang)
#   make format   clang-format (.clang-format) over the C of src/ and tests/; format-check
#                 lists what it would change and fails if anything
#   make test-hosts  the host lab: Debian kernels under QEMU, suites inside (docs/hosts.md)
#   make microvm-assets  the microvm driver's kernel, initramfs and rootfs in build/microvm
#                 (docs/microvm.md)

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZERS    ?= router schema init_msg chan_reply archive image dns sni policy link
PYTHON     ?= /usr/bin/python3
STATE      ?= $(CURDIR)/state
LISTEN     ?= 127.0.0.1:8080

.PHONY: all deps run test test-unit test-asan test-integration test-integration-pg test-gvisor test-fleet \
        test-microvm test-wasm test-compat test-sdk test-mcp test-helm test-hosts bench fuzz clean deb test-deb format \
        format-check microvm-assets

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

# Every suite, each timed (scripts/run-suites.sh prints the table at the end).
SUITES ?= test-unit test-asan test-integration test-integration-pg test-gvisor test-microvm \
          test-wasm test-compat test-sdk test-mcp test-helm test-fleet test-deb test-hosts
test: deps all
	@./scripts/run-suites.sh $(SUITES)

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
                executions outcomes
# … and single cases of other files: CPU charged from the cgroup holding the Sentry.
GVISOR_CASES ?= tests/integration/test_resources.py::test_background_cpu_is_charged_then_refused_and_stopped
test-gvisor: all
	SANDBOXD_TEST_PROFILES=gvisor SANDBOXD_TEST_REQUIRE_PROFILES=1 \
	  SANDBOXD_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider -m 'not slow' \
	  $(GVISOR_TESTS:%=tests/integration/test_%.py) $(GVISOR_CASES)

# The driver-facing integration files again on the microvm profile (QEMU
# microVMs under their own kernel; TCG here: SANDBOXD_MICROVM_ACCEL defaults
# to tcg when the run wants microvm), plus test_microvm.py, the driver's own
# attacks.  Every session is a cold guest boot (3-10 s of TCG on 2 cores), so
# whole files where they are cheap and single cases of the others: ~6 min
# (docs/testing.md, "The microvm run").
MICROVM_TESTS ?= exec microvm microvm_images microvm_network
MICROVM_CASES ?= tests/integration/test_files.py::test_put_get_list_delete \
                 tests/integration/test_files.py::test_symlink_swap_in_parent_dir \
                 tests/integration/test_files_archive.py::test_archive_round_trip \
                 tests/integration/test_files_archive.py::test_extract_into_planted_symlink_stays_inside \
                 tests/integration/test_contexts.py::test_python_keeps_state \
                 tests/integration/test_contexts.py::test_output_cannot_forge_a_reply \
                 tests/integration/test_watch.py::test_watch_create_modify_delete_move \
                 tests/integration/test_terminal.py::test_sbx_exec_it
# … and tests/microvm: the link's relay against a hostile guest, the guest
# init's boot and the assets, with no daemon.
test-microvm: microvm-assets
	SANDBOXD_TEST_PROFILES=microvm SANDBOXD_TEST_REQUIRE_PROFILES=1 \
	  SANDBOXD_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider -m 'not slow' \
	  $(MICROVM_TESTS:%=tests/integration/test_%.py) $(MICROVM_CASES) tests/microvm

# The wasm profile (docs/wasm.md): the engine's runner under Node on its own
# (tests/wasm), then the API on the wasm profile (tests/integration/test_wasm.py),
# with modules built by clang --target=wasm32-wasi.
test-wasm: all
	node --test tests/wasm/
	SANDBOXD_TEST_PROFILES=wasm SANDBOXD_TEST_REQUIRE_PROFILES=1 \
	  SANDBOXD_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider \
	  tests/integration/test_wasm.py

# The E2B-compatible surface driven by the real e2b / @e2b/code-interpreter
# SDKs, installed with npm ci from tests/compat/package-lock.json
# (docs/compat/e2b.md); a subset again on gvisor when runsc works here.
test-compat: all
	cd tests/compat && npm ci --no-audit --no-fund --silent
	SANDBOXD_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider tests/compat
# The Python, TypeScript, Go and Java SDKs (sdk/, docs/sdk/): the TypeScript build
# (Debian's tsc) and a compile-time check of its documented usage, the
# Python package's types (mypy --strict), gofmt and go vet of the Go module,
# each SDK's unit tests, the contract check against docs/api/openapi.yaml,
# each installed as a package offline, then the same scenario for each
# against a real daemon and a loopback registry.  Go runs offline through
# tests/sdk/go.sh, its caches under $(BUILD)/go.
test-sdk: deps all
	cd sdk/typescript && tsc -p tsconfig.json && tsc -p test
	mypy --strict sdk/python/src/sandboxd
	$(PYTHON) -m unittest discover -s sdk/python/tests
	cd sdk/typescript && node --test test/unit.test.mjs
	$(MAKE) --no-print-directory sdk-java
	java -cp $(BUILD)/sdk-java/sandboxd-sdk.jar:$(BUILD)/sdk-java/test-classes dev.sandboxd.UnitTests
	./tests/sdk/go.sh $(BUILD) check
	SANDBOXD_BUILD=$(abspath $(BUILD)) $(PYTHON) tests/sdk/check_sdk_contract.py
	SANDBOXD_BUILD=$(abspath $(BUILD)) PYTHON=$(PYTHON) ./tests/sdk/check_packages.sh
	SANDBOXD_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider tests/sdk
# The Java SDK's jar and unit tests (sdk/java, docs/sdk/java.md): javac + jar
# of Debian's JDK 17, with Debian's Jackson, offline; test-sdk also checks it
# against the contract (the jar found through SANDBOXD_JAVA_SDK) and runs its
# scenario (tests/sdk/test_sdk.py).
.PHONY: sdk-java
sdk-java: deps
	./sdk/java/build.sh $(BUILD)/sdk-java >/dev/null
test-sdk: export SANDBOXD_JAVA_SDK = $(abspath $(BUILD))/sdk-java
# The MCP server (/mcp and `sbx mcp`) driven by the pinned official MCP SDK
# client and @modelcontextprotocol/conformance's server scenarios
# (tests/mcp/, docs/mcp.md); npm ci installs exactly package-lock.json.
test-mcp: all
	cd tests/mcp && npm ci --no-audit --no-fund >/dev/null && \
	  SANDBOXD_BUILD=$(CURDIR)/$(BUILD) node --test --test-concurrency=1 mcp.test.mjs && \
	  SANDBOXD_BUILD=$(CURDIR)/$(BUILD) node conformance.mjs

# A fleet: three daemons, each in its own network namespace on
# 198.51.100.0/24, sharing one PostgreSQL (tests/fleet/, docs/fleet.md).
test-fleet: all
	SANDBOXD_BUILD=$(CURDIR)/$(BUILD) $(PYTHON) -m pytest -q -p no:cacheprovider tests/fleet

# The Helm chart (deploy/helm/sandboxd, docs/deploy/kubernetes.md): rendered
# offline by tests/helm/render.go (text/template + Debian's sprig, as Helm
# does) for each value set of tests/helm/values, every object validated
# against the Kubernetes schemas of the pinned kubernetes-models (npm ci),
# plus lint and values.schema.json.  Needs no C build.
test-helm:
	./tests/helm/run.sh $(BUILD)

# The package (packaging/), and the package installed into a throwaway copy
# of this host's root, serving a session (tests/packaging/test-deb.sh).
deb: deps
	./packaging/build-deb.sh $(CURDIR)/$(BUILD)/deb

test-deb: deb
	./tests/packaging/test-deb.sh $$(ls -t $(BUILD)/deb/sandboxd_*.deb | head -1)
# libFuzzer needs clang and coverage in every library a harness links: a
# build dir of its own (docs/testing.md, "Fuzzing").  Only the fuzz_*
# binaries are built there (sbx-init, static, cannot take the coverage).
$(FUZZ_BUILD)/build.ninja:
	CC=clang-14 meson setup $(FUZZ_BUILD) -Dfuzz=true -Db_sanitize=address,undefined \
	  -Db_lundef=false >/dev/null

fuzz: deps $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD) $(FUZZERS:%=tests/fuzz/fuzz_%)
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZERS)
# The host lab (docs/hosts.md): boots each host of tests/hosts/hosts.json
# (Debian kernels, cgroup v1/v2) under QEMU and runs its subset inside.
# HOSTS=debian12-v2 runs one host; LAB_ARGS='--docs docs/hosts.md' rewrites
# the results table there from this run.
# debian12-v1 is not in the default run until the soft lockup of two
# sbx-init tasks its guest shows under TCG is understood (docs/hosts.md,
# "Open problems"); run it with `make test-hosts HOSTS=debian12-v1`.
HOSTS    ?= debian12-v2 debian13-v2
LAB_ARGS ?=
test-hosts: deps all
	$(PYTHON) tests/hosts/lab.py --build $(BUILD) $(LAB_ARGS) $(HOSTS)

# The microvm driver's assets (docs/microvm.md): vmlinuz (a link into the
# kernel cache), initrd.img (sbx-vm as /init) and rootfs.sqfs in $(BUILD)/microvm.
# Not part of `all`: it needs squashfs-tools and, once, the network.
MICROVM_CACHE ?= /var/cache/sandboxd/microvm
microvm-assets: all
	$(PYTHON) scripts/microvm-assets.py all --cache $(MICROVM_CACHE) --build $(BUILD) \
	  --out $(BUILD)/microvm

bench: deps all
	$(PYTHON) bench/bench.py --build $(BUILD) --out docs/benchmarks.md

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)

# The C style, mechanically (.clang-format).  Only files git tracks.
CLANG_FORMAT ?= clang-format
FORMAT_FILES = $(shell git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h')
format:
	$(CLANG_FORMAT) -i $(FORMAT_FILES)
format-check:
	$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_FILES)
