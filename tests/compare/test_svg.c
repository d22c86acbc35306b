/* The plot of `strata compare` (core/cli/svg.c): nice axes (steps of 1, 2,
 * 5 x 10^k, ends on ticks, at most the ticks asked for, the data inside,
 * labels without float noise) and the document's structure. */
#include <math.h>
#include <string.h>

#include "../../core/cli/svg.h"
#include "check.h"

/* The axis for [min, max] is nice and covers the data. */
static void check_axis(double min, double max, int max_ticks, int integer)
{
    cli_axis_t ax;
    CHECK(cli_axis_make(min, max, max_ticks, integer, &ax) == 0);
    CHECKF(ax.nticks >= 2 && ax.nticks <= max_ticks, "[%g, %g]: %d ticks",
           min, max, ax.nticks);
    CHECKF(ax.lo <= fmin(min, max) + 1e-12 && ax.hi >= fmax(min, max) - 1e-12,
           "[%g, %g] not inside [%g, %g]", min, max, ax.lo, ax.hi);
    CHECKF(fabs(ax.lo + (ax.nticks - 1) * ax.step - ax.hi) < ax.step * 1e-6,
           "[%g, %g]: lo %g + %d steps of %g != hi %g", min, max, ax.lo,
           ax.nticks - 1, ax.step, ax.hi);
    double mant = ax.step / pow(10.0, floor(log10(ax.step) + 1e-9));
    CHECKF(fabs(mant - 1) < 1e-9 || fabs(mant - 2) < 1e-9 ||
           fabs(mant - 5) < 1e-9, "[%g, %g]: step %g is not 1, 2 or 5 x 10^k",
           min, max, ax.step);
    CHECKF(fabs(remainder(ax.lo / ax.step, 1.0)) < 1e-6,
           "[%g, %g]: lo %g is not on a multiple of the step %g", min, max,
           ax.lo, ax.step);
    /* A range more than twice the data's would waste the plot (except
     * around a single value or zero, or whole steps over a narrow range). */
    if (max - min > 0 && min > 0 && (!integer || max - min >= 10))
        CHECKF(ax.hi - ax.lo <= 2.5 * (max - min) + ax.step, "[%g, %g]: "
               "axis [%g, %g] too wide", min, max, ax.lo, ax.hi);
    if (integer)
        CHECK(ax.step >= 1 && ax.decimals == 0);
}

