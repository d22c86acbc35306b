/* Line plots as SVG written by hand: "nice" axes (steps of 1, 2, 5 x 10^k,
 * ends on ticks), panels with grid, ticks and labels, one legend. Opens in
 * any browser; the markup is plain so that tests can parse it as XML. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "svg.h"

/* ---- axes ------------------------------------------------------------- */

/* Ticks of `step` covering [min, max]: the tolerance keeps 0.8 / 0.02 =
 * 40.000000000000004 from adding a tick. */
static int fit(double min, double max, double step, double *lo, double *hi)
{
    double a = floor(min / step + 1e-9), b = ceil(max / step - 1e-9);
    *lo = a * step;
    *hi = b * step;
    return (int)(b - a) + 1;
}

int cli_axis_make(double min, double max, int max_ticks, int integer,
                  cli_axis_t *ax)
{
    if (!isfinite(min) || !isfinite(max) || max_ticks < 3)
        return -1;
    if (min > max) {
        double t = min;
        min = max;
        max = t;
    }
    if (max - min <= 1e-12 * fmax(fabs(min), fabs(max))) {
        /* One value: a range around it (an epoch of its own: 0 to 2). */
        double pad = min == 0.0 ? 1.0 : fabs(min) * 0.05;
        if (integer && pad < 1.0)
            pad = 1.0;
        min -= pad;
        max += pad;
    }
    static const double k_mant[] = { 1.0, 2.0, 5.0 };
    double raw = (max - min) / (max_ticks - 1);
    int e0 = (int)floor(log10(raw));
    /* The smallest nice step that fits; steps grow, so this is the axis
     * with the most ticks. A step of 10^(e0+2) is > 10 x raw and always
     * fits: the loop ends there at the latest. */
    for (int e = e0 - 1; e <= e0 + 2; e++)
        for (int m = 0; m < 3; m++) {
            double step = k_mant[m] * pow(10.0, e);
            if (integer && step < 1.0)
                continue;
            double lo, hi;
            int n = fit(min, max, step, &lo, &hi);
            if (n > max_ticks)
                continue;
            ax->lo = lo;
            ax->hi = hi;
            ax->step = step;
            ax->nticks = n;
            ax->decimals = integer || e >= 0 ? 0 : -e;
            return 0;
        }
    /* Not reached for finite input (see above); a plain two-tick axis. */
    ax->lo = min;
    ax->hi = max;
    ax->step = max - min;
    ax->nticks = 2;
    ax->decimals = 3;
    return 0;
}

void cli_axis_label(const cli_axis_t *ax, int i, char *buf, size_t cap)
{
    /* lo is a whole multiple of step: the tick at zero is exactly 0. */
    snprintf(buf, cap, "%.*f", ax->decimals, ax->lo + (double)i * ax->step);
}

/* ---- the document ----------------------------------------------------- */

#define PANEL_W  480
#define PANEL_H  380
#define TOP      56   /* title and subtitle */
#define M_LEFT   62   /* inside a panel: tick labels and the y label */
#define M_RIGHT  18
#define M_TOP    30   /* the panel's title */
#define M_BOTTOM 50   /* tick labels and the x label */
#define LEGEND_ROW 22

/* Tableau 10: distinct in colour and in grey. */
static const char *const k_colours[] = {
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
};
#define NCOLOURS (int)(sizeof k_colours / sizeof k_colours[0])

static void put_escaped(FILE *f, const char *s)
{
    for (; s && *s; s++)
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            /* Control characters are not allowed in XML 1.0. */
            fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
        }
}

/* Series i's stroke: a colour and a dash pattern of its own, so that lines
 * that coincide (synchronous strategies train alike) stay visible. */
static void put_stroke(FILE *f, int i)
{
    static const char *const k_dashes[] = { NULL, "9 4", "3 3", "12 3 3 3" };
    const char *dash = k_dashes[i % 4];
    fprintf(f, "stroke=\"%s\"", k_colours[i % NCOLOURS]);
    if (dash)
        fprintf(f, " stroke-dasharray=\"%s\"", dash);
}

static int usable(const cli_series_t *s, int k)
{
    return isfinite(s->x[k]) && isfinite(s->y[k]);
}

