/* text.c — small text files and the kernel command line (text.h). */
#include "vm/text.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

ssize_t sbx_vm_read_text(const char *path, char *buf, size_t cap)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
  if (fd >= 0)
    close(fd);
  buf[n > 0 ? n : 0] = '\0';
  return n > 0 ? n : -1;
}

void sbx_vm_cmdline_value(const char *cmdline, const char *key, char *out, size_t len)
{
  size_t kl = strlen(key);
  out[0] = '\0';
  for (const char *p = cmdline; (p = strstr(p, key)) != NULL; p += kl)
    if ((p == cmdline || p[-1] == ' ') && p[kl] == '=') {
      size_t n = strcspn(p + kl + 1, " \n");
      snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), p + kl + 1);
      return;
    }
}
