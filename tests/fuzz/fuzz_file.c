/* fuzz_as_file: one memfd per process, rewritten for every input. The
 * readers open "/proc/self/fd/N" themselves, as they would a path: a new
 * open file description at offset 0, a regular file that fstat sizes. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

static void die(const char *what)
{
    fprintf(stderr, "fuzz: %s: %s\n", what, strerror(errno));
    abort();
}

const char *fuzz_as_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("strata-fuzz-input", MFD_CLOEXEC);
        if (fd < 0)
            die("memfd_create");
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0)
        die("ftruncate");
    for (size_t off = 0; off < size;) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("pwrite");
        off += (size_t)w;
    }
    return path;
}
