/* Golden ABI layout: the size of every frozen struct of both ABI majors the
 * core loads and the offset of each member, compared with
 * tests/abi/plugin_v1.golden (major 1's tables and the data structs both
 * majors share) and plugin_v2.golden (major 2's tables). A change to a
 * frozen layout fails here; appending a member means appending its line to
 * the golden file (and a minor bump in version.h). Run with --print 1|2 to
 * regenerate the text. Includes the public SDK only.
 *
 * With --history FILE it checks the minor version instead: FILE records, for
 * every ABI version, the size of each frozen struct ("1.2 strata_group_t
 * 56"). The sizes now must be the rows of STRATA_ABI_MAJOR.MINOR (a struct
 * that grew without a minor bump fails, and so does a bump without its
 * rows), and no struct may be smaller than at an earlier version (members
 * are only ever appended).
 *
 * With --pinned FILE it checks that the rows of every released minor are
 * as they were released: the CRC-32 of each minor's rows (in file order,
 * each line with its newline) must equal the value pinned in k_pinned
 * below; an edited, added or removed row of a released minor fails with a
 * line naming the minor. Recording a new minor: append its rows, then pin
 * the CRC this mode prints for it. --pinned-selftest FILE edits a 2.3 row
 * in memory and must see that refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/plugin.h>

#define F(T, m) n += snprintf(buf + n, sizeof buf - n, "%s.%s %zu\n", #T, #m, offsetof(T, m));
#define S(T)    n += snprintf(buf + n, sizeof buf - n, "sizeof %s %zu\n", #T, sizeof(T));

static char buf[16384];

/* Major 1: its host table and vtable, and the data structs that both
 * majors share. */