/* The data's range over every series of a panel; 0 when it has no point. */
static int data_range(const cli_panel_t *p, double *x0, double *x1,
                      double *y0, double *y1)
{
    int any = 0;
    for (int i = 0; i < p->nseries; i++)
        for (int k = 0; k < p->series[i].n; k++) {
            const cli_series_t *s = &p->series[i];
            if (!usable(s, k))
                continue;
            if (!any) {
                *x0 = *x1 = s->x[k];
                *y0 = *y1 = s->y[k];
                any = 1;
            }
            *x0 = fmin(*x0, s->x[k]);
            *x1 = fmax(*x1, s->x[k]);
            *y0 = fmin(*y0, s->y[k]);
            *y1 = fmax(*y1, s->y[k]);
        }
    return any;
}

typedef struct frame {
    double left, top, w, h; /* the plot area, in document units */
    cli_axis_t ax, ay;
} frame_t;

static double px(const frame_t *fr, double x)
{
    return fr->left + (x - fr->ax.lo) / (fr->ax.hi - fr->ax.lo) * fr->w;
}

static double py(const frame_t *fr, double y)
{
    return fr->top + fr->h - (y - fr->ay.lo) / (fr->ay.hi - fr->ay.lo) * fr->h;
}

static void put_axes(FILE *f, const frame_t *fr, const cli_panel_t *p)
{
    char label[64];
    fprintf(f, "<g class=\"grid\" stroke=\"#e4e4e4\" stroke-width=\"1\">\n");
    for (int i = 0; i < fr->ax.nticks; i++) {
        double x = px(fr, fr->ax.lo + i * fr->ax.step);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                x, fr->top, x, fr->top + fr->h);
    }
    for (int i = 0; i < fr->ay.nticks; i++) {
        double y = py(fr, fr->ay.lo + i * fr->ay.step);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                fr->left, y, fr->left + fr->w, y);
    }
    fprintf(f, "</g>\n");
    fprintf(f, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
            "height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n",
            fr->left, fr->top, fr->w, fr->h);
    fprintf(f, "<g class=\"xticks\" text-anchor=\"middle\">\n");
    for (int i = 0; i < fr->ax.nticks; i++) {
        double x = px(fr, fr->ax.lo + i * fr->ax.step);
        cli_axis_label(&fr->ax, i, label, sizeof label);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"#444\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x,
                fr->top + fr->h, x, fr->top + fr->h + 5, x,
                fr->top + fr->h + 19, label);
    }
    fprintf(f, "</g>\n<g class=\"yticks\" text-anchor=\"end\">\n");
    for (int i = 0; i < fr->ay.nticks; i++) {
        double y = py(fr, fr->ay.lo + i * fr->ay.step);
        cli_axis_label(&fr->ay, i, label, sizeof label);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"#444\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                fr->left - 5, y, fr->left, y, fr->left - 8, y + 4, label);
    }
    fprintf(f, "</g>\n");
    fprintf(f, "<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\" "
            "text-anchor=\"middle\">", fr->left + fr->w / 2,
            fr->top + fr->h + 40);
    put_escaped(f, p->xlabel);
    fprintf(f, "</text>\n<text class=\"ylabel\" transform=\"translate(%.1f "
            "%.1f) rotate(-90)\" text-anchor=\"middle\">", fr->left - 46,
            fr->top + fr->h / 2);
    put_escaped(f, p->ylabel);
    fprintf(f, "</text>\n");
}

static void put_series(FILE *f, const frame_t *fr, const cli_series_t *s,
                       int i)
{
    fprintf(f, "<polyline class=\"series\" data-name=\"");
    put_escaped(f, s->name);
    fprintf(f, "\" fill=\"none\" stroke-width=\"2\" ");
    put_stroke(f, i);
    fprintf(f, " points=\"");
    int first = 1;
    for (int k = 0; k < s->n; k++)
        if (usable(s, k)) {
            fprintf(f, "%s%.1f,%.1f", first ? "" : " ", px(fr, s->x[k]),
                    py(fr, s->y[k]));
            first = 0;
        }
    fprintf(f, "\"/>\n");
    /* The points, each with a tooltip of its values. */
    for (int k = 0; k < s->n; k++)
        if (usable(s, k)) {
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\">"
                    "<title>", px(fr, s->x[k]), py(fr, s->y[k]),
                    k_colours[i % NCOLOURS]);
            put_escaped(f, s->name);
            fprintf(f, ": %.4g, %.4g</title></circle>\n", s->x[k], s->y[k]);
        }
}

