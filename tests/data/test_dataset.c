/* core/data/dataset.c: epoch order, loading an (images, labels) pair with
 * its checks and limit, and filling batches; split.c: the validation set
 * held out of a training set. */
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
    for (int i = 0; i < 5; i++)
        CHECK(d.labels[i] == lab_v[i]);

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

    /* Labels are class ids, as many as the data has: 200 makes 201
     * classes, whatever the limit (no label of an IDX byte is out of
     * range; test_npy.c refuses negative and too large ones). */
    static const uint8_t widev[5] = { 0, 1, 2, 200, 3 };
    const char *labwide = tmp_path("labwide");
    write_idx(labwide, 1, lab_dims, widev, 0);
    strata__dataset_t w;
    CHECK(strata__dataset_load(img, labwide, 2, &w) == 0);
    CHECK(w.n == 2 && w.nclasses == 201 && w.labels[1] == 1);
    strata__dataset_free(&w);

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

/* A set of n samples of 3 float values each, sample i = (i, i, i), label
 * i % 7: whatever the split does, each row says where it came from. */
static strata__dataset_t numbered(size_t n, int f32)
{
    strata__dataset_t d = { .n = n, .dim = 3, .rows = 1, .cols = 3,
                            .nclasses = 7 };
    d.labels = malloc(n * sizeof *d.labels);
    if (f32)
        d.images_f32 = malloc(n * 3 * sizeof(float));
    else
        d.images = malloc(n * 3);
    for (size_t i = 0; i < n; i++) {
        d.labels[i] = (int32_t)(i % 7);
        for (int j = 0; j < 3; j++) {
            if (f32)
                d.images_f32[i * 3 + j] = (float)i;
            else
                d.images[i * 3 + j] = (uint8_t)i;
        }
    }
    return d;
}

static size_t origin_of(const strata__dataset_t *d, size_t r)
{
    return d->images_f32 ? (size_t)d->images_f32[r * 3] : d->images[r * 3];
}

/* Rows of both parts: each from a distinct original sample, intact, in
 * ascending order; together every original sample once. */
static void check_partition(const strata__dataset_t *tr,
                            const strata__dataset_t *va, size_t n)
{
    unsigned char *seen = calloc(n, 1);
    const strata__dataset_t *part[2] = { tr, va };
    int ok = 1;
    for (int p = 0; p < 2; p++)
        for (size_t r = 0; r < part[p]->n; r++) {
            size_t o = origin_of(part[p], r);
            ok &= o < n && !seen[o] && part[p]->labels[r] == (int32_t)(o % 7);
            ok &= r == 0 || origin_of(part[p], r - 1) < o;
            for (int j = 1; j < 3; j++)
                ok &= (part[p]->images_f32
                           ? part[p]->images_f32[r * 3 + j] == (float)o
                           : part[p]->images[r * 3 + j] == (uint8_t)o);
            if (o < n)
                seen[o] = 1;
        }
    for (size_t i = 0; i < n; i++)
        ok &= seen[i];
    CHECKF(ok, "the split is not a partition of the %zu samples", n);
    free(seen);
}

