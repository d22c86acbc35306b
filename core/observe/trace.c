/* The step timeline ([train] trace = FILE): Chrome's trace-event format,
 * which Perfetto (ui.perfetto.dev) and chrome://tracing open. A process
 * per worker (pid = its rank), a track per replica (tid = the replica) and
 * one for the main thread (eval, checkpoint); each phase a complete ("X")
 * event with its step, a reduce with the bytes it handed over. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime.h"
#include "observe/observe.h"

static const char *const k_name[STRATA__TR_KINDS] = {
    "forward", "backward", "wait", "reduce", "update", "eval", "checkpoint",
};
static const char *const k_cat[STRATA__TR_KINDS] = {
    "compute", "compute", "comm", "comm", "compute", "eval", "checkpoint",
};

void strata__trace_init(strata__trace_t *tr)
{
    struct timespec ts;
    memset(tr, 0, sizeof *tr);
    clock_gettime(CLOCK_REALTIME, &ts);
    tr->mono0 = strata__now();
    tr->real0_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void strata__trace_add(strata__trace_t *tr, int kind, int tid, int64_t step,
                       double t0, double t1, uint64_t bytes)
{
    if (tr->n == tr->cap) {
        size_t cap = tr->cap ? tr->cap * 2 : 1024;
        strata__trace_ev_t *ev = realloc(tr->ev, cap * sizeof *ev);
        if (!ev)
            return; /* the timeline misses it; training goes on */
        tr->ev = ev;
        tr->cap = cap;
    }
    tr->ev[tr->n++] = (strata__trace_ev_t){
        .t0 = t0, .t1 = t1 > t0 ? t1 : t0, .step = step, .bytes = bytes,
        .tid = tid, .kind = kind,
    };
}

static void meta(strata__bytes_t *o, int pid, int tid, const char *what,
                 const char *name, int sort)
{
    strata__bytes_printf(o, "{\"ph\":\"M\",\"pid\":%d,", pid);
    if (tid >= 0)
        strata__bytes_printf(o, "\"tid\":%d,", tid);
    strata__bytes_printf(o, "\"name\":\"%s_name\",\"args\":{\"name\":\"", what);
    strata__bytes_json_str(o, name);
    strata__bytes_printf(o, "\"}},\n{\"ph\":\"M\",\"pid\":%d,", pid);
    if (tid >= 0)
        strata__bytes_printf(o, "\"tid\":%d,", tid);
    strata__bytes_printf(o, "\"name\":\"%s_sort_index\",\"args\":"
                         "{\"sort_index\":%d}}", what, sort);
}

void strata__trace_fragment(const strata__trace_t *tr, strata__bytes_t *out,
                            int pid, const char *process,
                            const char *const *track_names, int ntracks)
{
    meta(out, pid, -1, "process", process, pid);
    for (int t = 0; t < ntracks; t++) {
        strata__bytes_printf(out, ",\n");
        meta(out, pid, t, "thread", track_names[t], t);
    }
    for (size_t i = 0; i < tr->n; i++) {
        const strata__trace_ev_t *e = &tr->ev[i];
        double ts = (double)tr->real0_us + (e->t0 - tr->mono0) * 1e6;
        strata__bytes_printf(out, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                             "\"name\":\"%s\",\"cat\":\"%s\",\"ts\":%.3f,"
                             "\"dur\":%.3f,\"args\":{\"step\":%lld", pid,
                             e->tid, k_name[e->kind], k_cat[e->kind], ts,
                             (e->t1 - e->t0) * 1e6, (long long)e->step);
        if (e->kind == STRATA__TR_REDUCE)
            strata__bytes_printf(out, ",\"bytes\":%llu",
                                 (unsigned long long)e->bytes);
        strata__bytes_printf(out, "}}");
    }
}

void strata__trace_document(strata__bytes_t *out, const strata__bytes_t *frags,
                            int n, const char *about)
{
    strata__bytes_printf(out, "{\"displayTimeUnit\":\"ms\",\"otherData\":"
                         "{\"about\":\"");
    strata__bytes_json_str(out, about);
    strata__bytes_printf(out, "\"},\n\"traceEvents\":[\n");
    for (int i = 0; i < n; i++) {
        if (i > 0)
            strata__bytes_printf(out, ",\n");
        strata__bytes_put(out, frags[i].p, frags[i].len);
        out->failed |= frags[i].failed;
    }
    strata__bytes_printf(out, "\n]}\n");
}

void strata__trace_free(strata__trace_t *tr)
{
    free(tr->ev);
    memset(tr, 0, sizeof *tr);
}
