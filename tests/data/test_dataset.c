/* core/data/dataset.c: epoch order, loading an (images, labels) pair with
 * its checks and limit, and filling batches. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "data/data.h"
#include "data_util.h"

static int is_perm(const uint32_t *p, size_t n)
{
    unsigned char *seen = calloc(n ? n : 1, 1);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        ok = p[i] < n && !seen[p[i]];
        if (ok)
            seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_epoch_order(void)
{
    enum { N = 1000 };
    static uint32_t a[N], b[N], c[N], d[N];
    strata__epoch_order(a, N, 42, 0, 1);
    strata__epoch_order(b, N, 42, 0, 1);
    strata__epoch_order(c, N, 42, 1, 1);
    strata__epoch_order(d, N, 43, 0, 1);
    CHECK(is_perm(a, N) && is_perm(c, N) && is_perm(d, N));
    CHECK(memcmp(a, b, sizeof a) == 0);      /* deterministic     */
    CHECK(memcmp(a, c, sizeof a) != 0);      /* epochs differ     */
    CHECK(memcmp(a, d, sizeof a) != 0);      /* seeds differ      */
    size_t fixed = 0;
    for (size_t i = 0; i < N; i++)
        fixed += a[i] == i;
    CHECKF(fixed < 10, "%zu fixed points", fixed);   /* ~1 expected */

    strata__epoch_order(a, N, 42, 5, 0);
    int ident = 1;
    for (size_t i = 0; i < N; i++)
        ident &= a[i] == i;
    CHECK(ident);

    uint32_t one[1] = { 99 };
    strata__epoch_order(one, 1, 1, 0, 1);
    CHECK(one[0] == 0);
    strata__epoch_order(NULL, 0, 1, 0, 1);   /* n = 0: touches nothing */

    /* Pinned order: (seed 42, epoch 0) must give this on every machine and
     * in every version, or a run's data order silently changes. */
    static const uint32_t golden[10] = { 2, 0, 7, 8, 4, 1, 9, 5, 6, 3 };
    uint32_t g[10];
    strata__epoch_order(g, 10, 42, 0, 1);
    CHECKF(memcmp(g, golden, sizeof g) == 0,
           "order %u %u %u %u %u %u %u %u %u %u", g[0], g[1], g[2], g[3],
           g[4], g[5], g[6], g[7], g[8], g[9]);

    /* Every position gets every sample about equally often over epochs
     * (Fisher-Yates with an unbiased below(): no favoured slot). */
    enum { M = 5, E = 20000 };
    long where[M][M] = { { 0 } };
    uint32_t p[M];
    for (uint64_t e = 0; e < E; e++) {
        strata__epoch_order(p, M, 7, e, 1);
        for (int i = 0; i < M; i++)
            where[i][p[i]]++;
    }
    int flat = 1;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < M; j++)
            flat &= where[i][j] > E / M * 9 / 10 && where[i][j] < E / M * 11 / 10;
    CHECK(flat);
}

/* 5 images of 2 x 3, labels {0, 3, 1, 2, 3}. */
static const uint32_t img_dims[3] = { 5, 2, 3 };
static const uint8_t img_px[30] = {
    0, 1, 2, 3, 4, 5,   10, 11, 12, 13, 14, 15,   20, 21, 22, 23, 24, 25,
    30, 31, 32, 33, 34, 255,   40, 41, 42, 43, 44, 128 };
static const uint32_t lab_dims[1] = { 5 };
static const uint8_t lab_v[5] = { 0, 3, 1, 2, 3 };

static void expect_load_fail_(int line, const char *img, const char *lab,
                              size_t limit, int rc, const char *word)
{
    strata__dataset_t d;
    memset(&d, 0x5A, sizeof d);
    capture_begin();
    int got = strata__dataset_load(img, lab, limit, &d);
    int lines = count_lines(capture_end());
    CHECKF(got == rc, "line %d: got %s, want %s", line, strata_err_name(got),
           strata_err_name(rc));
    CHECKF(lines == 1, "line %d: %d log lines: %s", line, lines, captured_);
    CHECKF(strstr(captured_, word) != NULL, "line %d: no '%s' in: %s", line,
           word, captured_);
    CHECK(d.images == NULL && d.labels == NULL && d.n == 0);
}
#define expect_load_fail(...) expect_load_fail_(__LINE__, __VA_ARGS__)