static void test_split(void)
{
    for (int f32 = 0; f32 < 2; f32++) {
        strata__dataset_t tr = numbered(200, f32), va;
        CHECK(strata__dataset_split(&tr, 0.25, 42, &va) == 0);
        CHECK(tr.n == 150 && va.n == 50 && va.dim == 3 && va.nclasses == 7);
        CHECK((va.images_f32 != NULL) == f32 && (tr.images_f32 != NULL) == f32);
        check_partition(&tr, &va, 200);
        /* the same seed: the same samples held out; another: others */
        strata__dataset_t tr2 = numbered(200, f32), va2, tr3 = numbered(200, f32),
                          va3;
        CHECK(strata__dataset_split(&tr2, 0.25, 42, &va2) == 0);
        CHECK(strata__dataset_split(&tr3, 0.25, 43, &va3) == 0);
        int same = va2.n == va.n, other = va3.n == va.n;
        for (size_t r = 0; r < va.n && r < va2.n && r < va3.n; r++) {
            same &= origin_of(&va2, r) == origin_of(&va, r);
            other &= origin_of(&va3, r) == origin_of(&va, r);
        }
        CHECKF(same, "seed 42 twice held out different samples");
        CHECKF(!other, "seeds 42 and 43 held out the same samples");
        /* held out from everywhere, not the file's tail or head */
        CHECK(origin_of(&va, 0) < 150 && origin_of(&va, va.n - 1) >= 50);
        strata__dataset_free(&tr);
        strata__dataset_free(&va);
        strata__dataset_free(&tr2);
        strata__dataset_free(&va2);
        strata__dataset_free(&tr3);
        strata__dataset_free(&va3);
    }
    /* Either part empty: refused, the training set as it was. */
    const double bad[] = { 0.001, 0.999 };
    for (int i = 0; i < 2; i++) {
        strata__dataset_t tr = numbered(10, 1), va;
        CHECK(strata__dataset_split(&tr, bad[i], 1, &va) == STRATA_ECONFIG);
        CHECK(tr.n == 10 && va.n == 0 && va.labels == NULL);
        CHECK(origin_of(&tr, 9) == 9);
        strata__dataset_free(&tr);
    }
    /* The smallest split there is: one sample each. */
    strata__dataset_t tr = numbered(2, 0), va;
    CHECK(strata__dataset_split(&tr, 0.5, 9, &va) == 0);
    CHECK(tr.n == 1 && va.n == 1);
    check_partition(&tr, &va, 2);
    strata__dataset_free(&tr);
    strata__dataset_free(&va);
}

/* Id features go with their samples: through a split (each part's ids
 * are its rows', each row keeps its index in the file for messages), and
 * into batches in the epoch's order; ids_check takes -1 and refuses an id
 * at the table's size. */
static void test_ids(void)
{
    strata__dataset_t tr = numbered(200, 1), va;
    tr.ids_k = 2;
    tr.ids = malloc(200 * 2 * sizeof *tr.ids);
    tr.ids_file = strdup("ids.npy");
    for (int i = 0; i < 200; i++) {
        tr.ids[2 * i] = i;
        tr.ids[2 * i + 1] = i % 5 - 1;             /* -1 .. 3: padding */
    }
    CHECK(strata__ids_check(&tr, 200) == 0);
    CHECK(strata__dataset_split(&tr, 0.25, 42, &va) == 0);
    const strata__dataset_t *part[2] = { &tr, &va };
    int ok = 1;
    for (int p = 0; p < 2; p++) {
        ok &= part[p]->ids_k == 2 && part[p]->file_row &&
              strcmp(part[p]->ids_file, "ids.npy") == 0;
        for (size_t r = 0; ok && r < part[p]->n; r++) {
            size_t o = origin_of(part[p], r);
            ok &= part[p]->ids[2 * r] == (int32_t)o &&
                  part[p]->ids[2 * r + 1] == (int32_t)(o % 5) - 1 &&
                  part[p]->file_row[r] == o;
        }
    }
    CHECKF(ok, "the split's ids are not their samples'");
    /* a batch in a shuffled order: each row's ids are its sample's */
    uint32_t perm[150];
    strata__epoch_order(perm, 150, 7, 3, 1);
    int32_t batch[10 * 2];
    strata__ids_fill(&tr, perm, 20, 10, batch);
    for (int i = 0; i < 10; i++)
        ok &= batch[2 * i] == tr.ids[2 * perm[20 + i]] &&
              batch[2 * i + 1] == tr.ids[2 * perm[20 + i] + 1];
    CHECKF(ok, "a batch's ids are not its samples'");
    /* an id of 199 is in a table of 200, not of 199 */
    strata__dataset_t *high = origin_of(&tr, tr.n - 1) == 199 ? &tr : &va;
    CHECK(strata__ids_check(high, 200) == 0);
    CHECK(strata__ids_check(high, 199) == STRATA_EDATA);
    strata__dataset_free(&tr);
    strata__dataset_free(&va);
}

int main(void)
{
    tmp_make("data");
    test_epoch_order();
    test_load();
    test_split();
    test_ids();
    tmp_cleanup();
    return CHECK_DONE();
}
