/*
 * netprobe: one network operation per invocation, for the offline-sandbox
 * tests. Prints "ok" or "err=ERRNAME" and exits 0. Static, no resolver
 * libraries: DNS is tried as a raw UDP query to the given server.
 *
 *   netprobe tcp IP PORT     connect(2) over TCP
 *   netprobe dns IP          send a DNS query for example.com to IP:53 and
 *                            wait 2 s for any answer
 *   netprobe ifaces          list interface names from /proc/net/dev
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int fail(void) {
	const char *n = strerrorname_np(errno);
	printf("err=%s\n", n ? n : "?");
	return 0;
}

int main(int argc, char **argv) {
	if (argc < 2) return 2;
	if (!strcmp(argv[1], "tcp") && argc == 4) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
		inet_pton(AF_INET, argv[2], &a.sin_addr);
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0) return fail();
		struct timeval tv = {.tv_sec = 3};
		setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) return fail();
		printf("ok\n");
		return 0;
	}
	if (!strcmp(argv[1], "dns") && argc == 3) {
		static const unsigned char q[] = {0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
			7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1};
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
		inet_pton(AF_INET, argv[2], &a.sin_addr);
		int s = socket(AF_INET, SOCK_DGRAM, 0);
		if (s < 0) return fail();
		if (sendto(s, q, sizeof q, 0, (struct sockaddr *)&a, sizeof a) < 0) return fail();
		struct timeval tv = {.tv_sec = 2};
		setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		char buf[512];
		if (recv(s, buf, sizeof buf, 0) < 0) return fail();
		printf("ok\n");
		return 0;
	}
	if (!strcmp(argv[1], "ifaces")) {
		FILE *f = fopen("/proc/net/dev", "r");
		if (!f) return fail();
		char line[512];
		int n = 0;
		while (fgets(line, sizeof line, f)) {
			if (++n <= 2) continue;
			char *c = strchr(line, ':');
			if (!c) continue;
			*c = 0;
			char *p = line;
			while (*p == ' ') p++;
			printf("%s\n", p);
		}
		return 0;
	}
	return 2;
}
