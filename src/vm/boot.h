/* boot.h — what PID 1 in a microVM guest (sbx-vm, the initramfs's /init)
 * does before it relays: everything between the kernel handing over and
 * the first byte on the link.
 *
 *   devtmpfs /dev, /proc, /sys on the initramfs → /dev/console on fds 0-2
 *   if they are closed → /proc/cmdline (sbx.* keys) → clock, RNG seed,
 *   hostname → the modules in /modules/order → wait for the sbx.link port
 *   and /dev/vda → sealed memfd copy of /sbx-init → open the link port →
 *   the sandbox root (below) → detach the initramfs's /dev /proc /sys →
 *   switch root (MS_MOVE onto /, chroot).
 *
 * The sandbox root, mirroring the container driver's (isolation/mount.c,
 * docs/isolation.md §1):
 *   /newroot            tmpfs (initramfs side, unreachable afterwards)
 *   /newroot/.lower     /dev/vda, squashfs, read-only
 *   /newroot/.rw        tmpfs of disk_bytes: upper/ and work/
 *   /                   overlay of the two, nosuid,nodev
 *   /proc               proc
 *   /dev                tmpfs, read-only, nosuid,noexec: null zero full
 *                       random urandom tty (mknod), fd stdin stdout stderr
 *                       ptmx symlinks; /dev/pts devpts (newinstance);
 *                       /dev/shm tmpfs 1777
 *   /tmp                tmpfs 1777 of disk_bytes, nosuid,nodev
 *   /work               tmpfs 0755 of disk_bytes owned by 1000:1000
 *                       (the sandbox user's $HOME and cwd), nosuid,nodev
 * The new /dev has no vport or vda node: the workload cannot reach the
 * host link or the raw disk.  The link fd lives in PID 1 alone (O_CLOEXEC).
 *
 * Kernel command line keys (unknown sbx.* keys are ignored; a malformed
 * known one is reported on the console and its default used):
 *   sbx.disk=<bytes>      size of the writable tmpfs upper, /tmp and /work
 *                         (default SBX_VM_DEFAULT_DISK)
 *   sbx.hostname=<name>   default "sandbox", like the container driver
 *   sbx.seed=<64 hex>     credited to the guest RNG (RNDADDENTROPY)
 *   sbx.time=<unix secs>  CLOCK_REALTIME
 *   sbx.memory=<bytes>    the VM's memory, for the relay's information
 *   sbx.uid=<n> sbx.gid=<n>  the workload's user (1 to 65535; default 1000),
 *                         owner of /work; vm/main.c starts sbx-init as it
 *
 * libc only: sbx-vm is linked -static and runs as PID 1. */
#ifndef SBX_VM_BOOT_H
#define SBX_VM_BOOT_H

#include <stdint.h>

#define SBX_VM_DEFAULT_DISK (1ull << 30)
/* How long to wait for the link port and the root disk to appear. */
#define SBX_VM_DEVICE_TIMEOUT_MS 5000

struct sbx_vm_boot {
  int link_fd;           /* O_RDWR|O_CLOEXEC|O_NONBLOCK fd of the sbx.link port */
  int init_memfd;        /* sealed memfd copy of /sbx-init (execveat AT_EMPTY_PATH), O_CLOEXEC */
  uint64_t disk_bytes;   /* sbx.disk or SBX_VM_DEFAULT_DISK */
  uint64_t memory_bytes; /* sbx.memory, 0 when absent */
  char hostname[65];
};

/* Everything PID 1 does in the guest before relaying.  Fills *b (the caller
 * owns both fds) and returns 0, with the process chrooted into the sandbox
 * root and cwd "/"; on failure returns -1 and has printed why to the
 * console (fd 2, /dev/console when it was closed).  Call once, as PID 1. */
int sbx_vm_boot(struct sbx_vm_boot *b);

#endif
