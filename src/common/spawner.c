/* spawner.c — the long-lived job thread of spawner.h. */
#include "common/spawner.h"

#include <signal.h>
#include <string.h>

struct sbx_spawn_job {
  int (*fn)(void *arg, struct sbx_error *err);
  void *arg;
  int rc;
  bool done;
  struct sbx_error err;
  struct sbx_spawn_job *next;
};

static void *spawner_main(void *arg)
{
  struct sbx_spawner *s = arg;
  if (s->on_start)
    s->on_start();
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (!s->head)
      pthread_cond_wait(&s->wake, &s->lock);
    struct sbx_spawn_job *j = s->head;
    s->head = j->next;
    if (!s->head)
      s->tail = NULL;
    pthread_mutex_unlock(&s->lock);
    j->rc = j->fn(j->arg, &j->err);
    pthread_mutex_lock(&s->lock);
    j->done = true;
    pthread_cond_broadcast(&s->done);
  }
  return NULL;
}

/* Called with s->lock held. */
static int start_locked(struct sbx_spawner *s, struct sbx_error *err)
{
  if (s->started)
    return 0;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  /* The new thread inherits this mask: all signals blocked. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  int e = pthread_create(&t, &a, spawner_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&a);
  if (e)
    return sbx_err_sys(err, e, "%s: starting the spawner thread", s->name);
  s->started = true;
  return 0;
}

int sbx_spawner_start(struct sbx_spawner *s, struct sbx_error *err)
{
  pthread_mutex_lock(&s->lock);
  int ret = start_locked(s, err);
  pthread_mutex_unlock(&s->lock);
  return ret;
}

int sbx_spawner_call(struct sbx_spawner *s, int (*fn)(void *arg, struct sbx_error *job_err),
                     void *arg, struct sbx_error *err)
{
  struct sbx_spawn_job j = {.fn = fn, .arg = arg};
  pthread_mutex_lock(&s->lock);
  if (start_locked(s, err) < 0) {
    pthread_mutex_unlock(&s->lock);
    return -1;
  }
  if (s->tail)
    s->tail->next = &j;
  else
    s->head = &j;
  s->tail = &j;
  pthread_cond_signal(&s->wake);
  while (!j.done)
    pthread_cond_wait(&s->done, &s->lock);
  pthread_mutex_unlock(&s->lock);
  if (j.rc < 0 && err)
    *err = j.err;
  return j.rc < 0 ? -1 : j.rc;
}
