/* fuzz.h — what every harness in tests/fuzz/ defines.  One harness per
 * parser of hostile input; each drives the daemon's (or sbx-init's) real
 * code.  Built twice: with clang's libFuzzer (`make fuzz`, -Dfuzz=true) and
 * with replay.c's main() in the normal build, where `meson test --suite
 * fuzz` replays the checked-in corpus (under ASan+UBSan in build-asan). */
#ifndef SBX_TESTS_FUZZ_H
#define SBX_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional: once per process, before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif
