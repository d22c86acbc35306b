/* Golden ABI layout: the size of every frozen struct of ABI major 1 and the
 * offset of each member, compared with tests/abi/plugin_v1.golden. A change
 * to a frozen layout fails here; appending a member means appending its line
 * to the golden file (and a minor bump in version.h). Run with --print to
 * regenerate the text. Includes the public SDK only.
 *
 * With --history FILE it checks the minor version instead: FILE records, for
 * every ABI minor, the size of each frozen struct ("2 strata_group_t 56").
 * The sizes now must be the row of STRATA_ABI_MINOR (a struct that grew
 * without a minor bump fails, and so does a bump without its rows), and no
 * struct may be smaller than in an earlier minor (members are only ever
 * appended). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/plugin.h>

#define F(T, m) n += snprintf(buf + n, sizeof buf - n, "%s.%s %zu\n", #T, #m, offsetof(T, m));
#define S(T)    n += snprintf(buf + n, sizeof buf - n, "sizeof %s %zu\n", #T, sizeof(T));

static char buf[16384];

static size_t layout(void)
{
    size_t n = 0;
    S(strata_plugin_header_t)
    F(strata_plugin_header_t, abi_major) F(strata_plugin_header_t, abi_minor)
    F(strata_plugin_header_t, struct_size) F(strata_plugin_header_t, kind)
    F(strata_plugin_header_t, reserved) F(strata_plugin_header_t, name)
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
    S(strata_step_t)
    F(strata_step_t, struct_size) F(strata_step_t, done) F(strata_step_t, id)
    F(strata_step_t, epoch) F(strata_step_t, attempt) F(strata_step_t, batch)
    F(strata_step_t, has_result) F(strata_step_t, samples)
    F(strata_step_t, loss_sum) F(strata_step_t, correct)
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

/* "sizeof T N" lines of the layout: the size of struct `name` now, or -1. */
static long size_now(const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "sizeof %s ", name);
    const char *p = strstr(buf, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static int history(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("%s: cannot read\n", path);
        return 1;
    }
    char line[256], name[96];
    int minor, failed = 0, rows_now = 0, checks = 0;
    long size;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%d %95s %ld", &minor, name,
                                     &size) != 3)
            continue;
        long now = size_now(name);
        checks++;
        if (now < 0) {
            printf("%s: %s is not a frozen struct of this ABI\n", path, name);
            failed = 1;
        } else if (minor == STRATA_ABI_MINOR && now != size) {
            printf("%s is %ld bytes, %ld at ABI 1.%d: a member was appended "
                   "without a minor bump (raise STRATA_ABI_MINOR in "
                   "include/strata/version.h and add its rows to %s)\n",
                   name, now, size, minor, path);
            failed = 1;
        } else if (minor < STRATA_ABI_MINOR && now < size) {
            printf("%s shrank from %ld bytes at ABI 1.%d to %ld: frozen "
                   "members are never removed\n", name, size, minor, now);
            failed = 1;
        } else if (minor > STRATA_ABI_MINOR) {
            printf("%s: rows for ABI 1.%d, but this is 1.%d\n", path, minor,
                   STRATA_ABI_MINOR);
            failed = 1;
        }
        rows_now += minor == STRATA_ABI_MINOR;
    }
    fclose(f);
    int structs = 0;
    for (const char *p = buf; (p = strstr(p, "sizeof ")); p++)
        structs++;
    if (rows_now != structs) {
        printf("%s has %d rows for ABI 1.%d, the ABI has %d frozen structs: "
               "one row each\n", path, rows_now, STRATA_ABI_MINOR, structs);
        failed = 1;
    }
    printf("%d passed, %d failed\n", failed ? checks - 1 : checks, failed);
    return failed;
}

int main(int argc, char **argv)
{
    size_t n = layout();
    if (argc > 2 && strcmp(argv[1], "--history") == 0)
        return history(argv[2]);
    if (argc > 1 && strcmp(argv[1], "--print") == 0) {
        fputs(buf, stdout);
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: abi_layout GOLDEN | --print\n");
        return 2;
    }
    static char golden[16384];
    FILE *f = fopen(argv[1], "r");
    size_t g = f ? fread(golden, 1, sizeof golden - 1, f) : 0;
    if (f)
        fclose(f);
    golden[g] = '\0';
    /* Compare line by line, naming the first difference. */
    char *a = buf, *b = golden;
    int line = 1, failed = 0;
    while (*a || *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || strncmp(a, b, la) != 0) {
            printf("line %d: golden '%.*s', now '%.*s'\n", line, (int)lb, b,
                   (int)la, a);
            failed = 1;
            break;
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
        line++;
    }
    printf("%d passed, %d failed\n", failed ? 0 : 1, failed);
    (void)n;
    return failed;
}
