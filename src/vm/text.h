/* text.h — the small text files sbx-vm reads (/proc/cmdline, /proc/<pid>/
 * stat and statm) and the kernel command line's sbx.* values.  libc only. */
#ifndef SBX_VM_TEXT_H
#define SBX_VM_TEXT_H

#include <stddef.h>
#include <sys/types.h>

/* Up to cap-1 bytes of path into buf, NUL-terminated: their count, or -1
 * (nothing read; buf is then ""). */
ssize_t sbx_vm_read_text(const char *path, char *buf, size_t cap);

/* The value of key= in cmdline (the text of /proc/cmdline) into out (""
 * when absent); a key counts only as a whole word. */
void sbx_vm_cmdline_value(const char *cmdline, const char *key, char *out, size_t len);

#endif