static const char *label(const cli_axis_t *ax, int i)
{
    static char buf[8][64];
    static int k;
    k = (k + 1) % 8;
    cli_axis_label(ax, i, buf[k], sizeof buf[k]);
    return buf[k];
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

int main(void)
{
    cli_axis_t ax;

    /* Test accuracy in %: 74.8 .. 81.25 -> 74, 76, ..., 82. */
    CHECK(cli_axis_make(74.8, 81.25, 7, 0, &ax) == 0);
    CHECKF(ax.step == 2 && ax.nticks == 5, "step %g, %d ticks", ax.step,
           ax.nticks);
    CHECK(!strcmp(label(&ax, 0), "74") && !strcmp(label(&ax, 4), "82"));

    /* Seconds from 0: 0 .. 1.6 with 8 ticks -> steps of 0.5, "0.0".."2.0". */
    CHECK(cli_axis_make(0, 1.6, 8, 0, &ax) == 0);
    CHECKF(ax.step == 0.5 && ax.lo == 0 && ax.hi == 2.0 && ax.nticks == 5,
           "step %g [%g, %g]", ax.step, ax.lo, ax.hi);
    CHECK(!strcmp(label(&ax, 0), "0.0") && !strcmp(label(&ax, 3), "1.5"));

    /* Float noise: 0.8 / 0.02 = 40.000000000000004 adds no tick, and the
     * labels say 0.80, 0.82, not 0.8200000000000001. */
    CHECK(cli_axis_make(0.8, 0.9, 6, 0, &ax) == 0);
    CHECKF(ax.step == 0.02 && ax.nticks == 6, "step %g, %d ticks", ax.step,
           ax.nticks);
    CHECK(!strcmp(label(&ax, 0), "0.80") && !strcmp(label(&ax, 1), "0.82") &&
          !strcmp(label(&ax, 5), "0.90"));

    /* 0.3 / 0.1 = 2.9999999999999996 and 1.1 / 0.1 = 11.000000000000002
     * add no tick either. */
    CHECK(cli_axis_make(0.3, 1.1, 9, 0, &ax) == 0);
    CHECKF(fabs(ax.step - 0.1) < 1e-12 && ax.nticks == 9, "step %g, %d ticks",
           ax.step, ax.nticks);
    CHECK(!strcmp(label(&ax, 0), "0.3") && !strcmp(label(&ax, 8), "1.1"));

    /* No "-0.0": a tick at zero reads 0. */
    CHECK(cli_axis_make(-0.3, 0.25, 7, 0, &ax) == 0);
    int zero = -1;
    for (int i = 0; i < ax.nticks; i++)
        if (fabs(ax.lo + i * ax.step) < ax.step / 2)
            zero = i;
    CHECK(zero >= 0 && !strcmp(label(&ax, zero), "0.0"));
    CHECK(label(&ax, 0)[0] == '-');

    /* Epochs: whole numbers only, however few. */
    CHECK(cli_axis_make(1, 2, 8, 1, &ax) == 0);
    CHECK(ax.step == 1 && ax.lo == 1 && ax.hi == 2 && ax.nticks == 2);
    CHECK(!strcmp(label(&ax, 0), "1") && !strcmp(label(&ax, 1), "2"));
    CHECK(cli_axis_make(1, 1, 8, 1, &ax) == 0); /* one epoch: 0 .. 2 */
    CHECK(ax.lo == 0 && ax.hi == 2 && ax.step == 1);
    CHECK(cli_axis_make(1, 1000, 8, 1, &ax) == 0);
    CHECKF(ax.step == 200 && ax.lo == 0 && ax.hi == 1000, "step %g", ax.step);

    /* A single value gets a range around it. */
    CHECK(cli_axis_make(0.84, 0.84, 7, 0, &ax) == 0);
    CHECK(ax.lo < 0.84 && ax.hi > 0.84);
    CHECK(cli_axis_make(0, 0, 7, 0, &ax) == 0);
    CHECK(ax.lo < 0 && ax.hi > 0);

    /* Reversed bounds are the same range; non-finite input and fewer than
     * 3 ticks are refused. */
    cli_axis_t bx;
    CHECK(cli_axis_make(10, 2, 6, 0, &ax) == 0 &&
          cli_axis_make(2, 10, 6, 0, &bx) == 0);
    CHECK(ax.lo == bx.lo && ax.hi == bx.hi && ax.step == bx.step);
    CHECK(cli_axis_make(NAN, 1, 6, 0, &ax) == -1);
    CHECK(cli_axis_make(0, INFINITY, 6, 0, &ax) == -1);
    CHECK(cli_axis_make(0, 1, 2, 0, &ax) == -1);

    /* Properties over many ranges, tiny to huge, positive and negative. */
    static const double k_ranges[][2] = {
        { 0, 1 }, { 0, 0.87 }, { 0.8, 0.87 }, { 0.801, 0.8011 }, { 0, 26.3 },
        { 3, 97 }, { -5, 5 }, { -1e-7, 3e-7 }, { 1e6, 1.0003e6 },
        { 12345, 98765 }, { -250, -3 }, { 0.05, 2.31 }, { 0, 1e12 },
        { 0.5207, 0.8599 }, { 59.9, 60.1 },
    };
    for (size_t i = 0; i < sizeof k_ranges / sizeof k_ranges[0]; i++)
        for (int t = 3; t <= 12; t++) {
            check_axis(k_ranges[i][0], k_ranges[i][1], t, 0);
            if (k_ranges[i][0] >= 0 && k_ranges[i][1] >= 1)
                check_axis(k_ranges[i][0], k_ranges[i][1], t, 1);
        }

    /* The document: one polyline per series in each panel, a legend of
     * every name (escaped), non-finite points left out. */
    const double x1[] = { 1.2, 2.5, 3.9 }, y1[] = { 80.1, 83.5, 84.2 };
    const double x2[] = { 4.0, 8.1, 12.2 }, y2[] = { 79.0, NAN, 82.0 };
    const cli_series_t s[3] = { { "mirrored", x1, y1, 3 },
                                { "ps:2x2 <a&b>", x2, y2, 3 },
                                { "mwms:3 (failed)", x1, y1, 0 } };
    const cli_panel_t panels[2] = {
        { .id = "accuracy", .title = "Test accuracy", .xlabel = "seconds",
          .ylabel = "accuracy (%)", .series = s, .nseries = 3,
          .x_from_zero = 1 },
        { .id = "loss", .title = "Loss", .xlabel = "epoch", .ylabel = "loss",
          .series = s, .nseries = 3, .x_integer = 1 },
    };
    char *doc = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&doc, &len);
    CHECK(f && cli_svg_write(f, "t & t", "sub <title>", panels, 2) == 0);
    CHECK(f && fclose(f) == 0);
    CHECK(doc && !strncmp(doc, "<?xml version=\"1.0\"", 19));
    CHECK(count(doc, "<polyline class=\"series\"") == 6);
    CHECK(count(doc, "<g id=\"legend\">") == 1);
    CHECK(count(doc, ">ps:2x2 &lt;a&amp;b&gt;</text>") == 1); /* legend */
    CHECK(strstr(doc, "<b>") == NULL && strstr(doc, "t & t") == NULL);
    CHECK(count(doc, "<circle") == 2 * (3 + 2)); /* the NaN point left out */
    CHECK(strstr(doc, "nan") == NULL && strstr(doc, "inf") == NULL);
    CHECK(count(doc, "<svg ") == 1 && count(doc, "</svg>") == 1);
    free(doc);
    return CHECK_DONE();
}
