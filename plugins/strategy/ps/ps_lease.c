/* ps.so -- leases: what binds a push to the step it claims.
 *
 * The coordinator draws a random key at start and hands it to every ps task
 * in its PINGs (a and b). The STEP it hands a worker carries the lease of
 * that step, attempt and worker (c): a keyed hash of the three (SipHash-2-4,
 * libsodium's crypto_shorthash). The worker's PUSH carries it back, and the
 * ps applies a push only when the lease matches the push's step, attempt
 * and sender: a captured push replayed with another step id, or a push a
 * worker was never handed, is refused -- by construction, not by luck. In a
 * secured job the sender is the member the connection authenticated (zmq's
 * CURVE), and no stranger can see a lease; in plaintext ([security] mode =
 * off) both are on the wire, and the network is trusted.
 *
 * The coordinator's control messages (PING, FINISH, ABORT, STATE_REQ,
 * STATE_PUT) carry as their request id a keyed hash of their header (d):
 * one nobody holding the key sent is refused, in plaintext too. Workers do
 * not hold the key: each gets a key of its own, derived from it, in
 * every reply to its STEP_REQ, and an ABORT sent to a worker is tagged
 * under that worker's key.
 *
 * At FINISH each ps reports a digest of the step ids it applied, and how
 * often its state was restored, which the coordinator compares with the
 * steps it scheduled and the restores it made: exactly once means the same
 * steps, not only as many, and no state from outside that ledger. */
#include <sodium.h>
#include <string.h>

#include "ps.h"

int ps_lease_new_key(ps_t *p)
{
    if (sodium_init() < 0)
        return STRATA_EINTERNAL;
    randombytes_buf(p->lease_key, sizeof p->lease_key);
    p->lease_key_set = 1;
    return STRATA_OK;
}

void ps_lease_key_out(const ps_t *p, int64_t *a, int64_t *b)
{
    memcpy(a, p->lease_key, 8);
    memcpy(b, p->lease_key + 8, 8);
}

void ps_lease_key_in(ps_t *p, int64_t a, int64_t b)
{
    memcpy(p->lease_key, &a, 8);
    memcpy(p->lease_key + 8, &b, 8);
    p->lease_key_set = 1;
}

int64_t ps_lease(const ps_t *p, int64_t step, int32_t attempt, int member)
{
    unsigned char in[16], out[crypto_shorthash_BYTES];
    uint32_t a = (uint32_t)attempt, m = (uint32_t)member;
    memcpy(in, &step, 8);
    memcpy(in + 8, &a, 4);
    memcpy(in + 12, &m, 4);
    crypto_shorthash(out, in, sizeof in, p->lease_key);
    int64_t lease;
    memcpy(&lease, out, 8);
    return lease;
}

int ps_ctl_bound(int type)
{
    return type == PS_PING || type == PS_FINISH || type == PS_ABORT ||
           type == PS_STATE_REQ || type == PS_STATE_PUT ||
           type == PS_STATE_SAVE;
}

/* The keyed hash of a control message's header under key16. */
static uint64_t tag_under(const unsigned char key16[16], const ps_hdr_t *h,
                          int sender, uint64_t incarnation)
{
    unsigned char in[64], out[crypto_shorthash_BYTES];
    int64_t v[6] = { h->type | (int64_t)sender << 8, (int64_t)incarnation,
                     h->step, h->a, h->b, h->c };
    uint32_t n[3] = { h->count, h->at, ps_wire_total(h) }; /* a piece's place too */
    memcpy(in, v, sizeof v);
    memcpy(in + sizeof v, n, sizeof n);
    crypto_shorthash(out, in, sizeof v + sizeof n, key16);
    uint64_t tag;
    memcpy(&tag, out, 8);
    return tag;
}

uint64_t ps_ctl_tag(const ps_t *p, const ps_hdr_t *h, int sender,
                    uint64_t incarnation)
{
    return tag_under(p->lease_key, h, sender, incarnation);
}

int64_t ps_worker_key(const ps_t *p, int member)
{
    /* step -2 is no step's: no lease of a step equals it */
    int64_t k = ps_lease(p, -2, 0, member);
    return k != 0 ? k : 1; /* 0 means "none" on the wire */
}

uint64_t ps_worker_tag(int64_t wkey, const ps_hdr_t *h, int sender,
                       uint64_t incarnation)
{
    unsigned char key16[16];
    int64_t inv = ~wkey;
    memcpy(key16, &wkey, 8);
    memcpy(key16 + 8, &inv, 8);
    return tag_under(key16, h, sender, incarnation);
}

uint64_t ps_ctl_req(ps_t *p, const ps_hdr_t *h)
{
    return ps_ctl_bound(h->type) && p->lease_key_set
               ? ps_ctl_tag(p, h, p->self, p->incarnation)
               : ps_net_req(p);
}

/* splitmix64's finaliser: a step id spread over 64 bits, so that XORs of
 * different sets of ids differ. */
uint64_t ps_step_mix(int64_t step)
{
    uint64_t z = (uint64_t)step + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
