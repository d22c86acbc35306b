/* strata compare -- shared by compare.c (options, table, files) and
 * compare_run.c (running one strategy, reading its metrics). */
#ifndef STRATA_CLI_COMPARE_H
#define STRATA_CLI_COMPARE_H

#include <signal.h>
#include <stddef.h>

/* How a strategy's job is started: one process (strata train), W workers
 * (strata launch -n W), or P ps tasks, W workers and a chief (strata
 * launch --ps P --workers W --chief). Which one a strategy allows, its
 * plugin says (its capability word: check_strategies in compare.c). */
typedef enum { CMP_ONE, CMP_WORKERS, CMP_PS } cmp_kind_t;

/* One row of a run's [train] metrics_csv. */
typedef struct cmp_epoch {
    int    epoch;
    int    has_test;
    double train_loss, train_acc, test_loss, test_acc;
    double seconds, samples_per_s, wall_s;
} cmp_epoch_t;

/* One strategy of the comparison: what runs and what came of it. */
typedef struct cmp_run {
    char        spec[32];  /* as given: "ps:2x2" */
    char        stem[48];  /* of its files: "ps-2x2" */
    char        plugin[32];/* the strategy plugin: "ps" */
    cmp_kind_t  kind;
    int         workers, ps;
    int         ntasks;    /* processes that train or serve */
    char        log[4096], csv[4096];
    int         ran;       /* started (an interrupted comparison stops) */
    int         code;      /* exit code, 128 + N for signal N */
    int         timed_out;
    double      wall_s;    /* start to reaped, measured here */
    long        maxrss_kib;/* wait4: the largest process of the job */
    cmp_epoch_t *ep;
    int         nep;
    char        why[256];  /* a failure: what the exit code does not say */
    char        note[160]; /* e.g. the straggler is not in this job */
} cmp_run_t;

typedef struct cmp_opts {
    const char  *config;       /* -c, or NULL: the compiled-in defaults */
    const char **sets;         /* --set, in order */
    int          nsets;
    int          epochs;       /* 0: the job's */
    const char  *out;          /* the directory of logs, CSVs and the plot */
    char         straggler[48];/* a task name, "" without --straggler */
    int          straggler_ms;
    const char  *link;         /* a tc rate ("500mbit"), NULL: none */
    int          timeout_s;    /* of one run */
} cmp_opts_t;

/* Does the job of `r` have a task named `task` ("worker:1")? */
int cli_compare_has_task(const cmp_run_t *r, const char *task);

/* Check that a link of `rate` (rate_bps bits/s) can be made here (a
 * network namespace with its loopback shaped by tc htb) and measure it;
 * *bps: bits/s through it, 0 when not measured. 0, or -1 after a message
 * saying why not. */
int cli_compare_link_probe(const char *rate, double rate_bps, double *bps);

/* Run one strategy to its end (or opts->timeout_s), its output in r->log;
 * then read its metrics. `stop`: a signal number once the user asked to
 * stop (the run gets SIGTERM and is reaped). 0, or -1 when it could not be
 * started at all. */
int cli_compare_run(const cmp_opts_t *o, cmp_run_t *r,
                    volatile sig_atomic_t *stop);

/* Read a metrics CSV (by its header's column names) into r->ep. 0, or -1
 * with r->why set. */
int cli_compare_read_metrics(const char *path, cmp_run_t *r);

#endif
