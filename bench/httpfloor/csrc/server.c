/* server.c: the C baseline, no Go runtime. One connection; for each request it reads
   the headers and Content-Length bytes of body, runs kiln_floor_compute and answers
   with one send. Usage: server PORT COMPUTE_US RESPONSE_BYTES FOOTPRINT_BYTES (compute.c linked in). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int kiln_floor_compute(long long us, long long bytes, long long fixed);

int main(int argc, char **argv) {
  if (argc != 6) { fprintf(stderr, "usage: server PORT COMPUTE_US RESPONSE_BYTES FOOTPRINT_BYTES FIXED_WORK\n"); return 2; }
  int port = atoi(argv[1]), body = atoi(argv[3]);
  long long us = atoll(argv[2]), footprint = atoll(argv[4]), fixed = atoll(argv[5]);
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
  if (bind(ls, (void *)&a, sizeof a) != 0 || listen(ls, 8) != 0) { perror("server: listen"); return 1; }
  char *resp = calloc(1, body + 256);
  int rlen = sprintf(resp, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", body) + body;
  int cap = 1 << 20;
  char *buf = malloc(cap + 1);
  for (;;) {
    int fd = accept(ls, 0, 0);
    if (fd < 0) return 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int got = 0;
    for (;;) {
      char *end;
      while (!(end = memmem(buf, got, "\r\n\r\n", 4))) {
        int r = recv(fd, buf + got, cap - got, 0);
        if (r <= 0) goto next;
        got += r;
      }
      *end = 0;
      char *cl = strcasestr(buf, "Content-Length:");
      int need = (int)(end + 4 - buf) + (cl ? atoi(cl + 15) : 0);
      if (need > cap) goto next;
      while (got < need) {
        int r = recv(fd, buf + got, cap - got, 0);
        if (r <= 0) goto next;
        got += r;
      }
      if (kiln_floor_compute(us, footprint, fixed) != 0 || send(fd, resp, rlen, 0) != rlen) goto next;
      memmove(buf, buf + need, got - need);
      got -= need;
    }
  next:
    close(fd);
  }
}
