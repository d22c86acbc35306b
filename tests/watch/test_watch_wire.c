/* The bytes of the files a watched run writes (core/pbwire.c, tboard.c,
 * trace.c): TFRecord framing with masked CRC-32C and Event protobufs equal,
 * byte for byte, records that TensorBoard's own writer made
 * (tensorboard.summary.writer.record_writer with event_pb2, TensorBoard
 * 2.21); an event file as the writer leaves it on disk (name, framing,
 * first record), its errors (DIR is a file; a write that fails is one error
 * line naming the file); a trace fragment and document that cJSON parses
 * with the tracks and events put in. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>

#include "check.h"
#include "testutil.h"

#include "checkpoint/checkpoint.h"
#include "internal.h"
#include "observe/observe.h"

/* Hex of TensorBoard's records (see the head of this file). */
/* wall 1700000000.5, "brain.Event:2" */
static const char *const k_ref_version =
    "1800000000000000a37f4b220900002040fc54d9411a0d627261696e2e4576656e743a"
    "322b353110";
static const char *const k_ref_scalars =   /* wall 1700000001.25, step 7 */
    "3c00000000000000c8b7a3520900005040fc54d94110072a2f0a110a0a65706f63685f"
    "6c6f7373150000003f0a1a0a1362617463685f6c6561726e696e675f72617465156f12"
    "83ba3d0937fe";
static const char *const k_ref_nowall =    /* wall 0, step 300000000000 */
    "13000000000000000c91321b1080f092cbdd082a0a0a080a01741500004040810621b4";
static const char *const k_ref_zero =      /* wall 1, step 0, value 0 */
    "1500000000000000d6ab6b2b09000000000000f03f2a0a0a080a017a15000000000c56"
    "c097";
static const char *const k_ref_negative =  /* step -1, value +inf */
    "2f000000000000006d5d1d5009b4e687d0afc1da4110ffffffffffffffffff012a190a"
    "170a1065706f63685f636f6d6d5f7368617265150000807f41f139f4";

static int same_hex(const strata__bytes_t *b, const char *hex, const char *what)
{
    char got[1024] = "";
    for (size_t i = 0; i < b->len && 2 * i + 2 < sizeof got; i++)
        snprintf(got + 2 * i, 3, "%02x", b->p[i]);
    int ok = !b->failed && strcmp(got, hex) == 0;
    if (!ok)
        fprintf(stderr, "%s:\n  got  %s\n  want %s\n", what, got, hex);
    return ok;
}

static void test_events(void)
{
    strata__bytes_t b = { 0 };
    strata__tb_event(&b, 1700000000.5, 0, "brain.Event:2", NULL, NULL, 0);
    CHECK(same_hex(&b, k_ref_version, "file_version record"));

    const char *tags[] = { "epoch_loss", "batch_learning_rate" };
    const float v[] = { 0.5f, -1.0e-3f };
    b.len = 0;
    strata__tb_event(&b, 1700000001.25, 7, NULL, tags, v, 2);
    CHECK(same_hex(&b, k_ref_scalars, "two scalars"));

    const char *t[] = { "t" };
    const float three = 3.0f;
    b.len = 0;
    strata__tb_event(&b, 0.0, 300000000000LL, NULL, t, &three, 1);
    CHECK(same_hex(&b, k_ref_nowall, "no wall_time, a long step"));

    /* A scalar 0 is written (simple_value is a oneof member), step 0 not. */
    const char *z[] = { "z" };
    const float zero = 0.0f;
    b.len = 0;
    strata__tb_event(&b, 1.0, 0, NULL, z, &zero, 1);
    CHECK(same_hex(&b, k_ref_zero, "a zero scalar at step 0"));

    const char *c[] = { "epoch_comm_share" };
    const float inf = INFINITY;
    b.len = 0;
    strata__tb_event(&b, 1795604290.123456, -1, NULL, c, &inf, 1);
    CHECK(same_hex(&b, k_ref_negative, "a negative step, infinity"));
    strata__bytes_free(&b);
}

/* The framing and the mask on their own: the CRC of the length and of the
 * data, masked as tensorflow/core/lib/hash/crc32c.h does. */
