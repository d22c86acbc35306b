/* core/checkpoint/parts.c: checkpoints in parts (plugin ABI 2.13). Parts
 * written by part_write are joined by every reader into whole tensors,
 * whichever placement wrote them; a missing, foreign, damaged, overlapping
 * or gapped part makes the checkpoint invalid (the newest valid one is
 * used instead, with a warning naming the part); part_write refuses a
 * piece outside the model; rotation takes a checkpoint's parts with it
 * and removes parts of no checkpoint. */
#include <inttypes.h>
#include <string.h>

#include "check.h"
#include "checkpoint/checkpoint.h"
#include "testutil.h"

/* The model: a table 5 x 3, a bias of 4, a scalar; one optimizer slot. */
static strata_var_t vars_[3];
static float tbl_[15], bias_[4], one_ = 7.5f, slot_[20];
static const char *const slots_[] = { "m" };

static void model(void)
{
    static const char *names[] = { "emb/table", "dense/bias", "scale" };
    static const int64_t shapes[3][2] = { { 5, 3 }, { 4, 0 }, { 0, 0 } };
    static const uint32_t ndims[] = { 2, 1, 0 };
    static const size_t counts[] = { 15, 4, 1 };
    for (int i = 0; i < 3; i++) {
        vars_[i] = (strata_var_t){ .struct_size = sizeof vars_[i],
                                   .name = names[i], .ndim = ndims[i],
                                   .count = counts[i] };
        memcpy(vars_[i].shape, shapes[i], sizeof shapes[i]);
    }
    for (int i = 0; i < 15; i++)
        tbl_[i] = (float)i + 0.5f;
    for (int i = 0; i < 4; i++)
        bias_[i] = -(float)i;
    for (int i = 0; i < 20; i++)
        slot_[i] = (float)i * 0.01f;
}

/* One part: pieces given as (var, slot, row0, rows); data from the model
 * (slot 0: slot_, offset by the row). */
static int write_part(const char *dir, int64_t step, uint64_t tag, int index,
                      int count, const int (*spec)[4], int n)
{
    strata_part_piece_t pc[8];
    for (int i = 0; i < n; i++) {
        /* a variable the model lacks (a refusal's case): one float a row */
        int known = spec[i][0] >= 0 && spec[i][0] < 3;
        const strata_var_t *v = &vars_[known ? spec[i][0] : 2];
        size_t per = v->ndim ? v->count / (size_t)v->shape[0] : 1;
        const float *src = spec[i][0] == 0 ? tbl_ : spec[i][0] == 1 ? bias_
                                                                    : &one_;
        if (spec[i][1] == 0)
            src = slot_;
        pc[i] = (strata_part_piece_t){ .var = spec[i][0], .slot = spec[i][1],
                                       .row0 = spec[i][2], .rows = spec[i][3],
                                       .data = src + (size_t)spec[i][2] * per };
    }
    strata_part_t p = { .struct_size = sizeof p, .index = index,
                        .count = count, .npieces = n, .step = step, .tag = tag,
                        .pieces = pc };
    int rc = strata__ckpt_part_write(dir, vars_, 3, slots_, 1, &p);
    if (rc == STRATA_OK)
        CHECK(p.bytes > 0);
    return rc;
}

/* The main file of a checkpoint in `count` parts under `tag`. */
static void write_main(const char *dir, int64_t step, uint64_t tag, int count)
{
    char path[4096], st[24], tg[24], ct[16];
    snprintf(st, sizeof st, "%" PRId64, step);
    snprintf(tg, sizeof tg, "%016" PRIx64, tag);
    snprintf(ct, sizeof ct, "%d", count);
    const strata__meta_t m[] = { { "strata.step", st },
                                 { "strata.part_count", ct },
                                 { "strata.part_tag", tg } };
    CHECK(strata__ckpt_path(dir, step, path, sizeof path) == STRATA_OK);
    CHECK(strata__ckpt_write(path, NULL, 0, m, 3) == STRATA_OK);
}

/* Placement A: two parts, the table split 0:2 | 2:5. */
static const int part_a0[][4] = { { 0, -1, 0, 2 }, { 0, 0, 0, 2 },
                                  { 2, -1, 0, 1 } };
static const int part_a1[][4] = { { 0, -1, 2, 3 }, { 0, 0, 2, 3 },
                                  { 1, -1, 0, 4 } };

static int whole(const strata__ckpt_t *c)
{
    const strata__tensor_t *t = strata__ckpt_find(c, "emb/table"),
                           *s = strata__ckpt_find(c, "optimizer/m/emb/table"),
                           *b = strata__ckpt_find(c, "dense/bias"),
                           *k = strata__ckpt_find(c, "scale");
    return t && s && b && k && t->ndim == 2 && t->shape[0] == 5 &&
           t->shape[1] == 3 && !memcmp(t->data, tbl_, sizeof tbl_) &&
           s->shape[0] == 5 && !memcmp(s->data, slot_, 15 * sizeof(float)) &&
           b->ndim == 1 && b->shape[0] == 4 &&
           !memcmp(b->data, bias_, sizeof bias_) && k->ndim == 0 &&
           *(const float *)k->data == one_ && strata__ckpt_ntensors(c) == 4;
}

