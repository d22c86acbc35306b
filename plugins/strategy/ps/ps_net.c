/* ps.so -- the group of all tasks and its messages.
 *
 * The group: one member per task of the cluster, in the cluster's own
 * order (chief, workers by index, ps by index, evaluator), so member i is
 * env->cluster->tasks[i] and every task numbers the others alike. It is
 * opened with the STRATA_GROUP_P2P flag, which asks the transport for point
 * to point only (zmq.so: no ring, no start-up rendezvous; tasks may start,
 * die and restart in any order). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ps.h"
#include "../common/replicas.h"

#define NAME_LEN 48

int64_t ps_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ps_aborted(ps_t *p, const ps_msg_t *m)
{
    int diverged = m->h.a == STRATA_EDIVERGED;
    ps_log(p, diverged ? STRATA_LOG_INFO : STRATA_LOG_ERROR, "%s: the "
           "coordinator %s stopped the job (%s)", ps_name(p, p->self),
           ps_name(p, m->from), ps_strerror((int)m->h.a));
    return diverged ? STRATA_EDIVERGED : STRATA_EPEER;
}

const char *ps_strerror(int rc)
{
    switch (rc) {
    case STRATA_OK:
        return "success";
#define PS_ERR_(name, val, str) case STRATA_##name: return str;
    STRATA_ERRNO_MAP(PS_ERR_)
#undef PS_ERR_
    default:
        return "unknown error";
    }
}

const char *ps_name(const ps_t *p, int member)
{
    return member >= 0 && member < p->nmembers ? p->names[member] : "?";
}

const char *ps_addr(const ps_t *p, int member)
{
    return member >= 0 && member < p->nmembers && p->addrs[member]
               ? p->addrs[member] : "(no address)";
}

static int alloc_tables(ps_t *p, int n)
{
    p->addrs = calloc((size_t)n, sizeof *p->addrs);
    p->names = calloc((size_t)n, sizeof *p->names);
    p->name_buf = calloc((size_t)n, NAME_LEN);
    p->member_ps = malloc((size_t)n * sizeof *p->member_ps);
    p->member_worker = malloc((size_t)n * sizeof *p->member_worker);
    p->ps_member = malloc((size_t)n * sizeof *p->ps_member);
    p->worker_member = malloc((size_t)n * sizeof *p->worker_member);
    if (!p->addrs || !p->names || !p->name_buf || !p->member_ps
        || !p->member_worker || !p->ps_member || !p->worker_member)
        return STRATA_ENOMEM;
    for (int i = 0; i < n; i++)
        p->member_ps[i] = p->member_worker[i] = p->ps_member[i] =
            p->worker_member[i] = -1;
    return STRATA_OK;
}

static int need_more(ps_t *p, const strata_cluster_t *c)
{
    ps_log(p, STRATA_LOG_ERROR, "ParameterServerStrategy needs at least one "
           "ps task and one worker besides the coordinator; the cluster (from "
           "%s) has %d ps and %d worker%s besides %s (try strata launch --ps 2 "
           "--workers 3 --chief -c etc/ps.ini)", c->source ? c->source : "?",
           p->nps, p->nworkers, p->nworkers == 1 ? "" : "s",
           p->coord >= 0 ? p->names[p->coord] : "no coordinator");
    return STRATA_ECONFIG;
}

int ps_net_members(ps_t *p)
{
    const strata_cluster_t *c = p->env->cluster;
    if (!c || c->ntasks < 1 || c->self < 0 || c->self >= c->ntasks) {
        ps_log(p, STRATA_LOG_ERROR, "no cluster: ParameterServerStrategy "
               "runs a job of ps tasks, workers and a coordinator");
        return STRATA_ECONFIG;
    }
    int n = c->ntasks, rc = alloc_tables(p, n);
    if (rc != STRATA_OK)
        return rc;
    p->nmembers = n;
    p->self = c->self;
    p->coord = -1;
    for (int i = 0; i < n; i++) {
        const strata_task_t *t = &c->tasks[i];
        char *name = p->name_buf + (size_t)i * NAME_LEN;
        snprintf(name, NAME_LEN, "%s:%d", t->type ? t->type : "?", t->index);
        p->names[i] = name;
        p->addrs[i] = t->address;
        if (t->rank == 0) {
            p->coord = i;
        } else if (t->rank > 0 && t->rank <= n) {
            p->member_worker[i] = t->rank - 1;
            p->worker_member[t->rank - 1] = i;
            p->nworkers++;
        } else if (t->type && !strcmp(t->type, "ps") && t->index >= 0
                   && t->index < n && p->ps_member[t->index] < 0) {
            p->member_ps[i] = t->index;
            p->ps_member[t->index] = i;
            p->nps++;
        }
    }
    for (int j = 0; j < p->nps; j++)
        if (p->ps_member[j] < 0) {
            ps_log(p, STRATA_LOG_ERROR, "ps tasks are not numbered 0..%d",
                   p->nps - 1);
            return STRATA_ECONFIG;
        }
    for (int w = 0; w < p->nworkers; w++)
        if (p->worker_member[w] < 0)
            return STRATA_EINVAL;
    if (p->nps < 1 || p->nworkers < 1 || p->coord < 0)
        return need_more(p, c);
    for (int i = 0; i < n; i++)
        if (!p->addrs[i]) {
            ps_log(p, STRATA_LOG_ERROR, "task %s has no address (the cluster "
                   "from %s must name every task's host:port)", p->names[i],
                   c->source ? c->source : "?");
            return STRATA_ECONFIG;
        }
    p->role = p->self == p->coord ? PS_ROLE_COORD
              : p->member_worker[p->self] >= 0 ? PS_ROLE_WORKER
              : p->member_ps[p->self] >= 0 ? PS_ROLE_PS : PS_ROLE_IDLE;
    return STRATA_OK;
}

int ps_net_open(ps_t *p)
{
    const strata_group_t g = {
        .struct_size = sizeof g, .scope = STRATA_SCOPE_WORLD,
        .size = p->nmembers, .rank = p->self, .nlocal = 1,
        .timeout_ms = p->timeout_ms, .devices = &p->cpu, .addrs = p->addrs,
        .names = p->names, .tag = "ps", .flags = STRATA_GROUP_P2P,
    };
    return p->host->t_open(p->hc, &g, &p->net);
}

uint64_t ps_net_req(ps_t *p)
{
    return atomic_fetch_add(&p->next_req, 1) + 1;
}

int ps_net_send(ps_t *p, int member, ps_hdr_t *h, const float *payload,
                uint32_t count, int timeout_ms)
{
    unsigned char hb[PS_HDR_SIZE];
    h->sender = p->self;
    h->incarnation = p->incarnation;
    ps_hdr_count(h, count);
    ps_wire_pack(h, hb);
    return p->host->t_send(p->hc, p->net, member, hb, sizeof hb, payload,
                           (size_t)count * sizeof(float),
                           timeout_ms > 0 ? timeout_ms : p->timeout_ms);
}

static void malformed(ps_t *p, int from, const char *why)
{
    long long n = atomic_fetch_add(&p->malformed, 1) + 1;
    if (n <= 10 || n % 1000 == 0)
        ps_log(p, STRATA_LOG_WARN, "%s: dropped a malformed message from %s: "
               "%s (%lld so far)", ps_name(p, p->self),
               from >= 0 ? ps_name(p, from) : "?", why, n);
}

int ps_net_recv(ps_t *p, int64_t deadline, ps_msg_t *m)
{
    for (;;) {
        int64_t left = deadline - ps_now_ms();
        if (left <= 0)
            return STRATA_ETIMEDOUT;
        int peer = -1;
        size_t len = 0;
        int rc = p->host->t_recv(p->hc, p->net, &peer, p->rbuf, p->rcap, &len,
                                 (int)(left > 0x7fffffff ? 0x7fffffff : left));
        if (rc == STRATA_EPROTO) { /* longer than any message of ours */
            malformed(p, peer, "longer than any ps message");
            continue;
        }
        if (rc != STRATA_OK)
            return rc;
        const char *why = NULL;
        if (peer < 0 || peer >= p->nmembers)
            why = "sender is not a member";
        else if (ps_wire_unpack(p->rbuf, len, &m->h, &m->payload, &why) == 0
                 && m->h.sender != peer)
            why = "sender field differs from the transport's sender";
        if (why) {
            malformed(p, peer, why);
            continue;
        }
        m->from = peer;
        return STRATA_OK;
    }
}

