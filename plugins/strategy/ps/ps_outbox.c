/* ps.so -- a ps task's answers in pieces (wire v9, ps_wire.h: Pieces).
 *
 * A whole pull of a ps that holds a large table (a coordinator's, to
 * evaluate; a worker's of a dense model), or a part of its state, is
 * longer than one message may be. It goes as pieces of piece_bytes, and
 * from a thread of its own: at 100 Mbit/s a gigabyte takes minutes, and
 * the ps serves the workers' pushes meanwhile, as it did when the
 * transport queued the answer whole. The thread sends one piece of one
 * puller's answer at a time, pullers in turn, each answer from a snapshot
 * the ps took when asked (one version of the values). A new answer for a
 * puller replaces the one it had not received whole: that puller asked
 * again (its request was resent) or has moved on. A piece waits for room
 * on its link as long as the puller waits for the answer (timeout_s and
 * the answer's time at 100 Mbit/s: a full window drains slowly), in slices
 * that let a newer answer or the ps's end take over; past that the answer
 * is dropped (the puller asks again). A piece the transport can never
 * take (longer than its window) ends the ps. */
#include <stdlib.h>
#include <string.h>

#include "ps.h"

typedef struct answer {
    ps_hdr_t h;       /* every piece's header, but count, at and tag    */
    float   *vals;    /* NULL: none                                      */
    uint32_t total;   /* words                                           */
    uint32_t next;    /* the first word not sent                         */
    int64_t  until;   /* ps_now_ms: when the puller no longer waits      */
} answer_t;

struct ps_outbox {
    pthread_t       thread;
    int             started, stop;
    pthread_mutex_t lock;
    pthread_cond_t  cond;
    answer_t       *cur;     /* per member: being sent (the thread's)    */
    answer_t       *queued;  /* per member: handed over, not begun yet   */
    int             turn;    /* the member whose piece goes next         */
    atomic_int      failed;  /* a piece no message can hold: ECONFIG     */
    int64_t         pieces, replaced, dropped;
};

/* The next member, from `from` on, with an answer to send, or -1. Lock
 * held: what was queued for it becomes its current answer. */
static int next_member(ps_t *p, ps_outbox_t *o, int from)
{
    for (int k = 0; k < p->nmembers; k++) {
        int m = (from + k) % p->nmembers;
        if (o->queued[m].vals) {
            if (o->cur[m].vals)
                o->replaced++;
            free(o->cur[m].vals);
            o->cur[m] = o->queued[m];
            o->queued[m].vals = NULL;
        }
        if (o->cur[m].vals)
            return m;
    }
    return -1;
}

/* Lock held: the ps is ending, or a newer answer for m waits. */
static int superseded(const ps_outbox_t *o, int m)
{
    return o->stop || o->queued[m].vals != NULL;
}

/* One piece of answer a to member m, waiting for room on the link until
 * the answer's deadline, a slice at a time. STRATA_EAGAIN: superseded. */
static int send_piece(ps_t *p, ps_outbox_t *o, int m, const answer_t *a,
                      uint32_t n)
{
    ps_hdr_t h = a->h;
    h.at = a->next;
    h.total = a->total;
    for (;;) {
        int64_t left = a->until - ps_now_ms();
        if (left <= 0)
            return STRATA_ETIMEDOUT;
        /* slices of 10 s: the transport warns of a peer that takes
         * nothing that long (100 Mbit/s drains a 16 MiB window in 1.4 s) */
        int rc = ps_net_send(p, m, &h, a->vals + a->next, n,
                             left < 10000 ? (int)left : 10000);
        if (rc != STRATA_ETIMEDOUT)
            return rc;
        pthread_mutex_lock(&o->lock);
        int gone = superseded(o, m);
        pthread_mutex_unlock(&o->lock);
        if (gone)
            return STRATA_EAGAIN;
    }
}

