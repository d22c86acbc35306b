/* strata CLI -- subcommands in their own files. */
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

#include <strata/strata.h>

/* The text callback of the commands (main.c): a run's text to stdout,
 * flushed at once. */
void cli_print_text(void *user, const char *text);
/* strata launch [...]: returns the process exit code. */
int cli_launch(int argc, char **argv);
/* Re-executes the command once with OPENBLAS_CORETYPE set where the BLAS
 * runs weaker kernels than the CPU allows (blas_reexec.c). */
void cli_blas_reexec(char **argv);

/* strata launch --nnodes N --node-rank K --rendezvous HOST:PORT
 * (launch_nodes.c): one launch per machine, one job of N x M workers. */
typedef struct cli_nodes {
    int  nnodes;     /* 0: one machine (TF_CONFIG)                 */
    int  node_rank;  /* -1 until given                             */
    int  per_node;   /* -n M                                       */
    char host[256];  /* of --rendezvous, without [brackets]        */
    int  port;
} cli_nodes_t;
#define CLI_NODES_INIT { 0, -1, 0, "", 0 }

/* argv[*i] is --nnodes, --node-rank or --rendezvous: takes it and its value
 * (*i moves past it) and returns 1, or -1 after a message; 0: none of them. */
int cli_nodes_arg(cli_nodes_t *n, int argc, char **argv, int *i);
/* Once every flag is read: the combination, and for several machines the
 * job's [security] (targv[0..nt): strata train -c/--set ...); 0 or -1
 * after a message. */
int cli_nodes_check(cli_nodes_t *n, int workers, int ps, int chief,
                    char **targv, int nt);
/* Global index of this machine's first worker (0 without --nnodes). */
int cli_nodes_first(const cli_nodes_t *n);
/* In a child, before exec: torchrun's variables for worker `index`; the
 * sources that would win over them cleared. 0 or -1. */
int cli_nodes_env(const cli_nodes_t *n, int index);
/* --elastic across machines: this machine's address on the route to node
 * 0 (the rendezvous host), numeric, into out[cap]; 0 or -1 after a message. */
int cli_nodes_self_host(const cli_nodes_t *n, char *out, size_t cap);
/* --elastic across machines: the token of node 0's membership service,
 * the same on every machine: STRATA_ELASTIC_TOKEN, else a hash of the
 * workers' secret keys in [security] keys. 0 or -1 after a message. */
int cli_nodes_token(const cli_nodes_t *n, char **targv, int nt, char *out,
                    size_t cap);
/* In a child of an elastic job across machines, before exec: TF_CONFIG
 * for worker `index` at self_host:port, torchrun's variables cleared. */
int cli_nodes_elastic_env(const cli_nodes_t *n, int index,
                          const char *self_host, int port);
/* The job's configuration as every task will see it: -c FILE and the
 * --set of targv[2..nt) (strata train's argv), over the environment's
 * STRATA_* keys. 0, or -1 after libstrata said what is wrong. */
int cli_job_ctx(char **targv, int nt, strata_ctx_t **out);

/* strata launch --tasks TYPE:INDEX,... (launch_tasks.c): the tasks of this
 * machine in a job whose [cluster] lists every task's address. */
#define CLI_TASKS_MAX 64
typedef struct cli_tasks {
    int  n;
    int  type[CLI_TASKS_MAX];   /* 0 chief, 1 worker, 2 ps, 3 evaluator */
    int  index[CLI_TASKS_MAX];
    char name[CLI_TASKS_MAX][24];
    char addr[CLI_TASKS_MAX][264];
    int  has_ps, has_chief;     /* of the whole [cluster]               */
} cli_tasks_t;
/* Parses the --tasks value; 0 or -1 after a message. */
int cli_tasks_arg(cli_tasks_t *ts, const char *v);
/* Each task against the job's [cluster] (names and addresses filled in),
 * and the job's keys (several machines); 0 or -1 after a message. */
int cli_tasks_check(cli_tasks_t *ts, char **targv, int nt);
/* "chief", "worker", "ps", "evaluator". */
const char *cli_tasks_type(int t);
/* In a child, before exec: STRATA_CLUSTER_TASK = name, the cluster sources
 * that would win over [cluster] cleared. 0 or -1. */
int cli_tasks_env(const char *name);

/* A subcommand's own flag: "--name VALUE" / "--name=VALUE" into *value,
 * or, value NULL, a switch "--name" that sets *on to 1. */
typedef struct cli_flag {
    const char  *name;
    const char **value;
    int         *on;
} cli_flag_t;
/* Takes the flags f[0..nf) out of argv[0..argc) (flags.c); the other
 * arguments go, in order, to rest[] (argc + 1 slots, NULL-ended) and
 * *nrest. A value missing or given twice: one line and `usage` on stderr,
 * returns 2 (bad command line); else 0. */
int cli_take_flags(int argc, char **argv, const cli_flag_t *f, int nf,
                   const char *usage, char **rest, int *nrest);

/* strata predict (predict.c): the flags, checked by cli_predict_check
 * (one line and `usage` on stderr, 2, when one is missing or bad; else 0,
 * batch_size set), then the call: cli_predict returns strata_predict's
 * code, its error said in one line. */
typedef struct cli_predict {
    const char *checkpoint, *data, *ids, *out, *batch;
    int         logits;
    int         batch_size;   /* of batch; 0: [train] batch_size */
} cli_predict_t;
int cli_predict_check(cli_predict_t *p, const char *usage);
int cli_predict(strata_ctx_t *ctx, const cli_predict_t *p);

/* strata compare [...]: returns the process exit code. */
int cli_compare(int argc, char **argv);

/* strata config [...] (config_cmd.c): returns 0 or a STRATA_E* code for
 * main's exit code (the detail already printed). */
int cli_config(int argc, char **argv);

/* strata keygen [...]: returns the process exit code. */
int cli_keygen(int argc, char **argv);
/* Make `dir` (0700) or check an existing one is not writable by others;
 * 0 or 1 after a message. */
int cli_keygen_dir(const char *dir);
/* One task's key pair (TYPE-INDEX.key and .key_secret) in dir; 0 or 1. */
int cli_keygen_task(const char *dir, const char *type, long index, int force);
/* A new key pair for task TYPE:INDEX as its public and secret certificates
 * (text of at most CLI_CERT_MAX bytes each, NUL-terminated); 0 or -1 after
 * a message. */
#define CLI_CERT_MAX 1024
int cli_keygen_pair(const char *type, long index, char *pub_cert,
                    char *sec_cert, size_t cap);

/* launch_keys.c: launch's own keys for its n tasks TYPE:INDEX, one sealed
 * memfd each (close-on-exec) into fd[n]; 0, or -1 after a message. */
int cli_launch_keys(int n, const char *const type[], const int index[],
                    int fd[]);
/* The same, and each task's secret certificate to on_secret(user, i,
 * cert) (NULL: none) before it is wiped. */
int cli_launch_keys_seen(int n, const char *const type[], const int index[],
                         int fd[], void (*on_secret)(void *, int,
                                                     const char *),
                         void *user);
/* [security] mode and keys of the job (targv: strata train's argv, nt
 * entries), into mode[cap] and keys[cap]; -1 after libstrata said what is
 * wrong. */
int cli_job_security(char **targv, int nt, char *mode, char *keys,
                     size_t cap);
/* In a task's child, before exec: its memfd (-1: none) survives the exec
 * and is named in the environment; 0 or -1. */
int cli_launch_keys_pass(int fd);
/* Closes the n fds (-1 skipped) and sets them to -1. */
void cli_launch_keys_close(int fd[], int n);

#endif