static void test_load(void)
{
    const char *img = tmp_path("img.gz"), *lab = tmp_path("lab.gz");
    write_idx(img, 3, img_dims, img_px, 1);
    write_idx(lab, 1, lab_dims, lab_v, 1);

    strata__dataset_t d;
    CHECK(strata__dataset_load(img, lab, 0, &d) == 0);
    CHECK(d.n == 5 && d.dim == 6 && d.rows == 2 && d.cols == 3);
    CHECK(d.nclasses == 4);
    CHECK(memcmp(d.images, img_px, 30) == 0);
    CHECK(memcmp(d.labels, lab_v, 5) == 0);

    /* Batches: a permuted slice, and perm == NULL for the natural order. */
    uint32_t perm[5] = { 4, 2, 0, 3, 1 };
    float x[3 * 6];
    int32_t y[3];
    strata__batch_fill(&d, perm, 1, 3, x, y);   /* samples 2, 0, 3 */
    CHECK(y[0] == 1 && y[1] == 0 && y[2] == 2);
    int ok = 1;
    static const int order[3] = { 2, 0, 3 };
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 6; k++)
            ok &= x[i * 6 + k] == img_px[order[i] * 6 + k] * (1.0f / 255.0f);
    CHECK(ok);
    CHECK(x[2 * 6 + 5] == 1.0f);     /* 255 -> 1 */
    CHECK(x[1 * 6 + 0] == 0.0f);
    strata__batch_fill(&d, NULL, 3, 2, x, y);   /* samples 3, 4 */
    CHECK(y[0] == 2 && y[1] == 3);
    CHECK(x[6 + 5] == 128 * (1.0f / 255.0f));
    strata__dataset_free(&d);
    CHECK(d.images == NULL && d.labels == NULL);
    strata__dataset_free(&d);
    strata__dataset_free(NULL);

    /* Limit: the first 2 samples only; nclasses still from all labels. */
    CHECK(strata__dataset_load(img, lab, 2, &d) == 0);
    CHECK(d.n == 2 && d.dim == 6 && d.nclasses == 4);
    CHECK(memcmp(d.images, img_px, 12) == 0);
    CHECK(d.labels[0] == 0 && d.labels[1] == 3);
    strata__dataset_free(&d);
    CHECK(strata__dataset_load(img, lab, 100, &d) == 0);
    CHECK(d.n == 5);
    strata__dataset_free(&d);

    /* 2-D images (n, dim), raw files. */
    static const uint32_t flat_dims[2] = { 5, 6 };
    const char *flat = tmp_path("flat");
    write_idx(flat, 2, flat_dims, img_px, 0);
    CHECK(strata__dataset_load(flat, lab, 0, &d) == 0);
    CHECK(d.n == 5 && d.dim == 6 && d.rows == 1 && d.cols == 6);
    strata__dataset_free(&d);

    /* Labels all 0: still 2 classes. */
    static const uint8_t zeros[5] = { 0 };
    const char *lab0 = tmp_path("lab0");
    write_idx(lab0, 1, lab_dims, zeros, 0);
    CHECK(strata__dataset_load(img, lab0, 0, &d) == 0);
    CHECK(d.nclasses == 2);
    strata__dataset_free(&d);

    /* Count mismatch: 5 images, 4 labels. */
    static const uint32_t four[1] = { 4 };
    const char *lab4 = tmp_path("lab4");
    write_idx(lab4, 1, four, lab_v, 0);
    expect_load_fail(img, lab4, 0, STRATA_EDATA, "holds 5 images but");
    expect_load_fail(img, lab4, 2, STRATA_EDATA, "4 labels");

    /* Label out of range, named by index. */
    static const uint8_t badv[5] = { 0, 1, 2, 10, 3 };
    const char *labbad = tmp_path("labbad");
    write_idx(labbad, 1, lab_dims, badv, 0);
    expect_load_fail(img, labbad, 0, STRATA_EDATA, "label 10 at index 3");
    expect_load_fail(img, labbad, 2, STRATA_EDATA, "index 3");

    /* Wrong shapes: labels 2-D, images 1-D. */
    static const uint32_t lab2d[2] = { 5, 1 };
    const char *labsq = tmp_path("lab2d");
    write_idx(labsq, 2, lab2d, lab_v, 0);
    expect_load_fail(img, labsq, 0, STRATA_EDATA, "expected 1 (n)");
    const char *img1 = tmp_path("img1d");
    write_idx(img1, 1, lab_dims, lab_v, 0);
    expect_load_fail(img1, lab, 0, STRATA_EDATA, "images file has 1 dim");

    /* Missing files: the one that is missing is named. */
    expect_load_fail(tmp_path("nope-images"), lab, 0, STRATA_ENOENT,
                     "nope-images");
    expect_load_fail(img, tmp_path("nope-labels"), 0, STRATA_ENOENT,
                     "nope-labels");
}

int main(void)
{
    tmp_make("data");
    test_epoch_order();
    test_load();
    tmp_cleanup();
    return CHECK_DONE();
}
