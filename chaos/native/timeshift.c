/*
 * A clock offset for a process that libfaketime cannot run (redis-server links jemalloc, whose
 * start-up calls clock_gettime before libfaketime can initialise: libfaketime issue #130). The
 * wall clock (CLOCK_REALTIME, gettimeofday, time) is shifted by the number of seconds in the
 * file TIMESHIFT_FILE ("+2.5", "-1.25": the format of libfaketime's FAKETIME_TIMESTAMP_FILE),
 * read again at most every 5 ms of the monotonic clock. Monotonic clocks are never shifted.
 * Real time comes from the raw syscall: no dlsym, no malloc, no recursion.
 *
 *   gcc -shared -fPIC -O2 -o timeshift.so timeshift.c
 *   TIMESHIFT_FILE=/tmp/offset LD_PRELOAD=./timeshift.so redis-server ...
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_ns = 0;
static long long next_read_ns = 0;

static int raw_clock(clockid_t id, struct timespec *ts) { return syscall(SYS_clock_gettime, id, ts); }

static void refresh(void) {
  struct timespec mono;
  if (raw_clock(CLOCK_MONOTONIC, &mono) != 0) return;
  long long now = (long long)mono.tv_sec * 1000000000LL + mono.tv_nsec;
  if (now < next_read_ns) return;
  next_read_ns = now + 5000000LL;
  const char *path = getenv("TIMESHIFT_FILE");
  if (path == NULL) return;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[64];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return;
  buf[n] = 0;
  /* "+2.5" / "-1.25" seconds, parsed by hand (strtod may allocate under some locales). */
  int i = 0, sign = 1;
  while (buf[i] == ' ') i++;
  if (buf[i] == '+') i++;
  else if (buf[i] == '-') { sign = -1; i++; }
  long long whole = 0, frac = 0, scale = 1000000000LL;
  while (buf[i] >= '0' && buf[i] <= '9') whole = whole * 10 + (buf[i++] - '0');
  if (buf[i] == '.') {
    i++;
    while (buf[i] >= '0' && buf[i] <= '9' && scale > 1) { scale /= 10; frac += (buf[i++] - '0') * scale; }
  }
  offset_ns = sign * (whole * 1000000000LL + frac);
}

static void shift(struct timespec *ts) {
  long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_ns;
  ts->tv_sec = t / 1000000000LL;
  ts->tv_nsec = t % 1000000000LL;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  int rc = raw_clock(id, ts);
  if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
    refresh();
    shift(ts);
  }
  return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
  (void)tz;
  struct timespec ts;
  if (raw_clock(CLOCK_REALTIME, &ts) != 0) return -1;
  refresh();
  shift(&ts);
  if (tv != NULL) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return 0;
}

time_t time(time_t *out) {
  struct timespec ts;
  raw_clock(CLOCK_REALTIME, &ts);
  refresh();
  shift(&ts);
  if (out != NULL) *out = ts.tv_sec;
  return ts.tv_sec;
}
