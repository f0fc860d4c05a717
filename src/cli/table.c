/* table.c — listings: following `next_cursor` pagination and printing
 * aligned tables for humans. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

/* A server that keeps handing out cursors must not make us loop forever. */
#define MAX_PAGES 100000

static int fetch_page(struct sbx_cli *cli, const char *path, const char *cursor, json_t **page,
                      struct sbx_error *err)
{
  _cleanup_free_ char *url = NULL;
  if (!cursor)
    return sbx_http_json(cli->http, "GET", path, NULL, page, err);
  _cleanup_free_ char *esc = sbx_http_escape(cursor);
  if (asprintf(&url, "%s%ccursor=%s", path, strchr(path, '?') ? '&' : '?', esc) < 0)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "out of memory");
  return sbx_http_json(cli->http, "GET", url, NULL, page, err);
}

int sbx_cli_list_all(struct sbx_cli *cli, const char *path, const char *key, json_t **all,
                     struct sbx_error *err)
{
  json_t *out = json_array();
  _cleanup_free_ char *cursor = NULL;
  for (int pages = 0; pages < MAX_PAGES; pages++) {
    json_t *page = NULL;
    if (fetch_page(cli, path, cursor, &page, err) < 0) {
      json_decref(out);
      return -1;
    }
    json_t *items = json_object_get(page, key);
    if (!json_is_array(items)) {
      json_decref(page);
      json_decref(out);
      return sbx_err_set(err, SBX_E_INTERNAL, 0, "sandboxd's answer has no '%s' list", key);
    }
    json_array_extend(out, items);
    const char *next = json_string_value(json_object_get(page, "next_cursor"));
    bool more = next && *next && (!cursor || strcmp(next, cursor) != 0);
    free(cursor);
    cursor = more ? strdup(next) : NULL;
    json_decref(page);
    if (!cursor)
      break;
  }
  *all = out;
  return 0;
}

const char *sbx_cli_cell(json_t *obj, const char *key, char *buf, size_t len)
{
  json_t *v = json_object_get(obj, key);
  if (json_is_string(v) && json_string_length(v) > 0)
    return json_string_value(v);
  if (json_is_integer(v) && strstr(key, "_at")) {
    sbx_format_time((int64_t)json_integer_value(v), buf, len);
    return buf;
  }
  if (json_is_integer(v)) {
    snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    return buf;
  }
  if (json_is_boolean(v))
    return json_is_true(v) ? "yes" : "no";
  return "-";
}

static void print_cells(const char *const *cells, const size_t *width, size_t ncols)
{
  for (size_t c = 0; c + 1 < ncols; c++)
    printf("%-*s  ", (int)width[c], cells[c]);
  printf("%s\n", cells[ncols - 1]);
}

void sbx_cli_table(const char *const *headers, size_t ncols, json_t *rows)
{
  enum { MAX_COLS = 16 };
  size_t width[MAX_COLS] = {0};
  const char *cells[MAX_COLS];
  if (ncols == 0 || ncols > MAX_COLS)
    return;
  for (size_t c = 0; c < ncols; c++)
    width[c] = strlen(headers[c]);
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row)
  {
    for (size_t c = 0; c < ncols; c++) {
      size_t w = strlen(json_string_value(json_array_get(row, c)) ?: "");
      width[c] = w > width[c] ? w : width[c];
    }
  }
  print_cells(headers, width, ncols);
  json_array_foreach(rows, i, row)
  {
    for (size_t c = 0; c < ncols; c++)
      cells[c] = json_string_value(json_array_get(row, c)) ?: "";
    print_cells(cells, width, ncols);
  }
}

json_t *sbx_cli_row(json_t *obj, const char *const *keys, size_t n)
{
  char buf[64];
  json_t *row = json_array();
  for (size_t k = 0; k < n; k++)
    json_array_append_new(row, json_string(sbx_cli_cell(obj, keys[k], buf, sizeof buf)));
  return row;
}

int sbx_cli_ls(struct sbx_cli *cli, const char *path, const char *key, bool json,
               const char *const *headers, size_t ncols, json_t *(*row)(json_t *elem))
{
  struct sbx_error err = {0};
  json_t *all = NULL;
  if (sbx_cli_list_all(cli, path, key, &all, &err) < 0)
    return sbx_cli_fail_api(cli, &err);
  if (json) {
    sbx_cli_print_json(all);
  } else {
    json_t *rows = json_array(), *e;
    size_t i;
    json_array_foreach(all, i, e) json_array_append_new(rows, row(e));
    sbx_cli_table(headers, ncols, rows);
    json_decref(rows);
  }
  json_decref(all);
  return SBX_EXIT_OK;
}
