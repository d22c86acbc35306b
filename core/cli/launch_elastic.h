/* strata launch --elastic: the job's membership service (launch_elastic.c).
 * Launch outlives its workers, so it hosts the service that forms each
 * generation of an elastic mwms job; launch's supervision loop polls the
 * service's sockets beside the tasks' pipes and tells it which worker
 * processes it has running. */
#ifndef STRATA_CLI_LAUNCH_ELASTIC_H
#define STRATA_CLI_LAUNCH_ELASTIC_H

#include <poll.h>

#define ESVC_MAX_FDS 65 /* the listening socket and 64 connections */

typedef struct esvc esvc_t;

/* Listen for a job of at most `max` workers of which `min` must train:
 * on 127.0.0.1 (a free port) with a random token when host is NULL, else
 * at exactly host:port (node 0 of a job across machines, --nnodes) with
 * `token`, which every machine's launch derives alike. Sets STRATA_ELASTIC
 * and STRATA_ELASTIC_TOKEN for the tasks launch starts afterwards. NULL
 * after a message. */
esvc_t *esvc_open(int min, int max, const char *host, int port,
                  const char *token);
void    esvc_close(esvc_t *s);
/* The job has CURVE keys: from now on each worker is authenticated with
 * the key derived from its secret key (esvc_worker_cert), not the token.
 * Before any worker starts. */
void    esvc_secure(esvc_t *s);
/* worker:index's secret certificate (keygen's text): 0, or -1 (no
 * "secret-key" of Z85 in it). */
int     esvc_worker_cert(esvc_t *s, int index, const char *cert);

/* launch started (1) or reaped (0) the process of worker:index. */
void esvc_alive(esvc_t *s, int index, int alive);
/* worker:index runs on another machine, under its own launch: expected
 * until its connection closes, and again once it joins. */
void esvc_remote(esvc_t *s, int index);

/* The service's descriptors, for launch's poll(): at most ESVC_MAX_FDS. */
int  esvc_pollfds(esvc_t *s, struct pollfd *pfd, int cap);
/* Serve what poll() found on them (the same pfd entries, in order), then
 * run the service's clocks. Returns 1 once the service has given up on
 * the job (fewer than min workers for longer than the rendezvous timeout),
 * after printing why, once; else 0. */
int  esvc_serve(esvc_t *s, const struct pollfd *pfd, int n);

/* "MIN:MAX", 1 <= MIN <= MAX <= max_tasks; -1 after a message. */
int  esvc_parse(const char *v, int max_tasks, int *min, int *max);
/* The job launch starts (argv of `strata train`, *nt entries, room for 6
 * more) must be an mwms job: checked through the public API (one error
 * line otherwise: -1); then the --set of [strategy.mwms] elastic,
 * min_workers and max_workers are appended. */
int  esvc_job_args(char **targv, int *nt, int min, int max);

/* Connections dropped as strangers (wrong token, garbage, too slow). */
long esvc_strangers(const esvc_t *s);

#endif
