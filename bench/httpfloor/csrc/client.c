/* client.c: one HTTP/1.1 keep-alive connection, one request at a time, like a
   perf_analyzer client at concurrency 1. Usage: client PORT REQUESTS REQUEST_FILE, the
   file holding the whole request (head and body), sent as is each time. Prints the p50
   and p90 round trip in microseconds after 50 untimed requests, the last response's
   body size, and the p50 of each round trip less the server's own time for it — its
   Server-Timing header's "infer;dur=MS" — or -1 when a response had none. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* roundtrip sends req and reads one whole response; 0 on success. *infer_us is the
   response's Server-Timing infer duration, -1 without one. */
static int roundtrip(int fd, const char *req, int len, char *buf, int cap, int *body, double *infer_us) {
  if (send(fd, req, len, 0) != len) return -1;
  int got = 0, need = -1;
  while (need < 0 || got < need) {
    int r = recv(fd, buf + got, cap - got, 0);
    if (r <= 0) return -1;
    got += r;
    if (need < 0) {
      char *end = memmem(buf, got, "\r\n\r\n", 4);
      if (!end) continue;
      *end = 0;
      char *cl = strcasestr(buf, "Content-Length:");
      if (!cl) return -1;
      if (strncmp(buf, "HTTP/1.1 200", 12) != 0) { fprintf(stderr, "client: %.200s\n", buf); return -1; }
      *body = atoi(cl + 15);
      char *st = strcasestr(buf, "\r\nServer-Timing:"), *dur = st ? strstr(st, "infer;dur=") : 0;
      *infer_us = dur ? atof(dur + 10) * 1e3 : -1;
      need = (int)(end + 4 - buf) + *body;
      if (need > cap) return -1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: client PORT REQUESTS REQUEST_FILE\n"); return 2; }
  int port = atoi(argv[1]), n = atoi(argv[2]), body = 0;
  FILE *f = fopen(argv[3], "rb");
  if (!f) { perror("client: request file"); return 1; }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  rewind(f);
  char *req = malloc(len > 0 ? len : 1);
  if (len <= 0 || fread(req, 1, len, f) != (size_t)len) { fprintf(stderr, "client: cannot read the request\n"); return 1; }
  fclose(f);
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
  if (connect(fd, (void *)&a, sizeof a) != 0) { perror("client: connect"); return 1; }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int cap = 1 << 24;
  char *buf = malloc(cap);
  double *ts = malloc(n * sizeof *ts), *over = malloc(n * sizeof *over), infer;
  int timed = 1;
  for (int i = 0; i < 50; i++)
    if (roundtrip(fd, req, (int)len, buf, cap, &body, &infer)) { fprintf(stderr, "client: bad response\n"); return 1; }
  for (int i = 0; i < n; i++) {
    double t = now_us();
    if (roundtrip(fd, req, (int)len, buf, cap, &body, &infer)) { fprintf(stderr, "client: bad response\n"); return 1; }
    ts[i] = now_us() - t;
    over[i] = ts[i] - infer;
    timed = timed && infer >= 0;
  }
  qsort(ts, n, sizeof *ts, cmp);
  qsort(over, n, sizeof *over, cmp);
  printf("%.1f %.1f %d %.1f\n", ts[n / 2], ts[n * 9 / 10], body, timed ? over[n / 2] : -1.0);
  return 0;
}