static void put_panel(FILE *f, const cli_panel_t *p, double left, double top)
{
    double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    int any = data_range(p, &x0, &x1, &y0, &y1);
    if (p->x_from_zero && x0 > 0)
        x0 = 0;
    frame_t fr = { .left = left + M_LEFT, .top = top + M_TOP,
                   .w = PANEL_W - M_LEFT - M_RIGHT,
                   .h = PANEL_H - M_TOP - M_BOTTOM };
    cli_axis_make(x0, x1, 8, p->x_integer, &fr.ax);
    cli_axis_make(y0, y1, 7, 0, &fr.ay);
    fprintf(f, "<g id=\"");
    put_escaped(f, p->id);
    fprintf(f, "\" class=\"panel\">\n<text class=\"title\" x=\"%.1f\" "
            "y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\" "
            "font-weight=\"bold\">", fr.left + fr.w / 2, top + 18);
    put_escaped(f, p->title);
    fprintf(f, "</text>\n");
    put_axes(f, &fr, p);
    if (!any)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                "fill=\"#888\">no data</text>\n", fr.left + fr.w / 2,
                fr.top + fr.h / 2);
    for (int i = 0; i < p->nseries; i++)
        put_series(f, &fr, &p->series[i], i);
    fprintf(f, "</g>\n");
}

/* The legend's rows: names laid out left to right, wrapped at the width
 * (a name's width estimated at 7 units a character). */
static int legend_rows(const cli_panel_t *p, int width, int put, FILE *f,
                       double top)
{
    double x = 20;
    int rows = p->nseries > 0;
    for (int i = 0; i < p->nseries; i++) {
        double w = 40 + 7.0 * (double)strlen(p->series[i].name) + 24;
        if (x + w > width - 10 && x > 20) {
            x = 20;
            rows++;
        }
        double y = top + (rows - 1) * LEGEND_ROW;
        if (put) {
            fprintf(f, "<g class=\"entry\"><line x1=\"%.1f\" y1=\"%.1f\" "
                    "x2=\"%.1f\" y2=\"%.1f\" stroke-width=\"3\" ", x, y - 4,
                    x + 30, y - 4);
            put_stroke(f, i);
            fprintf(f, "/><text x=\"%.1f\" y=\"%.1f\">", x + 38, y);
            put_escaped(f, p->series[i].name);
            fprintf(f, "</text></g>\n");
        }
        x += w;
    }
    return rows;
}

int cli_svg_write(FILE *f, const char *title, const char *subtitle,
                  const cli_panel_t *panels, int npanels)
{
    int width = 10 + (npanels > 1 ? npanels : 1) * (PANEL_W + 10);
    int rows = npanels > 0 ? legend_rows(&panels[0], width, 0, NULL, 0) : 0;
    double legend_top = TOP + PANEL_H + 18;
    int height = (int)legend_top + rows * LEGEND_ROW + 8;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"Helvetica, "
            "Arial, sans-serif\" font-size=\"12\">\n<title>",
            width, height, width, height);
    put_escaped(f, title);
    fprintf(f, "</title>\n<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n"
            "<text x=\"20\" y=\"24\" font-size=\"16\" font-weight=\"bold\">",
            width, height);
    put_escaped(f, title);
    fprintf(f, "</text>\n<text x=\"20\" y=\"43\" fill=\"#555\">");
    put_escaped(f, subtitle);
    fprintf(f, "</text>\n");
    for (int i = 0; i < npanels; i++)
        put_panel(f, &panels[i], 10 + i * (PANEL_W + 10), TOP);
    fprintf(f, "<g id=\"legend\">\n");
    if (npanels > 0)
        legend_rows(&panels[0], width, 1, f, legend_top);
    fprintf(f, "</g>\n</svg>\n");
    return ferror(f) ? -1 : 0;
}
