/* zmq.so -- all-reduce through shared memory, for a group whose members
 * all run on this host.
 *
 * Which groups. Every address is ipc://, or loopback tcp (127.x, localhost,
 * [::1]), or every member names the same host; n <= SHM_MAX_MEMBERS; and
 * `shm = auto` on every member (off anywhere turns it off everywhere).
 * Which addresses are local is decided from the address list, which every
 * member has the same, so all members take part in the set-up or none.
 *
 * Set-up (after the HELLOs, before the start-up barrier): rank 0 creates
 * a POSIX shm segment named from its pid and a random nonce (O_EXCL, mode
 * 0600, space reserved with posix_fallocate so that a full /dev/shm is an
 * error here rather than a SIGBUS later) and offers it right (SHM trip 1);
 * each member maps it, checks magic, nonce and size, and passes the offer
 * on, with aux = "everyone so far mapped it". When the offer is back, rank
 * 0 unlinks the name (nothing is left behind from here on, whatever
 * happens) and sends the decision round (trip 2). A member that cannot map
 * it just says so: the group uses the zmq path.
 *
 * Layout: a header page (magic, nonce, the futex word `bell`, the abort
 * word), one 128-byte record per member (counters `posted` and `done`, on
 * their own cache lines, and what collective each slot set holds), then
 * two slot sets of n slots of slot_bytes each.
 *
 * All-reduce: the buffer goes through in rounds of slot_bytes. Round g
 * uses slot set g % 2: a member waits until every member finished reading
 * round g - 2 (done >= g - 1), copies its piece into its slot, publishes
 * posted = g + 1, waits until every member posted round g, and then adds
 * the n pieces in rank order straight into its own buffer (its own piece
 * read from the buffer itself): every member computes the same sum of the
 * same inputs, so all end bitwise equal, and one wait per round suffices.
 * It publishes done = g + 1. Round numbers only grow, so nothing is reset
 * between collectives; every member runs the same rounds because it makes
 * the same calls, and each slot set records the collective's seq, kind,
 * count and op (or root) so that a member making another call is refused
 * (EPROTO). With compressed gradients a member packs its piece into its
 * slot in 16 bits and everyone adds the n decoded slots, its own included,
 * in rank order (rounds then hold twice the elements). Broadcast and
 * barrier use the same rounds: the root's piece is
 * copied out by the others; a barrier is one round without data. Once the
 * segment is up every collective of the group goes through it.
 *
 * Waits spin briefly (only when there are at least as many CPUs as
 * members), then yield, then sleep on the futex word, every member ringing
 * it after each publication. While waiting they watch the control plane,
 * which zmq still carries (strz_ctrl_poll: ctl(ABORT), dropped neighbours,
 * ABORTs), the shared abort word, where the first failure of the group is
 * published so that every member names the same peer, and the deadline:
 * past it, the member blamed is the lowest rank that has not published
 * what the wait needs, which every waiter sees alike. */
#include "strz.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC       0x314d48535a525453ull /* "STRZSHM1" */
#define SHM_MAX_MEMBERS 64
#define SHM_NAME_MAX    64
#define SHM_SLOT_MAX    (1u << 20)   /* bytes per member per round        */
#define SHM_TOTAL_MAX   (32u << 20)  /* bytes of all slots together       */
#define SHM_HEAD        4096u
#define SHM_SPIN        1000         /* pause loops before yielding       */
#define SHM_YIELDS      64           /* sched_yield()s before sleeping    */
#define SHM_NAP_MS      2            /* futex sleep between control looks */
#define SHM_CTRL_NS     1000000      /* control plane looked at every ms  */

typedef struct shm_head {
    uint64_t magic, nonce, size, slot_bytes;
    uint32_t n, pad;
    _Alignas(128) atomic_uint bell;     /* futex word: rung on progress    */
    atomic_uint sleepers;               /* members asleep on `bell`        */
    _Alignas(128) atomic_ullong abort_word; /* 0, or code << 32 | peer + 1 */
} shm_head_t;

typedef struct shm_set_info { /* the collective a slot set belongs to */
    uint64_t seq, total;
    int32_t  kind, arg;  /* STRZ_DATA/BCAST/BARRIER; reduce op or root */
} shm_set_info_t;

typedef struct shm_member {
    _Alignas(128) atomic_ullong posted; /* rounds whose piece is in a slot */
    shm_set_info_t info[2];
    _Alignas(64) atomic_ullong done;    /* rounds this member finished     */
} shm_member_t;

