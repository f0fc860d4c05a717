/* test_driver.c — the driver seam's registry (runtime/driver.c): a table
 * built for another ABI and one missing a MUST member are refused with a
 * reason naming what is wrong, their profiles are unavailable with it,
 * a good table registers once; MAY members are read only where the
 * table's ABI has them; settings reach a driver through its env. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/profile.h"
#include "runtime/driver.h"

static int ok_probe(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  (void)env, (void)why, (void)whylen;
  return 0;
}

static int ok_create(const struct sbx_sandbox_spec *spec, struct sbx_sandbox **out,
                     struct sbx_error *err)
{
  (void)spec, (void)err;
  *out = NULL;
  return -1;
}

static void ok_destroy(struct sbx_sandbox *sb) { (void)sb; }

static unsigned three_idle(const char *profile, const struct sbx_limits *limits)
{
  (void)profile, (void)limits;
  return 3;
}

static const struct sbx_driver future = {.abi = SBX_DRIVER_ABI + 1,
                                         .name = "future",
                                         .klass = "none",
                                         .probe = ok_probe,
                                         .create = ok_create,
                                         .destroy = ok_destroy};
static const struct sbx_driver ancient = {.abi = SBX_DRIVER_ABI_MIN - 1,
                                          .name = "ancient",
                                          .klass = "none",
                                          .probe = ok_probe,
                                          .create = ok_create,
                                          .destroy = ok_destroy};
static const struct sbx_driver no_create = {.abi = SBX_DRIVER_ABI,
                                            .name = "nocreate",
                                            .klass = "none",
                                            .probe = ok_probe,
                                            .destroy = ok_destroy};
static const struct sbx_driver no_klass = {.abi = SBX_DRIVER_ABI,
                                           .name = "noklass",
                                           .probe = ok_probe,
                                           .create = ok_create,
                                           .destroy = ok_destroy};
static const struct sbx_driver good = {.abi = SBX_DRIVER_ABI,
                                       .name = "good",
                                       .klass = "none",
                                       .probe = ok_probe,
                                       .create = ok_create,
                                       .destroy = ok_destroy,
                                       .pool_idle = three_idle};

static void wrong_abi_is_refused(void)
{
  struct sbx_error err = {0};
  CHECK(sbx_driver_register(&future, &err) < 0);
  CHECK(strstr(err.msg, "driver future refused") != NULL);
  CHECK(strstr(err.msg, "built for driver ABI") != NULL);
  CHECK(sbx_driver_find("future") == NULL);
  const char *why = sbx_driver_refusal("future");
  CHECK(why && strstr(why, "ABI") != NULL);
  memset(&err, 0, sizeof err);
  CHECK(sbx_driver_register(&ancient, &err) < 0);
  CHECK(strstr(err.msg, "ABI") != NULL && sbx_driver_find("ancient") == NULL);
}

static void missing_must_is_refused(void)
{
  struct sbx_error err = {0};
  CHECK(sbx_driver_register(&no_create, &err) < 0);
  CHECK(strstr(err.msg, "MUST member 'create' is NULL") != NULL);
  CHECK(sbx_driver_find("nocreate") == NULL);
  CHECK(sbx_driver_refusal("nocreate") != NULL);
  memset(&err, 0, sizeof err);
  CHECK(sbx_driver_register(&no_klass, &err) < 0);
  CHECK(strstr(err.msg, "'klass'") != NULL);
}

static void good_registers_once(void)
{
  struct sbx_error err = {0};
  CHECK(sbx_driver_register(&good, &err) == 0);
  CHECK(sbx_driver_find("good") == &good);
  CHECK(sbx_driver_refusal("good") == NULL);
  CHECK(sbx_driver_register(&good, &err) < 0);
  CHECK(strstr(err.msg, "already registered") != NULL);
  /* the built-ins are registered too, and pass their own checks */
  CHECK(sbx_driver_find("container") && sbx_driver_find("gvisor") && sbx_driver_find("process"));
  for (const struct sbx_driver *const *d = sbx_drivers_all(); *d; d++)
    CHECK((*d)->abi == SBX_DRIVER_ABI);
  /* the pooling drivers report their own idle count */
  CHECK(sbx_driver_has(sbx_driver_find("container"), pool_idle));
  CHECK(sbx_driver_has(sbx_driver_find("gvisor"), pool_idle));
  CHECK(!sbx_driver_has(sbx_driver_find("process"), pool_idle));
}

/* A MAY member is absent from a table whose ABI predates it, whatever
 * the bytes there say. */
static void may_members_follow_the_abi(void)
{
  struct sbx_driver old = good;
  CHECK(sbx_driver_has(&old, pool_idle));
  old.abi = SBX_DRIVER_SINCE_pool_idle - 1;
  CHECK(!sbx_driver_has(&old, pool_idle));
  CHECK(sbx_driver_has(&old, usage) == false); /* NULL in the table */
}

static void refused_driver_profiles_are_unavailable(void)
{
  struct sbx_profile extra[2];
  sbx_profile_defaults(&extra[0], "fut", "future");
  sbx_profile_defaults(&extra[1], "nc", "nocreate");
  struct sbx_profile_set set;
  struct sbx_error err = {0};
  CHECK(sbx_profiles_build(extra, 2, "container", &set, &err) == 0);
  const struct sbx_profile *f = sbx_profile_find(&set, "fut", NULL);
  const struct sbx_profile *n = sbx_profile_find(&set, "nc", NULL);
  CHECK(f && sbx_profile_state(f) == SBX_PROFILE_UNAVAILABLE);
  CHECK(f && strstr(f->reason, "driver refused: built for driver ABI") != NULL);
  CHECK(n && sbx_profile_state(n) == SBX_PROFILE_UNAVAILABLE);
  CHECK(n && strstr(n->reason, "'create'") != NULL);
  /* a name nobody registered is still a configuration error */
  struct sbx_profile bad;
  sbx_profile_defaults(&bad, "bad", "nosuchdriver");
  struct sbx_profile_set set2;
  CHECK(sbx_profiles_build(&bad, 1, "container", &set2, &err) < 0);
  CHECK(strstr(err.msg, "unknown driver") != NULL);
  sbx_profiles_free(&set);
}

static void settings_reach_the_driver(void)
{
  struct sbx_driver_setting s[] = {{"gvisor_pool_size", "3"},
                                   {"cgroup_parent", "x"},
                                   {"uid_slots", "nope"},
                                   {"container_pool_size", "999"}};
  struct sbx_driver_env env = {.settings = s, .nsettings = 4};
  CHECK_STR(sbx_driver_setting(&env, "cgroup_parent"), "x");
  CHECK(sbx_driver_setting(&env, "gvisor_platform") == NULL);
  CHECK(sbx_driver_setting(NULL, "cgroup_parent") == NULL);
  CHECK(sbx_driver_setting_uint(&env, "gvisor_pool_size", 1, 8) == 3);
  CHECK(sbx_driver_setting_uint(&env, "uid_slots", 1024, 4096) == 1024); /* not a number */
  CHECK(sbx_driver_setting_uint(&env, "container_pool_size", 2, 64) == 64);
  CHECK(sbx_driver_setting_uint(&env, "uid_base", 200000, 1u << 31) == 200000);
}

int main(void)
{
  wrong_abi_is_refused();
  missing_must_is_refused();
  good_registers_once();
  may_members_follow_the_abi();
  refused_driver_profiles_are_unavailable();
  settings_reach_the_driver();
  return check_finish("driver");
}
