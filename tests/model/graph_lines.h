/* A [graph] section written as C strings for the model tests: lines[i] is
 * "name = text", taken as line i + 2 of g.ini. */
#ifndef STRATA_TESTS_MODEL_GRAPH_LINES_H
#define STRATA_TESTS_MODEL_GRAPH_LINES_H

#include <stdio.h>
#include <string.h>

#include "model/model.h"

enum { GRAPH_LINES_MAX = 64 };

typedef struct graph_lines {
    strata__layer_line_t line[GRAPH_LINES_MAX];
    char                 name[GRAPH_LINES_MAX][32];
    char                 origin[GRAPH_LINES_MAX][32];
    int                  n;
} graph_lines_t;

/* Split the NULL-terminated "name = text" strings into g->line. */
static inline void graph_lines(const char *const *text, graph_lines_t *g)
{
    for (g->n = 0; text[g->n] && g->n < GRAPH_LINES_MAX; g->n++) {
        const char *s = text[g->n], *eq = strchr(s, '=');
        int n = g->n;
        snprintf(g->name[n], sizeof g->name[n], "%.*s", (int)(eq - s - 1), s);
        snprintf(g->origin[n], sizeof g->origin[n], "g.ini:%d", n + 2);
        g->line[n] = (strata__layer_line_t){ g->name[n], eq + 2,
                                             g->origin[n] };
    }
}

#endif