struct strz_shm {
    unsigned char *base;
    size_t         size, slot_bytes;
    shm_head_t    *head;
    shm_member_t  *mem;
    unsigned char *slots;
    uint64_t       round;   /* rounds so far (the same on every member) */
    int64_t        next_ctrl; /* ns: when collectives look at zmq again */
    int            spin;
    int            creator, unlinked;
    char           name[SHM_NAME_MAX];
};

_Static_assert(sizeof(shm_head_t) <= SHM_HEAD, "shm header too large");
_Static_assert(sizeof(shm_member_t) == 128, "one member record: 128 bytes");

/* ---- which groups ---------------------------------------------------- */

static int loopback(const char *ep)
{
    if (strncmp(ep, "ipc://", 6) == 0)
        return 1;
    return strncmp(ep, "tcp://127.", 10) == 0
           || strncmp(ep, "tcp://localhost:", 16) == 0
           || strncmp(ep, "tcp://[::1]:", 12) == 0;
}

/* The host part of "tcp://host:port" (length), or -1. */
static int host_len(const char *ep)
{
    const char *colon = strrchr(ep, ':');
    if (strncmp(ep, "tcp://", 6) != 0 || colon == NULL || colon < ep + 6)
        return -1;
    return (int)(colon - ep - 6);
}

static int all_local(const strz_ctx_t *c)
{
    int same = 1, loop = 1, l0 = host_len(c->ep[0]);
    for (int i = 0; i < c->n; i++) {
        int li = host_len(c->ep[i]);
        loop &= loopback(c->ep[i]);
        same &= l0 > 0 && li == l0 && memcmp(c->ep[i], c->ep[0], (size_t)l0 + 6) == 0;
    }
    return loop || same;
}

/* ---- the segment ------------------------------------------------------ */

static size_t slots_offset(int n)
{
    size_t recs = (size_t)n * sizeof(shm_member_t);
    return SHM_HEAD + (recs + 4095) / 4096 * 4096;
}

static size_t seg_size(int n, size_t slot_bytes)
{
    return slots_offset(n) + 2 * (size_t)n * slot_bytes;
}

static size_t pick_slot_bytes(int n)
{
    size_t s = SHM_TOTAL_MAX / (2 * (size_t)n);
    s = s > SHM_SLOT_MAX ? SHM_SLOT_MAX : s;
    return s / 65536 * 65536;
}

static void segment_layout(struct strz_shm *s, int n)
{
    s->head = (shm_head_t *)(void *)s->base;
    s->mem = (shm_member_t *)(void *)(s->base + SHM_HEAD);
    s->slots = s->base + slots_offset(n);
}

static unsigned char *slot(const struct strz_shm *s, int n, uint64_t g,
                           int member)
{
    return s->slots + ((size_t)(g & 1) * (size_t)n + (size_t)member)
                      * s->slot_bytes;
}

/* Rank 0: create, size, map and initialise. Logs why it cannot. */
static struct strz_shm *create(strz_ctx_t *c, uint64_t *nonce)
{
    struct strz_shm *s = calloc(1, sizeof *s);
    int fd = -1, e;

    if (s == NULL)
        return NULL;
    *nonce = strz_nonce(c);
    s->slot_bytes = pick_slot_bytes(c->n);
    s->size = seg_size(c->n, s->slot_bytes);
    snprintf(s->name, sizeof s->name, "/strz-%ld-%016llx", (long)getpid(),
             (unsigned long long)*nonce);
    fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        goto fail;
    s->creator = 1;
    if ((e = posix_fallocate(fd, 0, (off_t)s->size)) != 0) {
        errno = e;
        goto fail;
    }
    s->base = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (s->base == MAP_FAILED) {
        s->base = NULL;
        goto fail;
    }
    close(fd);
    segment_layout(s, c->n);
    s->head->nonce = *nonce;
    s->head->size = s->size;
    s->head->slot_bytes = s->slot_bytes;
    s->head->n = (uint32_t)c->n;
    atomic_store(&s->head->abort_word, 0);
    s->head->magic = SHM_MAGIC;
    return s;
fail:
    strz_log(c, STRATA_LOG_INFO, "no shared memory (%s: %s): using zmq",
             s->name, strerror(errno));
    if (fd >= 0)
        close(fd);
    if (s->creator)
        shm_unlink(s->name);
    free(s);
    return NULL;
}

