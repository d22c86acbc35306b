/* Log lines: "strata: <who>: <message>", one per message, never interleaved
 * between threads. A line belongs to a context (strata_ctx_t): the one a
 * host call names through its hc, else the one the calling thread works for
 * (bound on entry to the public API and in the core's replica threads).
 * It goes to that context's log callback when it has one, else to stderr,
 * filtered by that context's [log] level; a thread bound to no context logs
 * to stderr at the process's default level (info). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "runtime.h"

static pthread_mutex_t g_stderr_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local strata_ctx_t *t_ctx;
static atomic_int g_default_level = STRATA_LOG_INFO;

void strata__log_set_level(int level) { atomic_store(&g_default_level, level); }

strata_ctx_t *strata__log_bind(strata_ctx_t *ctx)
{
    strata_ctx_t *old = t_ctx;
    t_ctx = ctx;
    return old;
}

strata_ctx_t *strata__log_ctx(void) { return t_ctx; }

int strata__log_level_parse(const char *s)
{
    static const char *const names[] = { "error", "warn", "info", "debug" };
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

void strata__vlog_ctx(strata_ctx_t *ctx, int level, const char *who,
                      const char *fmt, va_list ap)
{
    int max = atomic_load(ctx ? &ctx->log_level : &g_default_level);
    if (level > max)
        return;
    char line[2048];
    int n = snprintf(line, sizeof line, "strata: %s%s%s", who ? who : "",
                     who ? ": " : "",
                     level == STRATA_LOG_ERROR ? "error: "
                     : level == STRATA_LOG_WARN ? "warning: " : "");
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    if (ctx && ctx->cb.log) {
        /* The application's callback may be called from any thread of the
         * run: serialise per context so that it sees whole lines in order. */
        pthread_mutex_lock(&ctx->log_lock);
        ctx->cb.log(ctx->cb.user, level, line);
        pthread_mutex_unlock(&ctx->log_lock);
        return;
    }
    pthread_mutex_lock(&g_stderr_lock);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    pthread_mutex_unlock(&g_stderr_lock);
}

void strata__vlog(int level, const char *who, const char *fmt, va_list ap)
{
    strata__vlog_ctx(t_ctx, level, who, fmt, ap);
}

void strata__log(int level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strata__vlog_ctx(t_ctx, level, who, fmt, ap);
    va_end(ap);
}