int ps_scatter_at(ps_t *p, int ps, uint32_t at, const unsigned char *payload,
                  uint32_t count, float *dst, int32_t device)
{
    size_t lo = at, hi = (size_t)at + count, w = 0; /* words of the whole */
    for (int i = 0; i < p->place.n && w < hi; i++) {
        const ps_shard_t *s = &p->place.shard[i];
        if (s->ps != ps)
            continue;
        size_t w0 = w; /* the shard's words of the whole: [w0, w) */
        w += s->count;
        size_t a = w0 > lo ? w0 : lo, b = w < hi ? w : hi;
        if (a >= b)
            continue;
        int rc = p->host->copy(p->hc, device, dst + s->offset + (a - w0),
                               p->cpu, payload + 4 * (a - lo),
                               (b - a) * sizeof(float));
        if (rc != STRATA_OK)
            return rc;
    }
    return STRATA_OK;
}

int ps_scatter(ps_t *p, int ps, const unsigned char *payload, float *dst,
               int32_t device)
{
    return ps_scatter_at(p, ps, 0, payload, (uint32_t)p->place.ps_count[ps],
                         dst, device);
}

int ps_gather(ps_t *p, int ps, const float *src, int32_t device, float *out)
{
    size_t at = 0;
    for (int i = 0; i < p->place.n; i++) {
        const ps_shard_t *s = &p->place.shard[i];
        if (s->ps != ps)
            continue;
        int rc = p->host->copy(p->hc, p->cpu, out + at, device,
                               src + s->offset, s->count * sizeof(float));
        if (rc != STRATA_OK)
            return rc;
        at += s->count;
    }
    return STRATA_OK;
}
