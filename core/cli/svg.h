/* strata CLI -- line plots as SVG written by hand (no dependency): panels
 * side by side, each with its axes, ticks and labels, and one legend. Used
 * by `strata compare`; the axis logic is unit-tested (tests/compare). */
#ifndef STRATA_CLI_SVG_H
#define STRATA_CLI_SVG_H

#include <stddef.h>
#include <stdio.h>

/* An axis: ticks at lo + i * step for i in [0, nticks), lo and hi on ticks,
 * step 1, 2 or 5 x 10^k. */
typedef struct cli_axis {
    double lo, hi, step;
    int    nticks;   /* both ends included */
    int    decimals; /* of the tick labels: enough for step, no more */
} cli_axis_t;

/* The axis with the most ticks, at most max_ticks (>= 3), that covers
 * [min, max]; integer: a step of at least 1 (epochs). A single value gets
 * a range around it. 0, or -1 for non-finite input or max_ticks < 3. */
int cli_axis_make(double min, double max, int max_ticks, int integer,
                  cli_axis_t *ax);

/* Tick i's label ("0.85", "12", "-2.5"). */
void cli_axis_label(const cli_axis_t *ax, int i, char *buf, size_t cap);

/* One line: n points; a point with a non-finite coordinate is left out. */
typedef struct cli_series {
    const char   *name;
    const double *x, *y;
    int           n;
} cli_series_t;

typedef struct cli_panel {
    const char         *id;     /* the panel group's id (XML name chars) */
    const char         *title, *xlabel, *ylabel;
    const cli_series_t *series; /* series i has colour i in every panel */
    int                 nseries;
    int                 x_from_zero; /* the x axis starts at 0 */
    int                 x_integer;   /* whole-number x ticks (epochs) */
} cli_panel_t;

/* A whole SVG document: title and subtitle lines, the panels side by side
 * (series drawn as <polyline class="series">, points as <circle> with a
 * tooltip), and one legend (<g id="legend">) naming the series of the
 * first panel. Returns 0, or -1 when a write failed. */
int cli_svg_write(FILE *f, const char *title, const char *subtitle,
                  const cli_panel_t *panels, int npanels);

#endif