/* Any other rank: map the offered segment and check it. */
static struct strz_shm *attach(strz_ctx_t *c, const char *name,
                               uint64_t nonce, uint64_t slot_bytes)
{
    struct strz_shm *s = calloc(1, sizeof *s);
    struct stat st;
    const char *why = NULL;
    int fd = -1;

    if (s == NULL)
        return NULL;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->slot_bytes = (size_t)slot_bytes;
    s->size = seg_size(c->n, s->slot_bytes);
    if (slot_bytes == 0 || slot_bytes > SHM_SLOT_MAX || slot_bytes % 4096)
        why = "bad slot size";
    else if ((fd = shm_open(name, O_RDWR | O_CLOEXEC, 0)) < 0
             || fstat(fd, &st) != 0)
        why = strerror(errno);
    else if ((uint64_t)st.st_size != s->size)
        why = "size differs";
    else if ((s->base = mmap(NULL, s->size, PROT_READ | PROT_WRITE,
                             MAP_SHARED, fd, 0)) == MAP_FAILED) {
        s->base = NULL;
        why = strerror(errno);
    } else {
        segment_layout(s, c->n);
        if (s->head->magic != SHM_MAGIC || s->head->nonce != nonce
            || s->head->n != (uint32_t)c->n || s->head->size != s->size)
            why = "not the segment offered";
    }
    if (fd >= 0)
        close(fd);
    if (why == NULL)
        return s;
    strz_log(c, STRATA_LOG_INFO, "cannot map shared memory %s (%s): the "
             "group uses zmq", name, why);
    if (s->base)
        munmap(s->base, s->size);
    free(s);
    return NULL;
}

static void unlink_once(struct strz_shm *s)
{
    if (s && s->creator && !s->unlinked) {
        shm_unlink(s->name);
        s->unlinked = 1;
    }
}

void strz_shm_close(strz_ctx_t *c)
{
    struct strz_shm *s = c->shm;
    if (s == NULL)
        return;
    unlink_once(s);
    if (s->base)
        munmap(s->base, s->size);
    free(s);
    c->shm = NULL;
}

/* ---- set-up around the ring ------------------------------------------- */

static int send_shm(strz_ctx_t *c, int trip, int ok, uint64_t nonce,
                    uint64_t slot_bytes, const char *name, int64_t deadline)
{
    strz_hdr_t h = { .type = STRZ_SHM, .sender = c->rank, .step = trip,
                     .offset = slot_bytes, .aux = ok, .total = nonce,
                     .length = (uint32_t)strlen(name) };
    for (;;) {
        int rc = strz_send(c, &h, name);
        if (rc != STRATA_EAGAIN)
            return rc;
        if ((rc = strz_wait(c, STRZ_W_OUT, deadline)) != 0)
            return rc;
    }
}

/* The next SHM message from the left, trip `trip`; name copied out. */
static int recv_shm(strz_ctx_t *c, int trip, strz_hdr_t *h, char *name,
                    int64_t deadline)
{
    strz_rmsg_t m;
    for (;;) {
        int rc = strz_recv(c, &m);
        if (rc == STRATA_EAGAIN) {
            if ((rc = strz_wait(c, STRZ_W_IN, deadline)) != 0)
                return rc;
            continue;
        }
        if (rc)
            return rc;
        *h = m.h;
        if (h->type != STRZ_SHM || h->step != trip
            || h->length >= SHM_NAME_MAX) {
            strz_rmsg_close(&m);
            return strz_fail(c, STRATA_EPROTO, c->left, "unexpected %s from "
                             "%s (%s) refused: expected SHM trip %d",
                             strz_wire_type_name(h->type), c->name[c->left],
                             c->addr[c->left], trip);
        }
        memcpy(name, m.data ? m.data : "", h->length);
        name[h->length] = '\0';
        strz_rmsg_close(&m);
        return 0;
    }
}

static void say_shm(strz_ctx_t *c)
{
    if (c->rank == 0)
        strz_log(c, STRATA_LOG_INFO, "collectives through shared memory (%d "
             "members on this host, %zu KiB per member per round)", c->n,
             c->shm->slot_bytes / 1024);
}

