/* utimensat(2) with exactly the times asked, for the kernel-client battery (busybox's
 * touch cannot send UTIME_NOW for one time and an explicit value or UTIME_OMIT for the
 * other, nor say which it sent).
 *   utimes FILE ATIME MTIME   each time: `now` (UTIME_NOW), `omit` (UTIME_OMIT) or
 *                             seconds since the epoch (64-bit); exit 0, or 1 with the error
 * Built statically at test time (tests/support/kvm.rs). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int parse(const char *s, struct timespec *t) {
	char *end;
	if (strcmp(s, "now") == 0) {
		t->tv_sec = 0;
		t->tv_nsec = UTIME_NOW;
		return 0;
	}
	if (strcmp(s, "omit") == 0) {
		t->tv_sec = 0;
		t->tv_nsec = UTIME_OMIT;
		return 0;
	}
	errno = 0;
	t->tv_sec = (time_t)strtoll(s, &end, 10);
	t->tv_nsec = 0;
	return errno != 0 || *end != '\0' ? -1 : 0;
}

int main(int argc, char **argv) {
	struct timespec ts[2];
	if (argc != 4 || parse(argv[2], &ts[0]) != 0 || parse(argv[3], &ts[1]) != 0) {
		fprintf(stderr, "usage: utimes FILE now|omit|SECS now|omit|SECS\n");
		return 2;
	}
	if (utimensat(AT_FDCWD, argv[1], ts, 0) != 0) {
		fprintf(stderr, "utimensat %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	return 0;
}
