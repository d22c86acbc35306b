/* Where a step's time goes. A replica reaches the reduce when its backward
 * ends; the reduce cannot end before the last replica of the process
 * reaches it. So the span from its arrival to the last arrival is the
 * replica's wait for the others (the step barrier), and the rest of the
 * reduce call is the reduce itself. Waits for other workers (mwms) happen
 * inside the cross-worker reduce, whose clocks are not this machine's:
 * they count as reduce. */
#include "internal.h" /* STRATA_MAX_REPLICAS */
#include "observe/observe.h"

void strata__step_split(const strata__step_rec_t *const *recs, int R, int r,
                        double *fwd_end, double *wait)
{
    double arrive = recs[0]->bwd;
    for (int k = 1; k < R; k++)
        arrive = recs[k]->bwd > arrive ? recs[k]->bwd : arrive;
    const strata__step_rec_t *x = recs[r];
    double w = arrive - x->bwd;
    if (w > x->red - x->bwd)
        w = x->red - x->bwd;
    *wait = w < 0.0 ? 0.0 : w;
    *fwd_end = x->fwd > x->t0 && x->fwd < x->bwd ? x->fwd : x->t0;
}

void strata__phase_times_add(strata__phase_times_t *pt,
                             const strata__event_t *ev)
{
    const strata__step_rec_t *recs[STRATA_MAX_REPLICAS] = { 0 };
    const int R = ev->nreps;
    for (int i = 0; i < ev->nrec; i++) {
        for (int r = 0; r < R; r++)
            recs[r] = &ev->rec[r][i];
        for (int r = 0; r < R; r++) {
            const strata__step_rec_t *x = recs[r];
            double fwd, wait;
            strata__step_split(recs, R, r, &fwd, &wait);
            pt->compute += (x->bwd - x->t0) + (x->upd - x->red);
            pt->wait += wait;
            pt->reduce += x->red - x->bwd - wait;
        }
        pt->steps++;
        pt->lr = recs[0]->lr;
    }
}