static size_t layout_v1(void)
{
    size_t n = 0;
    S(strata_plugin_header_t)
    F(strata_plugin_header_t, abi_major) F(strata_plugin_header_t, abi_minor)
    F(strata_plugin_header_t, struct_size) F(strata_plugin_header_t, kind)
    F(strata_plugin_header_t, caps) F(strata_plugin_header_t, name)
    F(strata_plugin_header_t, version) F(strata_plugin_header_t, description)
    F(strata_plugin_header_t, build_sig)
    S(strata_plugin_v1_t)
    F(strata_plugin_v1_t, hdr) F(strata_plugin_v1_t, options)
    F(strata_plugin_v1_t, cfg_size) F(strata_plugin_v1_t, var_state_size)
    F(strata_plugin_v1_t, init) F(strata_plugin_v1_t, fini)
    F(strata_plugin_v1_t, create_var) F(strata_plugin_v1_t, reduce)
    F(strata_plugin_v1_t, update) F(strata_plugin_v1_t, ctl)
    F(strata_plugin_v1_t, drive) F(strata_plugin_v1_t, next_step)
    F(strata_plugin_v1_t, send) F(strata_plugin_v1_t, recv)
    F(strata_plugin_v1_t, placed)
    S(strata_option_t)
    F(strata_option_t, key) F(strata_option_t, type) F(strata_option_t, flags)
    F(strata_option_t, def) F(strata_option_t, offset) F(strata_option_t, min)
    F(strata_option_t, max) F(strata_option_t, choices) F(strata_option_t, help)
    S(strata_task_t)
    F(strata_task_t, type) F(strata_task_t, index) F(strata_task_t, rank)
    F(strata_task_t, address)
    S(strata_cluster_t)
    F(strata_cluster_t, struct_size) F(strata_cluster_t, ntasks)
    F(strata_cluster_t, tasks) F(strata_cluster_t, self)
    F(strata_cluster_t, nworkers) F(strata_cluster_t, rendezvous)
    F(strata_cluster_t, source)
    S(strata_group_t)
    F(strata_group_t, struct_size) F(strata_group_t, scope) F(strata_group_t, size)
    F(strata_group_t, rank) F(strata_group_t, nlocal) F(strata_group_t, timeout_ms)
    F(strata_group_t, devices) F(strata_group_t, addrs) F(strata_group_t, names)
    F(strata_group_t, tag) F(strata_group_t, flags)
    F(strata_group_t, public_keys) F(strata_group_t, secret_key)
    S(strata_env_t)
    F(strata_env_t, struct_size) F(strata_env_t, kind) F(strata_env_t, cfg)
    F(strata_env_t, section) F(strata_env_t, group) F(strata_env_t, cluster)
    F(strata_env_t, nreplicas) F(strata_env_t, nvars) F(strata_env_t, devices)
    F(strata_env_t, model_count) F(strata_env_t, transport)
    S(strata_var_t)
    F(strata_var_t, struct_size) F(strata_var_t, index) F(strata_var_t, name)
    F(strata_var_t, dtype) F(strata_var_t, ndim) F(strata_var_t, shape)
    F(strata_var_t, count) F(strata_var_t, offset) F(strata_var_t, init)
    F(strata_var_t, value) F(strata_var_t, state)
    S(strata_op_t)
    F(strata_op_t, struct_size) F(strata_op_t, slot) F(strata_op_t, buf)
    F(strata_op_t, count) F(strata_op_t, device) F(strata_op_t, reduce_op)
    F(strata_op_t, root) F(strata_op_t, lr) F(strata_op_t, step)
    F(strata_op_t, flags) F(strata_op_t, sparse) F(strata_op_t, nsparse)
    S(strata_host_v1_t)
    F(strata_host_v1_t, struct_size) F(strata_host_v1_t, abi_major)
    F(strata_host_v1_t, abi_minor) F(strata_host_v1_t, log)
    F(strata_host_v1_t, cfg_get) F(strata_host_v1_t, alloc)
    F(strata_host_v1_t, free) F(strata_host_v1_t, copy) F(strata_host_v1_t, axpy)
    F(strata_host_v1_t, scale) F(strata_host_v1_t, sum)
    F(strata_host_v1_t, opt_create) F(strata_host_v1_t, opt_step)
    F(strata_host_v1_t, opt_destroy) F(strata_host_v1_t, t_open)
    F(strata_host_v1_t, t_reduce) F(strata_host_v1_t, t_update)
    F(strata_host_v1_t, t_ctl) F(strata_host_v1_t, t_close)
    F(strata_host_v1_t, t_send) F(strata_host_v1_t, t_recv)
    F(strata_host_v1_t, evaluate) F(strata_host_v1_t, report)
    F(strata_host_v1_t, opt_io) F(strata_host_v1_t, boundary_due)
    F(strata_host_v1_t, boundary)
    F(strata_host_v1_t, t_open_group) F(strata_host_v1_t, t_name)
    S(strata_state_t)
    F(strata_state_t, struct_size) F(strata_state_t, nslots)
    F(strata_state_t, vars) F(strata_state_t, slots) F(strata_state_t, opt_steps)
    F(strata_state_t, part_step) F(strata_state_t, part_tag)
    F(strata_state_t, nparts) F(strata_state_t, pad_)
    S(strata_step_t)
    F(strata_step_t, struct_size) F(strata_step_t, done) F(strata_step_t, id)
    F(strata_step_t, epoch) F(strata_step_t, attempt) F(strata_step_t, batch)
    F(strata_step_t, has_result) F(strata_step_t, samples)
    F(strata_step_t, loss_sum) F(strata_step_t, correct)
    F(strata_step_t, metric_sum)
    F(strata_step_t, states) F(strata_step_t, nstates)
    S(strata_drive_t)
    F(strata_drive_t, struct_size) F(strata_drive_t, epochs)
    F(strata_drive_t, steps_per_epoch) F(strata_drive_t, max_steps)
    F(strata_drive_t, batch) F(strata_drive_t, eval)
    F(strata_drive_t, train_samples) F(strata_drive_t, first_epoch)
    F(strata_drive_t, first_batch)
    S(strata_report_t)
    F(strata_report_t, struct_size) F(strata_report_t, kind)
    F(strata_report_t, epoch) F(strata_report_t, has_val)
    F(strata_report_t, steps) F(strata_report_t, loss) F(strata_report_t, acc)
    F(strata_report_t, val_loss) F(strata_report_t, val_acc)
    F(strata_report_t, seconds)
    return n;
}

