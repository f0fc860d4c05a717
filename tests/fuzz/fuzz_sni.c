/* fuzz_sni.c — the egress proxy's first look at a sandbox's connection
 * (net/sni.c): the TLS ClientHello's server_name, the HTTP request head
 * (Host, absolute and CONNECT forms), the head rewrite sent upstream and
 * host normalisation.  Input: the bytes a sandbox sends first. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "net/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char name[254];
  if (sbx_net_looks_tls(data, size) &&
      sbx_net_sni_parse(data, size, name, sizeof name) == SBX_NET_PARSE_OK) {
    char norm[254];
    if (strlen(name) >= sizeof name)
      abort();
    sbx_net_host_normalize(name, strlen(name), norm, sizeof norm);
  }
  /* A short name buffer: the parser must truncate or refuse, never overrun. */
  char tiny[8];
  sbx_net_sni_parse(data, size, tiny, sizeof tiny);

  struct sbx_net_http_req r;
  if (sbx_net_http_parse((const char *)data, size, &r) == SBX_NET_PARSE_OK) {
    if (r.head_len > size || r.line_end > r.head_len || r.target_off + r.target_len > size)
      abort();                     /* offsets the proxy slices the buffer with */
    size_t cap = r.head_len + 512; /* "always suffices" (sni.h) */
    char *out = malloc(cap);
    if (out && sbx_net_http_rewrite((const char *)data, &r, out, cap) < 0)
      abort();
    free(out);
    char norm[254];
    sbx_net_host_normalize(r.host, strlen(r.host), norm, sizeof norm);
  }
  char norm[254];
  sbx_net_host_normalize((const char *)data, size, norm, sizeof norm);
  return 0;
}
