/* fcntl(2) byte-range locks for the kernel-client battery (busybox has no tool that
 * takes one: its flock is flock(2), and the initramfs has nothing else).
 *   lockhold FILE SECS   wait for a write lock on the whole file (F_SETLKW), print
 *                        "locked", hold it SECS seconds, unlock; exit 0, or 2 on an error
 *   lockhold -n FILE     try once (F_SETLK): exit 0 if it was free (then unlock),
 *                        1 if another process holds it, 2 on an error
 * Built statically at test time (tests/support/kvm.rs). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int lock(int fd, int cmd, short type) {
	struct flock l;
	memset(&l, 0, sizeof l);
	l.l_type = type;
	l.l_whence = SEEK_SET;
	return fcntl(fd, cmd, &l);
}

int main(int argc, char **argv) {
	int try_only = argc == 3 && strcmp(argv[1], "-n") == 0;
	if (argc != 3) {
		fprintf(stderr, "usage: lockhold FILE SECS | lockhold -n FILE\n");
		return 2;
	}
	const char *path = try_only ? argv[2] : argv[1];
	int fd = open(path, O_RDWR);
	if (fd < 0) {
		perror("open");
		return 2;
	}
	if (lock(fd, try_only ? F_SETLK : F_SETLKW, F_WRLCK) < 0) {
		if (try_only && (errno == EAGAIN || errno == EACCES))
			return 1;
		perror("fcntl");
		return 2;
	}
	if (!try_only) {
		/* Tells the battery the lock is held (it waits for this line). */
		printf("locked\n");
		fflush(stdout);
		sleep((unsigned)atoi(argv[2]));
	}
	if (lock(fd, F_SETLK, F_UNLCK) < 0) {
		perror("unlock");
		return 2;
	}
	return 0;
}