/* Major 2: the host table with a context in every entry, and its vtable. */
static size_t layout_v2(size_t n)
{
    S(strata_host_v2_t)
    F(strata_host_v2_t, struct_size) F(strata_host_v2_t, abi_major)
    F(strata_host_v2_t, abi_minor) F(strata_host_v2_t, log)
    F(strata_host_v2_t, cfg_get) F(strata_host_v2_t, alloc)
    F(strata_host_v2_t, free) F(strata_host_v2_t, copy)
    F(strata_host_v2_t, axpy) F(strata_host_v2_t, scale)
    F(strata_host_v2_t, sum) F(strata_host_v2_t, opt_create)
    F(strata_host_v2_t, opt_step) F(strata_host_v2_t, opt_io)
    F(strata_host_v2_t, opt_destroy) F(strata_host_v2_t, t_open)
    F(strata_host_v2_t, t_name) F(strata_host_v2_t, t_reduce)
    F(strata_host_v2_t, t_update) F(strata_host_v2_t, t_ctl)
    F(strata_host_v2_t, t_send) F(strata_host_v2_t, t_recv)
    F(strata_host_v2_t, t_close) F(strata_host_v2_t, evaluate)
    F(strata_host_v2_t, report) F(strata_host_v2_t, boundary_due)
    F(strata_host_v2_t, boundary) F(strata_host_v2_t, grad_sumsq)
    F(strata_host_v2_t, grad_clip) F(strata_host_v2_t, training_done)
    F(strata_host_v2_t, membership) F(strata_host_v2_t, cfg_origin)
    F(strata_host_v2_t, t_reduce_scatter) F(strata_host_v2_t, t_all_gather)
    F(strata_host_v2_t, t_barrier) F(strata_host_v2_t, t_caps)
    F(strata_host_v2_t, states_get) F(strata_host_v2_t, states_set)
    F(strata_host_v2_t, opt_step_rows) F(strata_host_v2_t, batch_rows)
    F(strata_host_v2_t, init_values) F(strata_host_v2_t, discard)
    F(strata_host_v2_t, part_write)
    S(strata_membership_t)
    F(strata_membership_t, struct_size) F(strata_membership_t, generation)
    F(strata_membership_t, size) F(strata_membership_t, rank)
    F(strata_membership_t, addrs) F(strata_membership_t, names)
    F(strata_membership_t, committed) F(strata_membership_t, resume_step)
    S(strata_shards_t)
    F(strata_shards_t, struct_size) F(strata_shards_t, op)
    F(strata_shards_t, bounds)
    S(strata_plugin_v2_t)
    F(strata_plugin_v2_t, hdr) F(strata_plugin_v2_t, options)
    F(strata_plugin_v2_t, cfg_size) F(strata_plugin_v2_t, var_state_size)
    F(strata_plugin_v2_t, init) F(strata_plugin_v2_t, fini)
    F(strata_plugin_v2_t, create_var) F(strata_plugin_v2_t, reduce)
    F(strata_plugin_v2_t, update) F(strata_plugin_v2_t, ctl)
    F(strata_plugin_v2_t, drive) F(strata_plugin_v2_t, next_step)
    F(strata_plugin_v2_t, send) F(strata_plugin_v2_t, recv)
    F(strata_plugin_v2_t, placed) F(strata_plugin_v2_t, reduce_ready)
    F(strata_plugin_v2_t, reduce_scatter) F(strata_plugin_v2_t, all_gather)
    F(strata_plugin_v2_t, barrier) F(strata_plugin_v2_t, strangers)
    S(strata_strangers_t)
    F(strata_strangers_t, struct_size) F(strata_strangers_t, reserved)
    F(strata_strangers_t, refused_key) F(strata_strangers_t, closed_early)
    F(strata_strangers_t, not_protocol) F(strata_strangers_t, bad_message)
    S(strata_sparse_t)
    F(strata_sparse_t, var) F(strata_sparse_t, reserved)
    F(strata_sparse_t, offset) F(strata_sparse_t, count)
    F(strata_sparse_t, row_len)
    F(strata_sparse_t, nrows) F(strata_sparse_t, rows)
    F(strata_sparse_t, values)
    S(strata_part_piece_t)
    F(strata_part_piece_t, var) F(strata_part_piece_t, slot)
    F(strata_part_piece_t, row0) F(strata_part_piece_t, rows)
    F(strata_part_piece_t, data)
    S(strata_part_t)
    F(strata_part_t, struct_size) F(strata_part_t, index)
    F(strata_part_t, count) F(strata_part_t, npieces)
    F(strata_part_t, step) F(strata_part_t, tag)
    F(strata_part_t, pieces) F(strata_part_t, bytes)
    return n;
}

