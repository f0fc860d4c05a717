/* boot.h — placeholder until vm/boot.c lands (the guest's PID 1 set-up). */
#ifndef SBX_VM_BOOT_H
#define SBX_VM_BOOT_H
#include <stdint.h>
struct sbx_vm_boot {
  int link_fd;
  int init_memfd;
  uint64_t disk_bytes;
  char hostname[65];
};
int sbx_vm_boot(struct sbx_vm_boot *b);
#endif
