/* Fault-injection points: the controller (see fault.h). */
#include "fault.h"

#if STRATA_FAULT_INJECTION

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_long g_reached;   /* points reached since the last arm */
static atomic_long g_target;    /* the point that fails; 0: none */
static atomic_int  g_fired;
static const char *g_file;      /* where the armed point was (written once */
static int         g_line, g_kind;  /* per arm, by the thread that fired) */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void report_at_exit(void)
{
    fprintf(stderr, "strata: fault: %ld fault points reached\n",
            atomic_load(&g_reached));
}

/* STRATA_FAULT, once, before the first point counts. */
static void read_env(void)
{
    const char *s = getenv("STRATA_FAULT");
    if (!s || !*s)
        return;
    if (strcmp(s, "count") == 0) {
        atexit(report_at_exit);
        return;
    }
    char *end;
    errno = 0;
    long n = strtol(s, &end, 10);
    if (errno || *end || n < 1) {
        /* Not the log: this runs inside whatever point was reached first. */
        fprintf(stderr, "strata: fault: STRATA_FAULT = '%.32s' is neither a "
                "point number (1, 2, ...) nor 'count'; ignored\n", s);
        return;
    }
    atomic_store(&g_target, n);
}

int strata__fault_hit(int kind, const char *file, int line)
{
    pthread_once(&g_once, read_env);
    long n = atomic_fetch_add(&g_reached, 1) + 1;
    if (n != atomic_load(&g_target))
        return 0;
    g_file = file;
    g_line = line;
    g_kind = kind;
    atomic_store(&g_fired, 1);
    errno = kind == STRATA_FAULT_ALLOC ? ENOMEM : EIO;
    return 1;
}

void strata__fault_arm(long n)
{
    pthread_once(&g_once, read_env);
    atomic_store(&g_target, 0);
    atomic_store(&g_fired, 0);
    atomic_store(&g_reached, 0);
    atomic_store(&g_target, n > 0 ? n : 0);
}

long strata__fault_count(void)
{
    return atomic_load(&g_reached);
}

int strata__fault_fired(char *where, unsigned long cap)
{
    int fired = atomic_load(&g_fired);
    if (where && cap)
        snprintf(where, cap, "%s at %s:%d", !fired ? "none"
                 : g_kind == STRATA_FAULT_ALLOC ? "ALLOC" : "IO",
                 fired ? g_file : "-", fired ? g_line : 0);
    return fired;
}

#else

/* Fault injection compiled out (Release): nothing here. ISO C wants one
 * declaration in a translation unit. */
typedef int strata__fault_off_t;

#endif