int strz_shm_setup(strz_ctx_t *c, int64_t deadline)
{
    char name[SHM_NAME_MAX] = "";
    int want = c->cfg.shm == STRZ_SHM_AUTO, ok, rc;
    uint64_t nonce = 0, slot_bytes = 0;
    strz_hdr_t h;

    if (c->n < 2 || c->n > SHM_MAX_MEMBERS || !all_local(c))
        return 0;
    c->what = "shared-memory set-up";
    if (c->rank == 0) {
        c->shm = want ? create(c, &nonce) : NULL;
        if (c->shm) {
            snprintf(name, sizeof name, "%s", c->shm->name);
            slot_bytes = c->shm->slot_bytes;
        }
        if ((rc = send_shm(c, 1, c->shm != NULL, nonce, slot_bytes, name,
                           deadline)) != 0
            || (rc = recv_shm(c, 1, &h, name, deadline)) != 0)
            return rc;
        ok = h.aux == 1 && c->shm != NULL;
        unlink_once(c->shm); /* everyone who will map it has */
        if (!ok)
            strz_shm_close(c);
        else
            say_shm(c);
        return send_shm(c, 2, ok, nonce, slot_bytes, name, deadline);
    }
    if ((rc = recv_shm(c, 1, &h, name, deadline)) != 0)
        return rc;
    if (h.aux == 1 && want)
        c->shm = attach(c, name, h.total, h.offset);
    if ((rc = send_shm(c, 1, h.aux == 1 && c->shm != NULL, h.total,
                       h.offset, name, deadline)) != 0
        || (rc = recv_shm(c, 2, &h, name, deadline)) != 0)
        return rc;
    if (h.aux != 1)
        strz_shm_close(c);
    else
        say_shm(c);
    if (c->right != 0)
        return send_shm(c, 2, h.aux == 1, h.total, h.offset, name, deadline);
    return 0;
}

/* ---- waiting -------------------------------------------------------------- */

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void ring_bell(shm_head_t *hd)
{
    atomic_fetch_add(&hd->bell, 1);
    if (atomic_load(&hd->sleepers) > 0)
        (void)syscall(SYS_futex, &hd->bell, FUTEX_WAKE, INT_MAX, NULL, NULL,
                      0);
}

enum { POSTED, DONE };

static uint64_t counter(const struct strz_shm *s, int which, int j)
{
    return atomic_load_explicit(which == POSTED ? &s->mem[j].posted
                                                : &s->mem[j].done,
                                memory_order_acquire);
}

/* The lowest member whose counter is below `target`, or -1. */
static int behind(const struct strz_shm *s, int n, int which,
                  uint64_t target)
{
    for (int j = 0; j < n; j++)
        if (counter(s, which, j) < target)
            return j;
    return -1;
}

void strz_shm_publish_abort(strz_ctx_t *c, int peer, int code)
{
    struct strz_shm *s = c->shm;
    unsigned long long want = ((unsigned long long)(uint32_t)(-code) << 32)
                              | (uint32_t)(peer + 1), zero = 0;
    if (s == NULL || code >= 0)
        return;
    atomic_compare_exchange_strong(&s->head->abort_word, &zero, want);
    ring_bell(s->head);
}

static int abort_seen(strz_ctx_t *c)
{
    unsigned long long w = atomic_load(&c->shm->head->abort_word);
    if (w == 0)
        return 0;
    return strz_abort_shared(c, (int)(w & 0xffffffffu) - 1,
                             -(int)(w >> 32));
}

static int timed_out(strz_ctx_t *c, int j, int which)
{
    return strz_fail(c, STRATA_ETIMEDOUT, j, "timed out after %.1f s "
                     "waiting for %s (%s) to %s (shared memory)",
                     c->timeout_ms / 1000.0, c->name[j], c->addr[j],
                     which == POSTED ? "contribute" : "finish reading");
}

/* Until every member's `which` counter reached `target`. */
static int wait_all(strz_ctx_t *c, int which, uint64_t target,
                    int64_t deadline)
{
    struct strz_shm *s = c->shm;
    shm_head_t *hd = s->head;
    int n = c->n, rc;

    for (int i = 0; i < s->spin; i++) {
        if (behind(s, n, which, target) < 0)
            return 0;
        if (atomic_load_explicit(&hd->abort_word, memory_order_relaxed))
            break;
        cpu_relax();
    }
    int64_t next_ctrl = 0;
    for (int k = 0;; k++) {
        unsigned seen = atomic_load(&hd->bell);
        int j = behind(s, n, which, target);
        if (j < 0)
            return 0;
        if ((rc = abort_seen(c)) != 0)
            return rc;
        int64_t t = strz_now_ns();
        if (t >= next_ctrl) {
            rc = strz_ctrl_poll(c, counter(s, which, c->left) < target,
                                counter(s, which, c->right) < target);
            if (rc)
                return rc;
            if (t >= deadline * 1000000)
                return timed_out(c, j, which);
            next_ctrl = t + SHM_CTRL_NS;
        }
        if (k < SHM_YIELDS) {
            sched_yield();
            continue;
        }
        int64_t left_ms = deadline - t / 1000000;
        struct timespec ts = { 0, (left_ms < SHM_NAP_MS ? (left_ms > 0 ? left_ms : 1)
                                                        : SHM_NAP_MS) * 1000000L };
        atomic_fetch_add(&hd->sleepers, 1);
        if (atomic_load(&hd->bell) == seen && behind(s, n, which, target) >= 0)
            (void)syscall(SYS_futex, &hd->bell, FUTEX_WAIT, seen, &ts, NULL,
                          0);
        atomic_fetch_sub(&hd->sleepers, 1);
        next_ctrl = 0; /* after a sleep, look at once */
    }
}