/* "sizeof T N" lines of the layout: the size of struct `name` now, or -1. */
static long size_now(const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "sizeof %s ", name);
    const char *p = strstr(buf, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/* ABI versions as one number: 1.4 -> 1004. */
#define VER(major, minor) ((major) * 1000 + (minor))
#define NOW VER(STRATA_ABI_MAJOR, STRATA_ABI_MINOR)

static int history(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("%s: cannot read\n", path);
        return 1;
    }
    char line[256], name[96];
    int major, minor, failed = 0, rows_now = 0, checks = 0;
    long size;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%d.%d %95s %ld", &major, &minor,
                                     name, &size) != 4)
            continue;
        long now = size_now(name);
        int ver = VER(major, minor);
        checks++;
        if (now < 0) {
            printf("%s: %s is not a frozen struct of this ABI\n", path, name);
            failed = 1;
        } else if (ver == NOW && now != size) {
            printf("%s is %ld bytes, %ld at ABI %d.%d: a member was appended "
                   "without a minor bump (raise STRATA_ABI_MINOR in "
                   "include/strata/version.h and add its rows to %s)\n",
                   name, now, size, major, minor, path);
            failed = 1;
        } else if (ver < NOW && now < size) {
            printf("%s shrank from %ld bytes at ABI %d.%d to %ld: frozen "
                   "members are never removed\n", name, size, major, minor,
                   now);
            failed = 1;
        } else if (ver > NOW) {
            printf("%s: rows for ABI %d.%d, but this is %d.%d\n", path, major,
                   minor, STRATA_ABI_MAJOR, STRATA_ABI_MINOR);
            failed = 1;
        }
        rows_now += ver == NOW;
    }
    fclose(f);
    int structs = 0;
    for (const char *p = buf; (p = strstr(p, "sizeof ")); p++)
        structs++;
    if (rows_now != structs) {
        printf("%s has %d rows for ABI %d.%d, the ABI has %d frozen structs: "
               "one row each\n", path, rows_now, STRATA_ABI_MAJOR,
               STRATA_ABI_MINOR, structs);
        failed = 1;
    }
    printf("%d passed, %d failed\n", failed ? checks - 1 : checks, failed);
    return failed;
}

/* ---- released minors' rows are immutable --------------------------------- */

static const struct { const char *ver; unsigned long crc; } k_pinned[] = {
    { "1.2", 0x9ab9c385UL }, { "1.3", 0x07aca999UL }, { "1.4", 0xf1def39aUL },
    { "2.0", 0x61a3d94dUL }, { "2.1", 0xa0caa623UL }, { "2.2", 0xe4ab6173UL },
    { "2.3", 0x79ee9433UL }, { "2.4", 0x0b61fc0fUL }, { "2.5", 0x907c1eabUL },
    { "2.6", 0x02ce5e48UL }, { "2.7", 0x3a16da74UL }, { "2.8", 0xefbc21b8UL },
    { "2.9", 0xaf5db815UL }, { "2.10", 0x1982dbd8UL },
    { "2.11", 0x72ea57bcUL }, { "2.12", 0xd552d40cUL },
    { "2.13", 0x3e46ddb5UL },
};
#define NPINNED (sizeof k_pinned / sizeof k_pinned[0])

static unsigned long crc32_of(unsigned long crc, const char *p, size_t n)
{
    crc = ~crc & 0xffffffffUL;
    while (n--) {
        crc ^= (unsigned char)*p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320UL & (0UL - (crc & 1UL)));
    }
    return ~crc & 0xffffffffUL;
}

/* The rows of the history text `txt`, minor by minor, against k_pinned:
 * the number of minors that differ (each named on stdout). */
