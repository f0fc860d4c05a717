/* quantity.h — Kubernetes-style resource quantities.
 * cpu:    "2", "0.5", "500m"        → millicores
 * memory: "256Mi", "1Gi", "1G", "512" → bytes (also used for disk and output)
 * Both reject garbage ("lots"), negatives, empty strings and overflow. */
#ifndef SBX_COMMON_QUANTITY_H
#define SBX_COMMON_QUANTITY_H

#include <stdint.h>

int sbx_parse_cpu_millis(const char *s, uint64_t *out);
int sbx_parse_bytes(const char *s, uint64_t *out);
/* Formats bytes canonically ("256Mi", "1Gi", "1500") into buf. */
void sbx_format_bytes(uint64_t v, char *buf, int len);
/* Formats millicores ("500m", "2"). */
void sbx_format_cpu(uint64_t millis, char *buf, int len);

#endif
