/* Random flips and crops of the training images (data.h, augment.c): the
 * draw of a sample and what it does to the image's pixels. */
#include <string.h>

#include "data.h"

/* The draws' rng seed: apart from the epoch orders' and the split's
 * (seeded with the seed itself). */
#define AUGMENT_TAG UINT64_C(0x6175676d656e74) /* "augment" */

void strata__augment_draw(const strata__augment_t *a, uint64_t epoch,
                          size_t sample, strata__augment_draw_t *out)
{
    strata__rng_t r;
    /* a sample index fits 32 bits (orders are uint32_t) */
    strata__rng_seed(&r, a->seed ^ AUGMENT_TAG,
                     epoch << 32 | (uint64_t)(uint32_t)sample);
    /* The flip's bit is drawn either way: the crops do not follow it. */
    int flip = (int)(strata__rng_next(&r) >> 63);
    uint64_t span = 2 * (uint64_t)a->pad + 1;
    out->flip = a->flip && flip;
    out->dy = (int)strata__rng_below(&r, span) - (int)a->pad;
    out->dx = (int)strata__rng_below(&r, span) - (int)a->pad;
}

/* Row y of the output is row y + dy of the input; zero outside it. */
static void shift_rows(uint8_t *p, uint32_t rows, size_t line, int dy)
{
    if (dy > 0)
        for (uint32_t y = 0; y < rows; y++) {
            if ((int64_t)y + dy < rows)
                memcpy(p + y * line, p + (y + (size_t)dy) * line, line);
            else
                memset(p + y * line, 0, line);
        }
    else if (dy < 0)
        for (uint32_t y = rows; y-- > 0;) {
            if ((int64_t)y + dy >= 0)
                memcpy(p + y * line, p + (y - (size_t)-dy) * line, line);
            else
                memset(p + y * line, 0, line);
        }
}

/* Pixel x of a row is pixel x + dx of the input row; zero outside it. */
static void shift_cols(uint8_t *row, uint32_t cols, size_t px, int dx)
{
    size_t k = (size_t)(dx < 0 ? -dx : dx);
    if (k > cols)
        k = cols;
    size_t keep = (cols - k) * px;
    if (dx > 0) {
        memmove(row, row + k * px, keep);
        memset(row + keep, 0, k * px);
    } else if (dx < 0) {
        memmove(row + k * px, row, keep);
        memset(row, 0, k * px);
    }
}

static void mirror(uint8_t *row, uint32_t cols, size_t px)
{
    for (size_t a = 0, b = cols ? cols - 1 : 0; a < b; a++, b--)
        for (size_t i = 0; i < px; i++) {
            uint8_t t = row[a * px + i];
            row[a * px + i] = row[b * px + i];
            row[b * px + i] = t;
        }
}

void strata__augment_image(void *img, uint32_t rows, uint32_t cols,
                           uint32_t channels, size_t elem,
                           const strata__augment_draw_t *dr)
{
    uint8_t *p = img;
    size_t px = (size_t)channels * elem, line = (size_t)cols * px;
    shift_rows(p, rows, line, dr->dy);
    for (uint32_t y = 0; y < rows; y++) {
        if (dr->dx)
            shift_cols(p + y * line, cols, px, dr->dx);
        if (dr->flip)
            mirror(p + y * line, cols, px);
    }
}

void strata__augment_batch(const strata__dataset_t *d, const uint32_t *perm,
                           size_t first, size_t m, void *x, size_t elem)
{
    const strata__augment_t *a = d->augment;
    if (!a || !strata__augment_on(a))
        return;
    for (size_t i = 0; i < m; i++) {
        size_t s = perm ? perm[first + i] : first + i;
        strata__augment_draw_t dr;
        strata__augment_draw(a, (uint64_t)*a->epoch, s, &dr);
        strata__augment_image((uint8_t *)x + i * d->dim * elem, d->rows,
                              d->cols, d->channels, elem, &dr);
    }
}
