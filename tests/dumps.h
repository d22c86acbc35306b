/* Variable dumps (debug.dump_vars: raw float32 of the variables, in model
 * order) and the equivalence check between two of them. */
#ifndef STRATA_TESTS_DUMPS_H
#define STRATA_TESTS_DUMPS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define DUMP_NVARS 4
static const size_t dump_counts[DUMP_NVARS] = { 784 * 128, 128, 128 * 10, 10 };

static inline size_t dump_total(void)
{
    size_t n = 0;
    for (int i = 0; i < DUMP_NVARS; i++)
        n += dump_counts[i];
    return n;
}

/* The n floats of `path`, or NULL. */
static inline float *dump_load(const char *path, size_t n)
{
    float *v = malloc(n * sizeof *v);
    FILE *f = fopen(path, "rb");
    if (!v || !f || fread(v, sizeof *v, n, f) != n) {
        if (f)
            fclose(f);
        free(v);
        return NULL;
    }
    fclose(f);
    return v;
}

/* Relative L2 distance per variable between two dumps of a model whose
 * variables hold counts[0..nvars) floats, variable i's <= tols[i] (< 0:
 * not compared). */
static inline void dump_compare_each(const char *a_path, const char *b_path,
                                     const char *what, const double *tols,
                                     const size_t *counts, int nvars)
{
    size_t total = 0;
    for (int i = 0; i < nvars; i++)
        total += counts[i];
    float *a = dump_load(a_path, total), *b = dump_load(b_path, total);
    CHECKF(a && b, "%s: dumps missing", what);
    size_t at = 0;
    for (int i = 0; a && b && i < nvars; i++) {
        double d = 0, s = 0;
        for (size_t j = 0; j < counts[i]; j++) {
            double x = a[at + j], y = b[at + j];
            d += (x - y) * (x - y);
            s += x * x;
        }
        double rel = sqrt(d) / (s > 0 ? sqrt(s) : 1.0);
        printf("%s: variable %d: relative L2 distance %.3g%s\n", what, i,
               rel, tols[i] < 0 ? " (not compared)" : "");
        CHECKF(tols[i] < 0 || rel <= tols[i], "%s: variable %d differs by "
               "%.3g", what, i, rel);
        at += counts[i];
    }
    free(a);
    free(b);
}

/* The same with one tolerance for every variable. */
static inline void dump_compare_model(const char *a_path, const char *b_path,
                                      const char *what, double tol,
                                      const size_t *counts, int nvars)
{
    double *tols = malloc((size_t)nvars * sizeof *tols);
    for (int i = 0; tols && i < nvars; i++)
        tols[i] = tol;
    if (tols)
        dump_compare_each(a_path, b_path, what, tols, counts, nvars);
    free(tols);
}

/* The same for the seeds' MLP. */
static inline void dump_compare(const char *a_path, const char *b_path,
                                const char *what, double tol)
{
    dump_compare_model(a_path, b_path, what, tol, dump_counts, DUMP_NVARS);
}

/* The final variables' hashes that `want` workers printed (debug.hash_vars,
 * "variables hash (rank R): HEX") in `out`: 1 when there are that many and
 * all are equal. */
static inline int dump_hashes_equal(const char *out, int want)
{
    char first[17] = "";
    int n = 0;
    for (const char *p = out; (p = strstr(p, "variables hash (rank ")); p++) {
        const char *h = strstr(p, "): ");
        if (!h)
            return 0;
        if (n++ == 0)
            memcpy(first, h + 3, 16);
        else if (strncmp(first, h + 3, 16) != 0)
            return 0;
    }
    return n == want;
}

#endif
