/* The real Fashion-MNIST files (Debian package dataset-fashion-mnist) load
 * through the data layer: shapes, classes, per-class counts, the limit, and
 * the time and memory it takes. Skipped (exit 77) when they are absent. */
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "check.h"
#include "data/data.h"

#ifndef FASHION_DIR
#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#endif

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void check_set(const char *name, size_t n, const strata__dataset_t *d)
{
    CHECKF(d->n == n, "%s: n %zu", name, d->n);
    CHECK(d->rows == 28 && d->cols == 28 && d->dim == 784);
    CHECK(d->nclasses == 10);
    /* Fashion-MNIST is balanced: n / 10 of every class. */
    size_t count[10] = { 0 };
    for (size_t i = 0; i < d->n; i++)
        count[d->labels[i] < 10 ? d->labels[i] : 0]++;
    for (int c = 0; c < 10; c++)
        CHECKF(count[c] == n / 10, "%s: class %d has %zu", name, c, count[c]);
    /* Pixels span 0..255 and are not all equal. */
    uint8_t lo = 255, hi = 0;
    for (size_t i = 0; i < d->dim * 100; i++) {
        lo = d->images[i] < lo ? d->images[i] : lo;
        hi = d->images[i] > hi ? d->images[i] : hi;
    }
    CHECK(lo == 0 && hi == 255);
}

int main(void)
{
    static const char *const files[4] = {
        FASHION_DIR "/train-images-idx3-ubyte.gz",
        FASHION_DIR "/train-labels-idx1-ubyte.gz",
        FASHION_DIR "/t10k-images-idx3-ubyte.gz",
        FASHION_DIR "/t10k-labels-idx1-ubyte.gz" };
    struct stat st;
    for (int i = 0; i < 4; i++)
        if (stat(files[i], &st) != 0)
            CHECK_SKIP("%s not found (install dataset-fashion-mnist)",
                       files[i]);

    strata__dataset_t train, test, small;
    double t0 = now();
    CHECK(strata__dataset_load(files[0], files[1], 0, &train) == 0);
    double t1 = now();
    CHECK(strata__dataset_load(files[2], files[3], 0, &test) == 0);
    double t2 = now();
    printf("fashion-mnist: train %zu x %ux%u in %.3f s, test %zu in %.3f s\n",
           train.n, train.rows, train.cols, t1 - t0, test.n, t2 - t1);
    if (train.n == 60000)
        check_set("train", 60000, &train);
    if (test.n == 10000)
        check_set("test", 10000, &test);

    /* A limited load holds the same first samples. */
    CHECK(strata__dataset_load(files[0], files[1], 1000, &small) == 0);
    CHECK(small.n == 1000 && small.nclasses == 10);
    if (small.n == 1000 && train.n == 60000) {
        CHECK(memcmp(small.images, train.images, 1000 * 784) == 0);
        CHECK(memcmp(small.labels, train.labels, 1000 * sizeof *train.labels) == 0);
    }

    /* One shuffled epoch as batches of 128, end to end. */
    if (train.n == 60000) {
        static uint32_t perm[60000];
        static float x[128 * 784];
        int32_t y[128];
        double sum = 0;
        strata__epoch_order(perm, train.n, 1, 0, 1);
        for (size_t first = 0; first < train.n; first += 128) {
            size_t m = train.n - first < 128 ? train.n - first : 128;
            strata__batch_fill(&train, perm, first, m, x, y);
            sum += x[0] + y[0];
        }
        CHECK(sum > 0);
    }

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak RSS %.1f MiB\n", ru.ru_maxrss / 1024.0);
#ifndef SANITIZED
    CHECKF(ru.ru_maxrss < 150 * 1024, "peak RSS %ld KiB", ru.ru_maxrss);
#endif

    strata__dataset_free(&train);
    strata__dataset_free(&test);
    strata__dataset_free(&small);
    return CHECK_DONE();
}
