/* boot.c — placeholder */
#include "vm/boot.h"
int sbx_vm_boot(struct sbx_vm_boot *b) { (void)b; return -1; }
