/* Replay driver: a main() for a harness built without libFuzzer (any
 * compiler). Every regular file of the directories named on the command
 * line (files may be named too) goes once through LLVMFuzzerTestOneInput,
 * in name order, from a heap buffer of exactly its size so that an
 * overread is caught by AddressSanitizer as under libFuzzer. Prints the
 * count; a crash or a broken invariant aborts. A directory that cannot be
 * read, or no input at all, is an error (exit 2): the corpus path is wrong. */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
        fprintf(stderr, "replay: %s: cannot stat\n", path);
        fclose(f);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf || fread(buf, 1, size, f) != size) {
        fprintf(stderr, "replay: %s: cannot read\n", path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    printf("replay: %s (%zu bytes)\n", path, size);
    fflush(stdout);
    LLVMFuzzerTestOneInput(buf, size);
    free(buf);
    return 0;
}

static int skip_entry(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

int main(int argc, char **argv)
{
    size_t n = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) != 0)
                return 2;
            n++;
            continue;
        }
        struct dirent **ents;
        int k = scandir(argv[i], &ents, skip_entry, alphasort);
        if (k < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 2;
        }
        int rc = 0;
        for (int j = 0; j < k; j++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], ents[j]->d_name);
            if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                rc = run_file(path);
                n++;
            }
            free(ents[j]);
        }
        free(ents);
        if (rc != 0)
            return 2;
    }
    printf("replay: %zu inputs, no crash\n", n);
    if (n == 0) {
        fprintf(stderr, "replay: no inputs (give corpus directories)\n");
        return 2;
    }
    return 0;
}
