/* Prints one line: the smallest WASI command. */
#include <stdio.h>

int main(void)
{
  printf("hello from wasm\n");
  return 0;
}
