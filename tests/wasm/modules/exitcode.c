/* exitcode N: exits with status N (via exit(), i.e. WASI proc_exit). */
#include <stdlib.h>

int main(int argc, char **argv) { exit(argc > 1 ? atoi(argv[1]) : 0); }