/* ---- collectives ----------------------------------------------------- */

static int check_info(strz_ctx_t *c, uint64_t g, const shm_set_info_t *me)
{
    static const char *const kinds[] = { "?", "?", "?", "all-reduce",
                                          "broadcast", "barrier" };
    for (int j = 0; j < c->n; j++) {
        const shm_set_info_t *o = &c->shm->mem[j].info[g & 1];
        if (o->seq == me->seq && o->total == me->total && o->kind == me->kind
            && o->arg == me->arg)
            continue;
        return strz_fail(c, STRATA_EPROTO, j, "%s (%s) is in another "
                         "collective: #%llu %s of %llu elements (op/root "
                         "%d); this member: #%llu %s of %llu elements "
                         "(op/root %d)", c->name[j], c->addr[j],
                         (unsigned long long)o->seq,
                         kinds[o->kind < 6 ? o->kind : 0],
                         (unsigned long long)o->total, (int)o->arg,
                         (unsigned long long)me->seq,
                         kinds[me->kind < 6 ? me->kind : 0],
                         (unsigned long long)me->total, (int)me->arg);
    }
    return 0;
}

int strz_shm_collective(strz_ctx_t *c, int kind, float *buf, size_t count,
                        int arg, int comp, int64_t deadline)
{
    struct strz_shm *s = c->shm;
    const size_t per = s->slot_bytes / (comp ? 2 : sizeof(float));
    const float scale = kind == STRZ_DATA && arg == STRATA_REDUCE_MEAN
                        ? 1.0f / (float)c->n : 1.0f;
    const int root = kind == STRZ_BCAST ? arg : -1;
    const void *src[SHM_MAX_MEMBERS];
    shm_set_info_t me = { .seq = c->seq, .total = count, .kind = kind,
                          .arg = arg | comp << 8 };
    shm_member_t *self = &s->mem[c->rank];
    size_t off = 0;
    int rc;

    if (s->spin == 0)
        s->spin = strz_may_spin(c) ? SHM_SPIN : -1;
    /* Short collectives may never sleep: look at zmq (strangers, ABORTs)
     * once a millisecond anyway. */
    int64_t t = strz_now_ns();
    if (t >= s->next_ctrl) {
        if ((rc = strz_ctrl_poll(c, 0, 0)) != 0)
            return rc;
        s->next_ctrl = t + SHM_CTRL_NS;
    }
    do { /* a barrier is one round without data */
        size_t len = count - off < per ? count - off : per;
        uint64_t g = s->round;

        if (g >= 2 && (rc = wait_all(c, DONE, g - 1, deadline)) != 0)
            return rc;
        if (comp)
            strz_pack16(slot(s, c->n, g, c->rank), buf + off, len, comp);
        else if (kind == STRZ_DATA || c->rank == root)
            memcpy(slot(s, c->n, g, c->rank), buf + off, len * sizeof(float));
        self->info[g & 1] = me;
        atomic_store_explicit(&self->posted, g + 1, memory_order_release);
        ring_bell(s->head);
        if ((rc = wait_all(c, POSTED, g + 1, deadline)) != 0
            || (rc = check_info(c, g, &me)) != 0)
            return rc;
        if (comp) {
            for (int k = 0; k < c->n; k++)
                src[k] = slot(s, c->n, g, k);
            strz_sum16(buf + off, src, c->n, len, scale, comp);
        } else if (kind == STRZ_DATA) {
            for (int k = 0; k < c->n; k++)
                src[k] = k == c->rank ? (const void *)(buf + off)
                                      : slot(s, c->n, g, k);
            strz_sum(buf + off, src, c->n, len, scale);
        } else if (kind == STRZ_BCAST && c->rank != root) {
            memcpy(buf + off, slot(s, c->n, g, root), len * sizeof(float));
        }
        atomic_store_explicit(&self->done, g + 1, memory_order_release);
        ring_bell(s->head);
        s->round = g + 1;
        off += len;
    } while (off < count);
    return 0;
}
