/* The TCP communicator's parts (runners/comm_tcp.c: the communicator,
 * its frames and exchanges; runners/comm_tcp_meet.c: the rendezvous and
 * the handshakes): its state, the wire's constants and small helpers.
 * Internal to those two files. */
#ifndef LIBPLAN_RUNNERS_COMM_TCP_INT_H
#define LIBPLAN_RUNNERS_COMM_TCP_INT_H

#include "comm.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "libplan/plan.h"
#include "base/util.h"

#define HELLO_MAGIC 0x504c4e43u /* "PLNC" */
#define HELLO_VERSION 2u
#define HELLO_BYTES 20
#define ACK_MAGIC 0x504c4e41u /* "PLNA" */
#define ACK_BYTES 8
/* Seconds one handshake may take, connect included (less when the
 * rendezvous has less left). */
#define HANDSHAKE_S 2.0
#define FRAME_MAGIC 0x504c4e4du /* "PLNM" */
#define FRAME_BYTES 28
#define ADDR_MAX 256
/* One send or recv call moves at most this much. */
#define IO_CHUNK ((size_t)1 << 30)

typedef struct tcp_comm {
  plan_comm base;
  int *fds; /* per global rank; -1 for this rank */
  int listen_fd;
  int port;
  double timeout_s;
  uint64_t calls; /* exchange calls made, this one included */
  char *folder;   /* NULL when world is 1 */
  char *own;      /* this rank's rendezvous file */
  char addr[ADDR_MAX];
} tcp_comm;

/* ---- small helpers ------------------------------------------------------- */

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Milliseconds left until the deadline, for poll (0 when past it). */
static inline int ms_left(double deadline) {
  double left = (deadline - now_s()) * 1e3;
  if (left <= 0)
    return 0;
  if (left > (double)INT_MAX)
    return INT_MAX;
  return (int)ceil(left);
}

static inline void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static inline void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static inline uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}

static inline void put64(unsigned char *p, uint64_t v) {
  put32(p, (uint32_t)(v >> 32));
  put32(p + 4, (uint32_t)v);
}

static inline uint64_t get64(const unsigned char *p) {
  return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* The rendezvous of rank t->base.rank in folder `rendezvous`, before the
 * deadline: the folder made, this rank's address file written (t->own),
 * a connection to every other rank in t->fds, each checked by a
 * handshake; t->listen_fd closed once every pair is connected. */
int plan_tcp_meet(tcp_comm *t, const char *rendezvous, double deadline,
                  char *err, size_t errsz);

#endif