static void test_framing(void)
{
    CHECK(strata__crc32c(0, "123456789", 9) == 0xE3069283u);
    /* Mask(crc) = rotate right by 15, plus a constant. */
    CHECK(strata__tfrecord_mask(0) == 0xa282ead8u);
    CHECK(strata__tfrecord_mask(0x00008000u) == 0xa282ead8u + 1u);
    CHECK(strata__tfrecord_mask(0x00000001u) == 0xa282ead8u + (1u << 17));
    strata__bytes_t b = { 0 };
    strata__tfrecord(&b, "abc", 3);
    CHECK(b.len == 8 + 4 + 3 + 4);
    uint64_t n = 0;
    uint32_t crc_len = 0, crc_data = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)b.p[i] << (8 * i);
    for (int i = 0; i < 4; i++) {
        crc_len |= (uint32_t)b.p[8 + i] << (8 * i);
        crc_data |= (uint32_t)b.p[15 + i] << (8 * i);
    }
    CHECK(n == 3);
    CHECK(memcmp(b.p + 12, "abc", 3) == 0);
    CHECK(crc_len == strata__tfrecord_mask(strata__crc32c(0, b.p, 8)));
    CHECK(crc_data == strata__tfrecord_mask(strata__crc32c(0, "abc", 3)));
    strata__bytes_free(&b);
}