static int pinned_check(const char *txt, const char *path)
{
    char vers[64][8];
    unsigned long crcs[64];
    int nv = 0, failed = 0;
    for (const char *l = txt; *l;) {
        size_t len = strcspn(l, "\n");
        size_t with_nl = len + (l[len] == '\n');
        int major, minor;
        char ver[8];
        if (l[0] != '#' && sscanf(l, "%d.%d ", &major, &minor) == 2 &&
            major >= 0 && major < 100 && minor >= 0 && minor < 100) {
            snprintf(ver, sizeof ver, "%d.%d", major, minor);
            int i = 0;
            while (i < nv && strcmp(vers[i], ver) != 0)
                i++;
            if (i == nv && nv < 64) {
                snprintf(vers[nv], sizeof vers[nv], "%s", ver);
                crcs[nv++] = 0;
            }
            if (i < nv)
                crcs[i] = crc32_of(crcs[i], l, with_nl);
        }
        l += with_nl;
    }
    for (size_t p = 0; p < NPINNED; p++) {
        int i = 0;
        while (i < nv && strcmp(vers[i], k_pinned[p].ver) != 0)
            i++;
        if (i == nv) {
            printf("%s: ABI %s is released but has no rows: a released "
                   "minor's rows are never removed\n", path, k_pinned[p].ver);
            failed++;
        } else if (crcs[i] != k_pinned[p].crc) {
            printf("%s: the rows of ABI %s were edited (crc32 %08lx, pinned "
                   "%08lx in tests/abi/abi_layout.c): a released minor's rows "
                   "are immutable; record a change as a new minor\n", path,
                   k_pinned[p].ver, crcs[i], k_pinned[p].crc);
            failed++;
        }
    }
    for (int i = 0; i < nv; i++) {
        size_t p = 0;
        while (p < NPINNED && strcmp(vers[i], k_pinned[p].ver) != 0)
            p++;
        if (p == NPINNED) {
            printf("%s: ABI %s is recorded but not pinned: add { \"%s\", "
                   "0x%08lxUL } to k_pinned\n", path, vers[i], vers[i],
                   crcs[i]);
            failed++;
        }
    }
    return failed;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return text;
}

static int pinned(const char *path, int selftest)
{
    char *txt = slurp(path);
    if (!txt) {
        printf("%s: cannot read\n", path);
        return 1;
    }
    if (!selftest) {
        int failed = pinned_check(txt, path);
        printf("%zu released minors pinned, %d edited\n", NPINNED, failed);
        return failed != 0;
    }
    /* The first 2.3 row, one byte of its size changed: refused, naming 2.3
     * and no other minor. */
    char *row = strstr(txt, "\n2.3 ");
    char *nl = row ? strchr(row + 1, '\n') : NULL;
    if (!row || !nl) {
        printf("%s: no 2.3 row to edit\n", path);
        return 1;
    }
    nl[-1] = nl[-1] == '9' ? '8' : (char)(nl[-1] + 1);
    printf("-- with one 2.3 row edited (expect one refusal of ABI 2.3):\n");
    fflush(stdout);
    int failed = pinned_check(txt, path);
    int ok = failed == 1;
    printf("%s\n", ok ? "ok - the edit is refused" : "not ok - expected one "
           "refusal");
    return !ok;
}

/* Compare the layout text [a, a_end) with the golden file, line by line,
 * naming the first difference. */
static int compare(const char *a, const char *a_end, const char *path)
{
    static char golden[16384];
    FILE *f = fopen(path, "r");
    size_t g = f ? fread(golden, 1, sizeof golden - 1, f) : 0;
    if (f)
        fclose(f);
    golden[g] = '\0';
    const char *b = golden;
    int line = 1, failed = 0;
    while (a < a_end || *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || strncmp(a, b, la) != 0) {
            printf("%s line %d: golden '%.*s', now '%.*s'\n", path, line,
                   (int)lb, b, (int)la, a);
            failed = 1;
            break;
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
        line++;
    }
    printf("%s: %d lines, %s\n", path, line - 1, failed ? "differs" : "same");
    return failed;
}

int main(int argc, char **argv)
{
    size_t n1 = layout_v1();
    size_t n = layout_v2(n1);
    if (argc > 2 && strcmp(argv[1], "--history") == 0)
        return history(argv[2]);
    if (argc > 2 && strcmp(argv[1], "--pinned") == 0)
        return pinned(argv[2], 0);
    if (argc > 2 && strcmp(argv[1], "--pinned-selftest") == 0)
        return pinned(argv[2], 1);
    if (argc > 2 && strcmp(argv[1], "--print") == 0) {
        int v2 = strcmp(argv[2], "2") == 0;
        fwrite(buf + (v2 ? n1 : 0), 1, v2 ? n - n1 : n1, stdout);
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: abi_layout GOLDEN_V1 GOLDEN_V2 | --print 1|2 "
                        "| --history FILE | --pinned[-selftest] FILE\n");
        return 2;
    }
    int failed = compare(buf, buf + n1, argv[1]);
    failed |= compare(buf + n1, buf + n, argv[2]);
    return failed;
}