static void *sender(void *arg)
{
    ps_t *p = arg;
    ps_outbox_t *o = p->out;
    uint32_t piece = ps_piece_words(p);
    pthread_mutex_lock(&o->lock);
    while (!o->stop) {
        int m = next_member(p, o, o->turn);
        if (m < 0) {
            pthread_cond_wait(&o->cond, &o->lock);
            continue;
        }
        answer_t a = o->cur[m]; /* only this thread changes cur */
        pthread_mutex_unlock(&o->lock);
        uint32_t n = a.total - a.next < piece ? a.total - a.next : piece;
        int rc = send_piece(p, o, m, &a, n);
        pthread_mutex_lock(&o->lock);
        o->turn = (m + 1) % p->nmembers;
        if (rc == STRATA_EAGAIN)
            continue; /* the newer answer replaces it, or the ps ends */
        o->pieces += rc == STRATA_OK;
        if (rc == STRATA_OK && a.next + n < a.total) {
            o->cur[m].next = a.next + n;
            continue;
        }
        if (rc == STRATA_EINVAL) {
            (void)ps_too_long(p, m, n);
            atomic_store(&o->failed, STRATA_ECONFIG);
        } else if (rc != STRATA_OK) {
            o->dropped++;
            ps_log(p, STRATA_LOG_DEBUG, "%s: the answer of %u values to %s "
                   "stopped at value %u (%s): it asks again",
                   ps_name(p, p->self), a.total, ps_name(p, m), a.next,
                   ps_strerror(rc));
        }
        free(o->cur[m].vals);
        o->cur[m].vals = NULL;
    }
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

int ps_too_long(ps_t *p, int to, size_t n)
{
    ps_log(p, STRATA_LOG_ERROR, "%s: the answer to %s, %lld bytes, does not "
           "fit one message of the transport: raise [transport.zmq] "
           "window_bytes above it, or lower [strategy.ps] piece_bytes (%lld) "
           "below it", ps_name(p, p->self), ps_name(p, to),
           (long long)PS_HDR_SIZE + 4 * (long long)n,
           (long long)p->cfg.piece_bytes);
    return STRATA_ECONFIG;
}

int ps_outbox_failed(ps_t *p)
{
    return p->out ? atomic_load(&p->out->failed) : STRATA_OK;
}

int ps_outbox_start(ps_t *p)
{
    ps_outbox_t *o = calloc(1, sizeof *o);
    if (!o)
        return STRATA_ENOMEM;
    p->out = o;
    o->cur = calloc((size_t)p->nmembers, sizeof *o->cur);
    o->queued = calloc((size_t)p->nmembers, sizeof *o->queued);
    if (!o->cur || !o->queued)
        return STRATA_ENOMEM;
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->cond, NULL);
    if (pthread_create(&o->thread, NULL, sender, p) != 0) {
        pthread_cond_destroy(&o->cond);
        pthread_mutex_destroy(&o->lock);
        return STRATA_ENOMEM;
    }
    o->started = 1;
    return STRATA_OK;
}

void ps_outbox_stop(ps_t *p)
{
    ps_outbox_t *o = p->out;
    if (!o)
        return;
    if (o->started) {
        pthread_mutex_lock(&o->lock);
        o->stop = 1;
        pthread_cond_signal(&o->cond);
        pthread_mutex_unlock(&o->lock);
        pthread_join(o->thread, NULL);
        pthread_cond_destroy(&o->cond);
        pthread_mutex_destroy(&o->lock);
        if (o->pieces > 0)
            ps_log(p, STRATA_LOG_INFO, "%s: %lld pieces sent, %lld answers "
                   "replaced by a newer request, %lld cut",
                   ps_name(p, p->self), (long long)o->pieces,
                   (long long)o->replaced, (long long)o->dropped);
    }
    for (int m = 0; m < p->nmembers && o->cur; m++) {
        free(o->cur[m].vals);
        if (o->queued)
            free(o->queued[m].vals);
    }
    free(o->cur);
    free(o->queued);
    free(o);
    p->out = NULL;
}

int ps_outbox_put(ps_t *p, int member, const ps_hdr_t *h, float *vals,
                  uint32_t total)
{
    ps_outbox_t *o = p->out;
    if (!o || !o->started || member < 0 || member >= p->nmembers) {
        free(vals);
        return STRATA_EINVAL;
    }
    pthread_mutex_lock(&o->lock);
    if (o->queued[member].vals)
        o->replaced++;
    free(o->queued[member].vals);
    o->queued[member] = (answer_t){
        .h = *h, .vals = vals, .total = total,
        .until = ps_now_ms() + p->timeout_ms +
                 ps_on_wire_ms(4 * (int64_t)total) };
    pthread_cond_signal(&o->cond);
    pthread_mutex_unlock(&o->lock);
    return STRATA_OK;
}
