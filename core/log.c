/* One line per message on stderr, never interleaved between threads. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static atomic_int g_level = STRATA_LOG_INFO;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void strata__log_set_level(int level) { atomic_store(&g_level, level); }

int strata__log_level_parse(const char *s)
{
    static const char *const names[] = { "error", "warn", "info", "debug" };
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

void strata__vlog(int level, const char *who, const char *fmt, va_list ap)
{
    if (level > atomic_load(&g_level))
        return;
    char line[2048];
    int n = snprintf(line, sizeof line, "strata: %s%s%s", who ? who : "",
                     who ? ": " : "",
                     level == STRATA_LOG_ERROR ? "error: "
                     : level == STRATA_LOG_WARN ? "warning: " : "");
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    pthread_mutex_lock(&g_lock);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    pthread_mutex_unlock(&g_lock);
}

void strata__log(int level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strata__vlog(level, who, fmt, ap);
    va_end(ap);
}
