/* test_conn_guard.c — api/conn_guard.c: the client network a connection is
 * counted against (IPv4, IPv4-mapped, IPv6 /64), and the per-client limit
 * on real sockets: past it a connection is shut down, and a removed one
 * gives its count back. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/conn_guard.h"
#include "check.h"

static struct sockaddr_storage addr(const char *text)
{
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, text, &v4->sin_addr) == 1)
    v4->sin_family = AF_INET;
  else if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1)
    v6->sin6_family = AF_INET6;
  return ss;
}

static bool same_client(const char *a, const char *b)
{
  uint8_t ka[SBX_CONN_KEY_LEN], kb[SBX_CONN_KEY_LEN];
  struct sockaddr_storage sa = addr(a), sb = addr(b);
  if (sbx_conn_client_key((struct sockaddr *)&sa, ka) < 0 ||
      sbx_conn_client_key((struct sockaddr *)&sb, kb) < 0)
    return false;
  return !memcmp(ka, kb, sizeof ka);
}

static void test_key(void)
{
  uint8_t k[SBX_CONN_KEY_LEN];
  struct sockaddr_storage ss = addr("198.51.100.7");
  CHECK(sbx_conn_client_key((struct sockaddr *)&ss, k) == 0);
  CHECK(k[0] == 4 && !memcmp(k + 1, "\xc6\x33\x64\x07", 4) && !k[5] && !k[8]);
  CHECK(same_client("198.51.100.7", "198.51.100.7"));
  CHECK(!same_client("198.51.100.7", "198.51.100.8"));
  /* a dual-stack listener sees an IPv4 client as ::ffff:a.b.c.d */
  CHECK(same_client("::ffff:198.51.100.7", "198.51.100.7"));
  CHECK(!same_client("::ffff:198.51.100.7", "::ffff:198.51.100.8"));
  /* IPv6: one /64 is one client, whatever the interface identifier */
  CHECK(same_client("2001:db8:1:2::10", "2001:db8:1:2:ffff:ffff:ffff:ffff"));
  CHECK(same_client("2001:db8:1:2::10", "2001:db8:1:2::20"));
  CHECK(!same_client("2001:db8:1:2::10", "2001:db8:1:3::10"));
  CHECK(!same_client("2001:db8:1:2::10", "2001:db8:2:2::10"));
  /* neither an IPv4 address nor an IPv6 one with the same bytes */
  CHECK(!same_client("::c633:6407", "198.51.100.7"));
  struct sockaddr un = {.sa_family = AF_UNIX};
  CHECK(sbx_conn_client_key(&un, k) < 0);
  CHECK(sbx_conn_client_key(NULL, k) < 0);
}

/* Whether the peer of our end was shut down by the guard. */
static bool cut(int peer)
{
  char c;
  return recv(peer, &c, 1, MSG_DONTWAIT) == 0;
}

static void test_limit(void)
{
  enum { LIMIT = 3, N = LIMIT + 2 };
  struct sbx_conn_guard *g = NULL;
  struct sbx_error err = {0};
  CHECK(sbx_conn_guard_new(0, LIMIT, &g, &err) == 0);
  int sv[N][2];
  struct sbx_conn_slot *slot[N];
  struct sockaddr_storage a = addr("2001:db8:1:2::10"), b = addr("2001:db8:1:2::20");
  struct sockaddr_storage other = addr("2001:db8:1:3::10");
  for (int i = 0; i < N; i++) {
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]) == 0);
    /* alternate between two addresses of one /64: they add up */
    slot[i] = sbx_conn_guard_add(g, sv[i][0], (struct sockaddr *)(i % 2 ? &b : &a));
    CHECK(slot[i] != NULL);
    CHECK(cut(sv[i][1]) == (i >= LIMIT));
  }
  int o[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, o) == 0);
  struct sbx_conn_slot *os = sbx_conn_guard_add(g, o[0], (struct sockaddr *)&other);
  CHECK(os && !cut(o[1])); /* another /64 is another client */
  /* the refused ones and one held one go: there is room for one again */
  for (int i = LIMIT - 1; i < N; i++)
    sbx_conn_guard_remove(g, slot[i]);
  int again[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, again) == 0);
  struct sbx_conn_slot *as = sbx_conn_guard_add(g, again[0], (struct sockaddr *)&a);
  CHECK(as && !cut(again[1]));
  sbx_conn_guard_remove(g, as);
  sbx_conn_guard_remove(g, os);
  for (int i = 0; i < LIMIT - 1; i++)
    sbx_conn_guard_remove(g, slot[i]);
  sbx_conn_guard_free(g);
  for (int i = 0; i < N; i++)
    close(sv[i][0]), close(sv[i][1]);
  close(o[0]), close(o[1]), close(again[0]), close(again[1]);
}

static void test_no_limit(void)
{
  struct sbx_conn_guard *g = NULL;
  struct sbx_error err = {0};
  CHECK(sbx_conn_guard_new(0, 0, &g, &err) == 0);
  struct sockaddr_storage a = addr("198.51.100.7");
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  /* neither deadline nor limit: nothing to keep, nothing cut */
  CHECK(sbx_conn_guard_add(g, sv[0], (struct sockaddr *)&a) == NULL);
  CHECK(!cut(sv[1]));
  sbx_conn_guard_free(g);
  close(sv[0]), close(sv[1]);
}

int main(void)
{
  CHECK_CASE(test_key);
  CHECK_CASE(test_limit);
  CHECK_CASE(test_no_limit);
  return check_finish("conn_guard");
}