/* The one file of DIR/RUN, its name in *name. */
static char *only_file(const char *dir, char *name, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    name[0] = '\0';
    while (d && (de = readdir(d)) != NULL)
        if (de->d_name[0] != '.') {
            snprintf(name, cap, "%s", de->d_name);
            n++;
        }
    if (d)
        closedir(d);
    if (n != 1)
        return NULL;
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static void test_writer(void)
{
    strata__tboard_t tb;
    const char *dir = tmp_path("runs/a");
    CHECK(strata__tboard_open(&tb, dir, 3u) == STRATA_OK);
    const char *tags[] = { "epoch_loss" };
    const float v = 0.25f;
    strata__tboard_scalars(&tb, STRATA__TB_VALIDATION, 3, tags, &v, 1);
    CHECK(strata__tboard_close(&tb) == STRATA_OK);
    CHECK(strata__tboard_close(&tb) == STRATA_OK); /* twice: nothing */

    char name[256], host[256] = "";
    gethostname(host, sizeof host - 1);
    for (int run = 0; run < 2; run++) {
        const char *path = only_file(tmp_path(run ? "runs/a/validation"
                                                  : "runs/a/train"),
                                     name, sizeof name);
        CHECKF(path != NULL, "one event file in run %d", run);
        if (!path)
            continue;
        /* events.out.tfevents.TIME.HOST, TIME ten digits */
        CHECKF(strncmp(name, "events.out.tfevents.", 20) == 0 &&
               strspn(name + 20, "0123456789") == 10 && name[30] == '.' &&
               strcmp(name + 31, host) == 0, "file name %s", name);
        size_t n = 0;
        unsigned char *p = read_all(path, &n);
        /* the file_version record first (its wall time is now) */
        CHECK(p && n >= 8 && p[0] == 0x18 && memcmp(p + 12 + 9,
              "\x1a\x0d" "brain.Event:2", 15) == 0);
        size_t first = 8 + 4 + 0x18 + 4;
        if (run == 1) { /* then the scalar: framing and fields */
            CHECK(n > first + 12);
            const unsigned char *r = p + first;
            size_t len = r[0];
            CHECK(n == first + 12 + len + 4);
            CHECK(r[12] == 0x09 && r[21] == 0x10 && r[22] == 3);
            uint32_t crc = (uint32_t)r[12 + len] | (uint32_t)r[13 + len] << 8 |
                           (uint32_t)r[14 + len] << 16 |
                           (uint32_t)r[15 + len] << 24;
            CHECK(crc == strata__tfrecord_mask(strata__crc32c(0, r + 12, len)));
        } else {
            CHECK(n == first); /* nothing for train */
        }
        free(p);
    }

    /* DIR is a file: one error, nothing made. */
    write_file(tmp_path("plain"), "x", 1);
    capture_begin();
    int rc = strata__tboard_open(&tb, tmp_path("plain"), 1u);
    const char *err = capture_end();
    CHECK(rc == STRATA_EIO);
    CHECKF(count_lines(err) == 1 && strstr(err, "not a directory") &&
           strstr(err, "plain"), "%s", err);

    /* A write that fails (the file size limit: EFBIG) is one error line
     * naming the file; later flushes fail without another. */
    CHECK(strata__tboard_open(&tb, tmp_path("runs/b"), 1u) == STRATA_OK);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    for (int i = 0; i < 400; i++)
        strata__tboard_scalars(&tb, STRATA__TB_TRAIN, i, tags, &v, 1);
    capture_begin();
    int f1 = strata__tboard_flush(&tb);
    int f2 = strata__tboard_flush(&tb);
    int f3 = strata__tboard_close(&tb);
    err = capture_end();
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(f1 == STRATA_EIO && f2 == STRATA_EIO && f3 == STRATA_EIO);
    CHECKF(count_lines(err) == 1 && strstr(err, "runs/b/train/events.out."
           "tfevents.") && strstr(err, "cannot write"), "%s", err);
}

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static void test_trace(void)
{
    strata__trace_t tr;
    strata__trace_init(&tr);
    double t = tr.mono0 + 0.5;
    strata__trace_add(&tr, STRATA__TR_FORWARD, 0, 4, t, t + 0.001, 0);
    strata__trace_add(&tr, STRATA__TR_REDUCE, 1, 4, t + 0.002, t + 0.003, 4096);
    strata__trace_add(&tr, STRATA__TR_CHECKPOINT, 2, 5, t + 0.01, t + 0.02, 0);
    const char *names[] = { "replica 0 (cpu:0)", "replica \"1\"", "main" };
    strata__bytes_t f[2] = { { 0 }, { 0 } }, doc = { 0 };
    strata__trace_fragment(&tr, &f[0], 0, "chief:0 (rank 0)", names, 3);
    strata__trace_fragment(&tr, &f[1], 1, "worker:0 (rank 1)", names, 3);
    strata__trace_document(&doc, f, 2, "about \"it\"");
    strata__bytes_put(&doc, "", 1);
    cJSON *j = cJSON_Parse((const char *)doc.p);
    CHECKF(j != NULL, "not JSON:\n%s", doc.p);
    const cJSON *evs = j ? get(j, "traceEvents") : NULL;
    CHECK(cJSON_IsArray(evs));
    int x = 0, threads = 0, procs = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const char *ph = cJSON_GetStringValue(get(e, "ph"));
        const char *name = cJSON_GetStringValue(get(e, "name"));
        if (ph && !strcmp(ph, "M")) {
            threads += !strcmp(name, "thread_name");
            procs += !strcmp(name, "process_name");
            continue;
        }
        x++;
        double ts = cJSON_GetNumberValue(get(e, "ts"));
        double dur = cJSON_GetNumberValue(get(e, "dur"));
        const cJSON *args = get(e, "args");
        if (!strcmp(name, "forward")) {
            /* microseconds of the system clock, 0.5 s after the start */
            CHECK(fabs(ts - ((double)tr.real0_us + 5e5)) < 1.0);
            CHECK(fabs(dur - 1000.0) < 0.01);
            CHECK(cJSON_GetNumberValue(get(args, "step")) == 4);
        }
        if (!strcmp(name, "reduce")) {
            CHECK(cJSON_GetNumberValue(get(args, "bytes")) == 4096);
            CHECK(!strcmp(cJSON_GetStringValue(get(e, "cat")), "comm"));
        }
    }
    CHECK(x == 6 && threads == 6 && procs == 2);
    cJSON_Delete(j);
    strata__bytes_free(&doc);
    strata__bytes_free(&f[0]);
    strata__bytes_free(&f[1]);
    strata__trace_free(&tr);
}

int main(void)
{
    tmp_make("watch");
    test_events();
    test_framing();
    test_writer();
    test_trace();
    tmp_cleanup();
    return CHECK_DONE();
}
