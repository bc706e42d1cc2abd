/*
 * slowdisk: an LD_PRELOAD shim that makes a process's commits slow, as on a slow
 * disk, without privileges and without a knob in celld.
 *
 * For files under the folder $CELLD_SLOWDISK_UNDER (an absolute path without symbolic
 * links; sockets, pipes and every other file are untouched):
 *
 * - the first write()/pwrite()/pwrite64() to a descriptor after it was opened or last
 *   flushed sleeps $CELLD_SLOWDISK_WRITE_MS milliseconds before it writes: a commit's
 *   data reaches the file only that long after the commit began. This is the delay
 *   that matters to a test that SIGKILLs the process: what was written before the kill
 *   is in the kernel's page cache and survives it, flushed or not, so a commit is lost
 *   to a kill only while its data has not been written yet;
 * - every fsync(), fdatasync() and sync_file_range() sleeps $CELLD_SLOWDISK_SYNC_MS
 *   milliseconds before it flushes (a slow disk as a power loss would see it).
 *
 * SQLite's unix VFS calls these libc functions through the dynamic linker, so a commit
 * of a store under the folder waits for them: in WAL mode a commit is a run of pwrites
 * to the -wal file and, with synchronous=FULL, one flush of it, so each commit waits
 * WRITE_MS + SYNC_MS. (A commit is told from the next by the flush between them: with
 * synchronous=NORMAL, which does not flush every commit, only the first write of each
 * flush interval would wait.)
 *
 * Each slowed call adds one to a counter that the process writes to
 * $CELLD_SLOWDISK_COUNT_FILE (when set) as it goes, so a test can check that the shim
 * really was in the path of the commits.
 *
 * Built by tests/slowdisk/__init__.py (gcc -shared -fPIC ... -ldl).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static const char *under = NULL;
static size_t under_len = 0;
static long sync_ms = 0;
static long write_ms = 0;
static const char *count_file = NULL;
static unsigned long slowed = 0;

/* Descriptors written since they were opened or last flushed (the next write of the
 * others is the first of a commit). Beyond the table, every write counts as first. */
#define TRACKED_FDS 4096
static unsigned char written[TRACKED_FDS];

static int (*real_fsync)(int) = NULL;
static int (*real_fdatasync)(int) = NULL;
static int (*real_sync_file_range)(int, off_t, off_t, unsigned int) = NULL;
static ssize_t (*real_write)(int, const void *, size_t) = NULL;
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t) = NULL;
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t) = NULL;

__attribute__((constructor)) static void slowdisk_init(void) {
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_sync_file_range = dlsym(RTLD_NEXT, "sync_file_range");
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    under = getenv("CELLD_SLOWDISK_UNDER");
    under_len = under ? strlen(under) : 0;
    const char *value = getenv("CELLD_SLOWDISK_SYNC_MS");
    sync_ms = value ? atol(value) : 0;
    value = getenv("CELLD_SLOWDISK_WRITE_MS");
    write_ms = value ? atol(value) : 0;
    count_file = getenv("CELLD_SLOWDISK_COUNT_FILE");
}

/* Is `fd` a file under the slowed folder? (readlink of /proc/self/fd: no allocation) */
static int under_folder(int fd) {
    if (under_len == 0)
        return 0;
    char link[64];
    char path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < (ssize_t)under_len || memcmp(path, under, under_len) != 0)
        return 0;
    return n == (ssize_t)under_len || path[under_len] == '/'; /* not a sibling "<under>x" */
}

static void record(void) {
    unsigned long n = __atomic_add_fetch(&slowed, 1, __ATOMIC_RELAXED);
    if (count_file == NULL || real_write == NULL)
        return;
    int fd = open(count_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char text[32];
    int len = snprintf(text, sizeof text, "%lu\n", n);
    real_write(fd, text, (size_t)len);
    close(fd);
}

static void pause_ms(long ms) {
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
}

static void slow(int fd, long ms) {
    int saved = errno;
    pause_ms(ms);
    record();
    errno = saved;
}

/* A flush of `fd`: slowed by SYNC_MS; its next write is the first of the next commit. */
static void flushing(int fd) {
    if (fd >= 0 && fd < TRACKED_FDS)
        __atomic_store_n(&written[fd], 0, __ATOMIC_RELAXED);
    if (sync_ms > 0 && under_folder(fd))
        slow(fd, sync_ms);
}

/* A write to `fd`: slowed by WRITE_MS when it is the first since the last flush. */
static void writing(int fd) {
    if (write_ms <= 0 || fd < 0)
        return;
    if (fd < TRACKED_FDS && __atomic_exchange_n(&written[fd], 1, __ATOMIC_RELAXED))
        return;
    if (under_folder(fd))
        slow(fd, write_ms);
}

int fsync(int fd) {
    flushing(fd);
    return real_fsync(fd);
}

int fdatasync(int fd) {
    flushing(fd);
    return real_fdatasync(fd);
}

int sync_file_range(int fd, off_t offset, off_t nbytes, unsigned int flags) {
    flushing(fd);
    return real_sync_file_range(fd, offset, nbytes, flags);
}

int close(int fd) {
    static int (*real_close)(int) = NULL;
    if (real_close == NULL)
        real_close = dlsym(RTLD_NEXT, "close");
    if (fd >= 0 && fd < TRACKED_FDS)
        __atomic_store_n(&written[fd], 0, __ATOMIC_RELAXED); /* a new file may get it */
    return real_close(fd);
}

ssize_t write(int fd, const void *buf, size_t count) {
    writing(fd);
    return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    writing(fd);
    return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    writing(fd);
    return real_pwrite64(fd, buf, count, offset);
}
