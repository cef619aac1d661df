/*
 * probe: one system call per invocation, for the confine tests.
 * It prints "ok" (with a value where useful) or "err=ERRNAME" on one line
 * and exits 0; a call the seccomp filter kills never prints.
 * Built static with gcc at test time, so it needs no loader or libraries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int report(long r) {
	if (r < 0) {
		const char *name = strerrorname_np(errno);
		printf("err=%s\n", name ? name : "?");
	} else {
		printf("ok %ld\n", r);
	}
	return 0;
}

/* A raw clone that returns in the child as well: the child exits at once. */
static long raw_clone(unsigned long flags) {
	long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid(r, 0, 0);
	return r;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: probe CALL [ARGS]\n");
		return 2;
	}
	const char *c = argv[1];
	const char *a = argc > 2 ? argv[2] : "";

	if (!strcmp(c, "write")) {
		int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			return report(-1);
		return report(write(fd, "x", 1));
	}
	if (!strcmp(c, "read")) {
		char b[16];
		int fd = open(a, O_RDONLY);
		if (fd < 0)
			return report(-1);
		return report(read(fd, b, sizeof b));
	}
	if (!strcmp(c, "truncate"))
		return report(truncate(a, 0));
	if (!strcmp(c, "exec")) {
		execv(a, argv + 2);
		return report(-1);
	}
	if (!strcmp(c, "status")) {
		/* The lines of /proc/self/status that say what confinement holds. */
		FILE *f = fopen("/proc/self/status", "r");
		char line[256];
		if (!f)
			return report(-1);
		while (fgets(line, sizeof line, f))
			if (!strncmp(line, "NoNewPrivs:", 11) || !strncmp(line, "Seccomp:", 8) ||
			    !strncmp(line, "CapBnd:", 7))
				fputs(line, stdout);
		return 0;
	}
	if (!strcmp(c, "io_uring_setup")) {
		char params[120] = {0};
		return report(syscall(SYS_io_uring_setup, 4, params));
	}
	if (!strcmp(c, "ptrace"))
		return report(ptrace(PTRACE_ATTACH, atoi(a), 0, 0));
	if (!strcmp(c, "int80")) {
		/* getpid through the 32-bit entry: eax=20. */
		long r;
		__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
		if (r < 0) {
			errno = -r;
			return report(-1);
		}
		return report(r);
	}
	if (!strcmp(c, "x32"))
		return report(syscall(0x40000000 | SYS_getpid));
	if (!strcmp(c, "unshare_user"))
		return report(unshare(CLONE_NEWUSER));
	if (!strcmp(c, "clone_newns"))
		return report(raw_clone(CLONE_NEWNS));
	if (!strcmp(c, "clone_plain"))
		return report(raw_clone(0) > 0 ? 0 : -1);
	if (!strcmp(c, "clone3")) {
		struct clone_args ca;
		memset(&ca, 0, sizeof ca);
		ca.exit_signal = SIGCHLD;
		long r = syscall(SYS_clone3, &ca, sizeof ca);
		if (r == 0)
			_exit(0);
		if (r > 0)
			waitpid(r, 0, 0);
		return report(r > 0 ? 0 : r);
	}
	if (!strcmp(c, "mount"))
		return report(mount("none", a, "tmpfs", 0, 0));
	if (!strcmp(c, "bpf")) {
		char attr[128] = {0};
		return report(syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, attr, sizeof attr));
	}
	if (!strcmp(c, "personality"))
		return report(personality(strtoul(a, 0, 0)));
	if (!strcmp(c, "nofile")) {
		int n = atoi(a);
		for (int i = 0; i < n; i++)
			if (open("/dev/null", O_RDONLY) < 0)
				return report(-1);
		return report(n);
	}
	if (!strcmp(c, "fsize")) {
		/* Write argv[3] bytes to argv[2] with SIGXFSZ ignored, in pieces:
		 * the write that crosses the limit is cut short, the next fails. */
		static char buf[512];
		signal(SIGXFSZ, SIG_IGN);
		int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			return report(-1);
		long want = argc > 3 ? atol(argv[3]) : 0, done = 0;
		while (done < want) {
			long n = write(fd, buf, want - done < (long)sizeof buf ? want - done : (long)sizeof buf);
			if (n < 0)
				return report(-1);
			done += n;
		}
		return report(done);
	}
	if (!strcmp(c, "socket") || !strcmp(c, "socketpair")) {
		/* Raw arguments, upper bits included: socket DOMAIN TYPE PROTOCOL. */
		unsigned long d = strtoul(a, 0, 0);
		unsigned long ty = argc > 3 ? strtoul(argv[3], 0, 0) : SOCK_STREAM;
		unsigned long pr = argc > 4 ? strtoul(argv[4], 0, 0) : 0;
		if (!strcmp(c, "socket"))
			return report(syscall(SYS_socket, d, ty, pr) < 0 ? -1 : 0);
		int sv[2];
		return report(syscall(SYS_socketpair, d, ty, pr, sv) < 0 ? -1 : 0);
	}
	if (!strcmp(c, "families")) {
		/* One line per address family 0-63, "af N ok" when any socket
		 * type opens, else "af N err=E[,E...]" with each distinct errno;
		 * then one per netlink protocol 0-31, "nl N ...", the same way. */
		static const int types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET, SOCK_RAW};
		static const int nltypes[] = {SOCK_RAW, SOCK_DGRAM};
		for (int pass = 0; pass < 2; pass++) {
			int n = pass ? 32 : 64;
			const int *ts = pass ? nltypes : types;
			int nts = pass ? 2 : 4;
			for (int v = 0; v < n; v++) {
				char errs[128] = "";
				int ok = 0;
				for (int i = 0; i < nts && !ok; i++) {
					int fd = pass ? socket(AF_NETLINK, ts[i], v) : socket(v, ts[i], 0);
					if (fd >= 0) {
						close(fd);
						ok = 1;
						break;
					}
					const char *e = strerrorname_np(errno);
					if (!e)
						e = "?";
					if (!strstr(errs, e)) {
						if (errs[0])
							strcat(errs, ",");
						strcat(errs, e);
					}
				}
				printf("%s %d %s%s\n", pass ? "nl" : "af", v, ok ? "ok" : "err=", ok ? "" : errs);
			}
		}
		return 0;
	}
	fprintf(stderr, "probe: unknown call %s\n", c);
	return 2;
}
