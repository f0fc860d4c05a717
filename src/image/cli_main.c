/* cli_main.c — sbx-image: `sandboxd image …` as a program of its own, so
 * the image commands can be tested (and used) before the daemon's main()
 * dispatches to them.  `sbx-image pull REF` ≡ `sandboxd image pull REF`. */
#include "image/image.h"

int main(int argc, char **argv)
{
  /* argv[0] plays the role of "image" */
  return sbx_image_main(argc, argv);
}
