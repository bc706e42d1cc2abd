/* A full disk for one folder, without mounting anything (see tests/disks.py).
 *
 * Loaded into a process with LD_PRELOAD. While the file named by CELLD_FULL_DISK_FLAG
 * exists, writes to regular files under the folder CELLD_FULL_DISK_DIR that need new
 * space fail with ENOSPC, as they do on a full disk. Which writes need space depends on
 * the file system, and the flag's size says which kind is full:
 *
 * - empty: one that overwrites in place (ext4, xfs, tmpfs): a write that extends the
 *   file (past its current size, or appending), and fallocate of a range past it;
 *   writes inside what a file already has succeed (the disk has the blocks for them);
 * - not empty: a copy-on-write one (btrfs, ZFS), where every write needs new blocks.
 *
 * Reads, renames, unlinks, truncation and fsync go through either way, and everything
 * else in the process (sockets, pipes, files elsewhere) is untouched.
 *
 * The calls wrapped are the ones through which a write reaches the kernel from SQLite's
 * unix VFS and from Python's file objects: write, pwrite(64), writev, pwritev(64),
 * fallocate(64), posix_fallocate(64).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static const char *folder;
static size_t folder_length;
static const char *flag;

__attribute__((constructor)) static void full_disk_init(void) {
    folder = getenv("CELLD_FULL_DISK_DIR");
    flag = getenv("CELLD_FULL_DISK_FLAG");
    if (folder != NULL) {
        folder_length = strlen(folder);
        while (folder_length > 1 && folder[folder_length - 1] == '/') folder_length--;
    }
}

static void *real(const char *name) {
    void *found = dlsym(RTLD_NEXT, name);
    if (found == NULL) {
        fprintf(stderr, "full_disk.so: no %s to wrap\n", name);
        abort();
    }
    return found;
}

enum { ROOM = 0, FULL_IN_PLACE = 1, FULL_COPY_ON_WRITE = 2 };

/* Whether the disk is full and `fd` a regular file under the folder, and how full (see
 * above); `size` gets the file's size. Leaves errno as it found it. */
static int full_for(int fd, off_t *size) {
    if (folder == NULL || flag == NULL) return ROOM;
    int saved = errno;
    int full = ROOM;
    struct stat switched;
    if (stat(flag, &switched) == 0) {
        char link[64];
        char path[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        struct stat st;
        if (n > 0 && (size_t)n >= folder_length) {
            path[n] = '\0';
            if (strncmp(path, folder, folder_length) == 0
                && (path[folder_length] == '/' || path[folder_length] == '\0')
                && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
                full = switched.st_size > 0 ? FULL_COPY_ON_WRITE : FULL_IN_PLACE;
                *size = st.st_size;
            }
        }
    }
    errno = saved;
    return full;
}

/* Whether a write of `count` bytes at `offset` (-1: the file position) needs space. */
static int needs_space(int fd, off_t offset, size_t count) {
    off_t size;
    int full = count == 0 ? ROOM : full_for(fd, &size);
    if (full != FULL_IN_PLACE) return full == FULL_COPY_ON_WRITE;
    int saved = errno;
    if (offset < 0) {
        int flags = fcntl(fd, F_GETFL);
        offset = (flags >= 0 && (flags & O_APPEND)) ? size : lseek(fd, 0, SEEK_CUR);
    }
    errno = saved;
    return offset < 0 || (off_t)(offset + count) > size;
}

static size_t total(const struct iovec *iov, int iovcnt) {
    size_t sum = 0;
    for (int i = 0; i < iovcnt; i++) sum += iov[i].iov_len;
    return sum;
}

#define NO_SPACE(result) \
    do {                 \
        errno = ENOSPC;  \
        return (result); \
    } while (0)

ssize_t write(int fd, const void *buffer, size_t count) {
    static ssize_t (*next)(int, const void *, size_t);
    if (next == NULL) next = real("write");
    if (needs_space(fd, -1, count)) NO_SPACE(-1);
    return next(fd, buffer, count);
}

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    static ssize_t (*next)(int, const void *, size_t, off_t);
    if (next == NULL) next = real("pwrite");
    if (needs_space(fd, offset, count)) NO_SPACE(-1);
    return next(fd, buffer, count, offset);
}

ssize_t pwrite64(int fd, const void *buffer, size_t count, off64_t offset) {
    static ssize_t (*next)(int, const void *, size_t, off64_t);
    if (next == NULL) next = real("pwrite64");
    if (needs_space(fd, offset, count)) NO_SPACE(-1);
    return next(fd, buffer, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    static ssize_t (*next)(int, const struct iovec *, int);
    if (next == NULL) next = real("writev");
    if (needs_space(fd, -1, total(iov, iovcnt))) NO_SPACE(-1);
    return next(fd, iov, iovcnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    static ssize_t (*next)(int, const struct iovec *, int, off_t);
    if (next == NULL) next = real("pwritev");
    if (needs_space(fd, offset, total(iov, iovcnt))) NO_SPACE(-1);
    return next(fd, iov, iovcnt, offset);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off64_t offset) {
    static ssize_t (*next)(int, const struct iovec *, int, off64_t);
    if (next == NULL) next = real("pwritev64");
    if (needs_space(fd, offset, total(iov, iovcnt))) NO_SPACE(-1);
    return next(fd, iov, iovcnt, offset);
}

int fallocate(int fd, int mode, off_t offset, off_t length) {
    static int (*next)(int, int, off_t, off_t);
    if (next == NULL) next = real("fallocate");
    if (length > 0 && needs_space(fd, offset, (size_t)length)) NO_SPACE(-1);
    return next(fd, mode, offset, length);
}

int fallocate64(int fd, int mode, off64_t offset, off64_t length) {
    static int (*next)(int, int, off64_t, off64_t);
    if (next == NULL) next = real("fallocate64");
    if (length > 0 && needs_space(fd, offset, (size_t)length)) NO_SPACE(-1);
    return next(fd, mode, offset, length);
}

/* (posix_fallocate reports its error as the result, not in errno) */
int posix_fallocate(int fd, off_t offset, off_t length) {
    static int (*next)(int, off_t, off_t);
    if (next == NULL) next = real("posix_fallocate");
    if (length > 0 && needs_space(fd, offset, (size_t)length)) return ENOSPC;
    return next(fd, offset, length);
}

int posix_fallocate64(int fd, off64_t offset, off64_t length) {
    static int (*next)(int, off64_t, off64_t);
    if (next == NULL) next = real("posix_fallocate64");
    if (length > 0 && needs_space(fd, offset, (size_t)length)) return ENOSPC;
    return next(fd, offset, length);
}