static void test_join(void)
{
    const char *dir = tmp_make("parts-join");
    CHECK(write_part(dir, 10, 0xabcULL, 0, 2, part_a0, 3) == STRATA_OK);
    CHECK(write_part(dir, 10, 0xabcULL, 1, 2, part_a1, 3) == STRATA_OK);
    char why[512];
    CHECK(strata__ckpt_parts_check(dir, 10, 0xabcULL, 2, why, sizeof why) ==
          STRATA_OK);
    CHECKF(strata__ckpt_parts_check(dir, 10, 0xabdULL, 2, why, sizeof why) ==
           STRATA_EDATA && strstr(why, "another checkpoint"), "%s", why);
    CHECK(strata__ckpt_parts_check(dir, 10, 0xabcULL, 3, why, sizeof why) !=
          STRATA_OK);
    write_main(dir, 10, 0xabcULL, 2);
    strata__ckpt_t *c = NULL;
    char path[4096];
    CHECK(strata__ckpt_path(dir, 10, path, sizeof path) == STRATA_OK);
    CHECK(strata__ckpt_read(path, &c) == STRATA_OK && c && whole(c));
    strata__ckpt_free(c);
    c = NULL;
    CHECK(strata__ckpt_read_weights(path, NULL, NULL, &c) == STRATA_OK &&
          whole(c));
    strata__ckpt_free(c);
    c = NULL;
    char got[4096];
    CHECK(strata__ckpt_latest(dir, &c, got, sizeof got) == STRATA_OK &&
          whole(c) && !strcmp(got, path));
    strata__ckpt_free(c);
    FILE *f = tmpfile();
    char text[4096] = "";
    CHECK(f && strata__ckpt_inspect(path, f) == STRATA_OK);
    if (f) {
        rewind(f);
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
    CHECKF(strstr(text, "joined from the 2 part files") &&
           strstr(text, "emb/table"), "%s", text);

    /* Placement B of the same state: three parts, other cuts. */
    const int b0[][4] = { { 0, -1, 0, 1 }, { 0, 0, 4, 1 }, { 1, -1, 0, 4 } };
    const int b1[][4] = { { 0, -1, 1, 3 }, { 0, 0, 0, 4 } };
    const int b2[][4] = { { 0, -1, 4, 1 }, { 2, -1, 0, 1 } };
    CHECK(write_part(dir, 20, 7, 0, 3, b0, 3) == STRATA_OK);
    CHECK(write_part(dir, 20, 7, 1, 3, b1, 2) == STRATA_OK);
    CHECK(write_part(dir, 20, 7, 2, 3, b2, 2) == STRATA_OK);
    write_main(dir, 20, 7, 3);
    c = NULL;
    CHECK(strata__ckpt_latest(dir, &c, got, sizeof got) == STRATA_OK &&
          whole(c) && strstr(got, "ckpt-0000000020.safetensors"));
    strata__ckpt_free(c);
}

/* A checkpoint whose parts do not hold is skipped for the previous one,
 * with one warning naming the problem. */
static void expect_skipped(const char *tag, const char *word,
                           void (*spoil)(const char *dir))
{
    const char *dir = tmp_make(tag);
    CHECK(write_part(dir, 10, 1, 0, 2, part_a0, 3) == STRATA_OK);
    CHECK(write_part(dir, 10, 1, 1, 2, part_a1, 3) == STRATA_OK);
    write_main(dir, 10, 1, 2);
    CHECK(write_part(dir, 20, 2, 0, 2, part_a0, 3) == STRATA_OK);
    CHECK(write_part(dir, 20, 2, 1, 2, part_a1, 3) == STRATA_OK);
    write_main(dir, 20, 2, 2);
    spoil(dir);
    strata__ckpt_t *c = NULL;
    char got[4096];
    capture_begin();
    int rc = strata__ckpt_latest(dir, &c, got, sizeof got);
    const char *log = capture_end();
    CHECKF(rc == STRATA_OK && whole(c) &&
           strstr(got, "ckpt-0000000010.safetensors") &&
           count_lines(log) == 1 && strstr(log, "ckpt-0000000020") &&
           strstr(log, word), "%s: rc %d, got %s, log: %s", tag, rc, got, log);
    strata__ckpt_free(c);
}

static char dir_[4096];

static void part_path(const char *dir, int j, char *buf)
{
    CHECK(strata__ckpt_part_path(dir, 20, j, 2, buf, 4096) == STRATA_OK);
}

static void spoil_missing(const char *dir)
{
    char p[4096];
    part_path(dir, 1, p);
    CHECK(unlink(p) == 0);
}

static void spoil_foreign(const char *dir)
{   /* part 1 of another checkpoint of the same step (another tag) */
    CHECK(write_part(dir, 20, 99, 1, 2, part_a1, 3) == STRATA_OK);
}

static void spoil_overlap(const char *dir)
{
    const int over[][4] = { { 0, -1, 1, 4 }, { 0, 0, 2, 3 }, { 1, -1, 0, 4 } };
    CHECK(write_part(dir, 20, 2, 1, 2, over, 3) == STRATA_OK);
}

static void spoil_gap(const char *dir)
{
    const int gap[][4] = { { 0, -1, 3, 2 }, { 0, 0, 2, 3 }, { 1, -1, 0, 4 } };
    CHECK(write_part(dir, 20, 2, 1, 2, gap, 3) == STRATA_OK);
}

static void spoil_bits(const char *dir)
{   /* one bit of part 0's data: its CRC */
    char p[4096];
    part_path(dir, 0, p);
    size_t n = 0;
    unsigned char *b = read_all(p, &n);
    CHECK(b && n > 8);
    if (!b)
        return;
    b[n - 3] ^= 0x10;
    write_file(p, b, n);
    free(b);
}

static void spoil_name(const char *dir)
{   /* a tensor of a part without its rows */
    char p[4096], st[8] = "20";
    part_path(dir, 0, p);
    float x[3] = { 1, 2, 3 };
    strata__tensor_t t = { .name = "emb/table", .dtype = "F32", .ndim = 2,
                           .shape = { 1, 3 }, .data = x, .nbytes = sizeof x };
    const strata__meta_t m[] = { { "strata.step", st },
                                 { "strata.part_tag", "0000000000000002" },
                                 { "strata.part_index", "0" },
                                 { "strata.part_count", "2" } };
    CHECK(strata__ckpt_write(p, &t, 1, m, 4) == STRATA_OK);
}

static void test_refused(void)
{
    expect_skipped("parts-missing", "part 1", spoil_missing);
    expect_skipped("parts-foreign", "another checkpoint", spoil_foreign);
    expect_skipped("parts-overlap", "in two parts", spoil_overlap);
    expect_skipped("parts-gap", "in no part", spoil_gap);
    expect_skipped("parts-bits", "crc mismatch", spoil_bits);
    expect_skipped("parts-name", "NAME[ROW0:ROW1]", spoil_name);
}

static void expect_bad_piece(const char *what, const int (*spec)[4], int n)
{
    capture_begin();
    int rc = write_part(dir_, 30, 3, 0, 1, spec, n);
    const char *log = capture_end();
    CHECKF(rc == STRATA_EINVAL && count_lines(log) == 1, "%s: rc %d, log %s",
           what, rc, log);
}

static void test_bad_pieces(void)
{
    snprintf(dir_, sizeof dir_, "%s", tmp_make("parts-bad"));
    const int past[][4] = { { 0, -1, 3, 3 } };
    const int novar[][4] = { { 3, -1, 0, 1 } };
    const int noslot[][4] = { { 0, 1, 0, 1 } };
    const int overlap[][4] = { { 0, -1, 0, 3 }, { 0, -1, 2, 1 } };
    const int norows[][4] = { { 1, -1, 0, 0 } };
    expect_bad_piece("rows past the table", past, 1);
    expect_bad_piece("a fourth variable", novar, 1);
    expect_bad_piece("a second slot", noslot, 1);
    expect_bad_piece("overlapping pieces", overlap, 2);
    expect_bad_piece("no rows", norows, 1);
    char p[4096];
    CHECK(strata__ckpt_part_path(dir_, 30, 0, 1, p, sizeof p) == STRATA_OK);
    CHECK(!file_exists(p));
    /* the same rows of the values and of a slot are two tensors */
    const int both[][4] = { { 0, -1, 0, 5 }, { 0, 0, 0, 5 } };
    CHECK(write_part(dir_, 30, 3, 0, 1, both, 2) == STRATA_OK);
}

/* Rotation: a checkpoint's parts go with it; parts of no checkpoint (a
 * writer stopped before its main file) go; the kept one's stay. */
static void test_rotate(void)
{
    const char *dir = tmp_make("parts-rotate");
    for (int64_t s = 10; s <= 30; s += 10) {
        CHECK(write_part(dir, s, 5, 0, 2, part_a0, 3) == STRATA_OK);
        CHECK(write_part(dir, s, 5, 1, 2, part_a1, 3) == STRATA_OK);
        if (s != 30) /* 30: the parts of a checkpoint never finished */
            write_main(dir, s, 5, 2);
    }
    char p[4096];
    CHECK(strata__ckpt_rotate(dir, 1) == STRATA_OK);
    for (int64_t s = 10; s <= 30; s += 10)
        for (int j = 0; j < 2; j++) {
            CHECK(strata__ckpt_part_path(dir, s, j, 2, p, sizeof p) ==
                  STRATA_OK);
            CHECKF(file_exists(p) == (s == 20), "%s", p);
        }
    int64_t newest = -1;
    CHECK(strata__ckpt_newest_step(dir, &newest) == STRATA_OK &&
          newest == 20);
}

int main(void)
{
    model();
    test_join();
    test_refused();
    test_bad_pieces();
    test_rotate();
    tmp_cleanup();
    return CHECK_DONE();
}
