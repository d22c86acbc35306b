/* The words of a layer line, for the kinds' parsers (layer.h): an
 * integer, a pair "3x5", a float, a "key=value" option. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

int strata__layer_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi || !isdigit((unsigned char)*s))
        return -1;
    *out = (int)v;
    return 0;
}

int strata__layer_pair(const char *s, int lo, int hi, int *a, int *b)
{
    const char *x = strchr(s, 'x');
    if (!x)
        return strata__layer_int(s, lo, hi, a) ? -1 : (*b = *a, 0);
    char first[16];
    size_t n = (size_t)(x - s);
    if (n == 0 || n >= sizeof first)
        return -1;
    memcpy(first, s, n);
    first[n] = '\0';
    return strata__layer_int(first, lo, hi, a) || strata__layer_int(x + 1, lo, hi, b)
               ? -1 : 0;
}

int strata__layer_float(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

const char *strata__layer_opt(const char *w, const char *key)
{
    size_t n = strlen(key);
    return !strncmp(w, key, n) && w[n] == '=' ? w + n + 1 : NULL;
}

int strata__layer_no_args(strata__layer_t *l, char *const *w, int n, char *why,
                          size_t len)
{
    (void)l;
    (void)w;
    if (n != 0) {
        snprintf(why, len, "takes no arguments");
        return -1;
    }
    return 0;
}
