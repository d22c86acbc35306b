/* Checkpoints in parts (plugin ABI 2.13): each task that holds part of the
 * model writes it beside the checkpoint, in parallel with the others; the
 * main file names the parts, and every reader joins them into whole
 * tensors (checkpoint.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"

#define WHO "ckpt"
#define ALIGN 16 /* as checkpoint.c's loaded tensors */

int strata__ckpt_part_path(const char *dir, int64_t step, int index,
                           int count, char *buf, size_t len)
{
    if (!dir || !buf || step < 0 || count < 1 || index < 0 || index >= count)
        return STRATA_EINVAL;
    int n = snprintf(buf, len, "%s/ckpt-%010" PRId64 ".part-%d-of-%d"
                     ".safetensors", dir, step, index, count);
    return n < 0 || (size_t)n >= len ? STRATA_EINVAL : STRATA_OK;
}

/* ---- writing ------------------------------------------------------------ */

static size_t per_row(const strata_var_t *v)
{
    return v->ndim == 0 || v->shape[0] == 0 ? v->count
                                            : v->count / (size_t)v->shape[0];
}

static int64_t rows_of(const strata_var_t *v)
{
    return v->ndim == 0 ? 1 : v->shape[0];
}

static int cmp_piece(const void *a, const void *b)
{
    const strata_part_piece_t *x = *(const strata_part_piece_t *const *)a,
                              *y = *(const strata_part_piece_t *const *)b;
    if (x->var != y->var)
        return x->var < y->var ? -1 : 1;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return x->row0 < y->row0 ? -1 : x->row0 > y->row0;
}

/* Every piece within its variable, of a known slot, with data; no two of
 * one tensor overlapping. */
static int check_pieces(const strata_var_t *vars, int nvars, int nslots,
                        const strata_part_t *part)
{
    int n = part->npieces;
    const strata_part_piece_t **s = calloc((size_t)n + 1, sizeof *s);
    if (!s)
        return STRATA_ENOMEM;
    int rc = STRATA_OK;
    for (int i = 0; i < n && rc == STRATA_OK; i++) {
        const strata_part_piece_t *p = &part->pieces[i];
        s[i] = p;
        if (p->var < 0 || p->var >= nvars || p->slot < -1 || p->slot >= nslots
            || !p->data || p->rows < 1 || p->row0 < 0
            || p->rows > rows_of(&vars[p->var]) - p->row0) {
            strata__log(STRATA_LOG_ERROR, WHO, "part %d of the checkpoint of "
                        "step %" PRId64 ": piece %d (variable %d of %d, slot "
                        "%d of %d, rows %" PRId64 " + %" PRId64 ") is not a "
                        "part of the model", part->index, part->step, i,
                        p->var, nvars, p->slot, nslots, p->row0, p->rows);
            rc = STRATA_EINVAL;
        }
    }
    if (rc == STRATA_OK && n > 1)
        qsort(s, (size_t)n, sizeof *s, cmp_piece);
    for (int i = 1; i < n && rc == STRATA_OK; i++)
        if (s[i]->var == s[i - 1]->var && s[i]->slot == s[i - 1]->slot
            && s[i]->row0 < s[i - 1]->row0 + s[i - 1]->rows) {
            strata__log(STRATA_LOG_ERROR, WHO, "part %d of the checkpoint of "
                        "step %" PRId64 ": two pieces of %s (slot %d) overlap "
                        "at row %" PRId64, part->index, part->step,
                        vars[s[i]->var].name, s[i]->slot, s[i]->row0);
            rc = STRATA_EINVAL;
        }
    free(s);
    return rc;
}

int strata__ckpt_part_write(const char *dir, const strata_var_t *vars,
                            int nvars, const char *const *slot, int nslots,
                            strata_part_t *part)
{
    char path[4096];
    if (!part || part->struct_size < sizeof *part || part->npieces < 0
        || (part->npieces && !part->pieces)
        || part->count < 1 || part->count > STRATA_CKPT_MAX_PARTS
        || strata__ckpt_part_path(dir, part->step, part->index, part->count,
                                  path, sizeof path) != STRATA_OK) {
        strata__log(STRATA_LOG_ERROR, WHO, "part_write: invalid part (index "
                    "%d of %d, step %" PRId64 ", %d pieces)",
                    part ? part->index : -1, part ? part->count : -1,
                    part ? part->step : -1, part ? part->npieces : -1);
        return STRATA_EINVAL;
    }
    int rc = check_pieces(vars, nvars, nslots, part);
    if (rc != STRATA_OK)
        return rc;
    int n = part->npieces;
    strata__tensor_t *t = calloc((size_t)n + 1, sizeof *t);
    char (*names)[160] = calloc((size_t)n + 1, sizeof *names);
    if (!t || !names)
        rc = STRATA_ENOMEM;
    for (int i = 0; i < n && rc == STRATA_OK; i++) {
        const strata_part_piece_t *p = &part->pieces[i];
        const strata_var_t *v = &vars[p->var];
        int w = p->slot < 0
            ? snprintf(names[i], sizeof names[i], "%s[%" PRId64 ":%" PRId64
                       "]", v->name, p->row0, p->row0 + p->rows)
            : snprintf(names[i], sizeof names[i], "optimizer/%s/%s[%" PRId64
                       ":%" PRId64 "]", slot[p->slot], v->name, p->row0,
                       p->row0 + p->rows);
        if (w < 0 || (size_t)w >= sizeof names[i])
            rc = STRATA_EINVAL;
        t[i].name = names[i];
        t[i].dtype = "F32";
        t[i].ndim = (int)v->ndim;
        for (uint32_t d = 0; d < v->ndim; d++)
            t[i].shape[d] = d ? v->shape[d] : p->rows;
        t[i].data = p->data;
        t[i].nbytes = (size_t)p->rows * per_row(v) * sizeof(float);
    }
    char st[24], tag[24], ix[16], ct[16];
    snprintf(st, sizeof st, "%" PRId64, part->step);
    snprintf(tag, sizeof tag, "%016" PRIx64, part->tag);
    snprintf(ix, sizeof ix, "%d", part->index);
    snprintf(ct, sizeof ct, "%d", part->count);
    const strata__meta_t meta[] = {
        { "strata.step", st }, { "strata.part_tag", tag },
        { "strata.part_index", ix }, { "strata.part_count", ct },
    };
    if (rc == STRATA_OK)
        rc = strata__ckpt_write(path, t, n, meta, 4);
    struct stat sb;
    part->bytes = rc == STRATA_OK && stat(path, &sb) == 0 ? sb.st_size : 0;
    if (rc == STRATA_OK)
        strata__log(STRATA_LOG_INFO, WHO, "wrote %s (%.1f MiB, %d tensors)",
                    path, (double)part->bytes / 1048576.0, n);
    free(t);
    free(names);
    return rc;
}

/* ---- checking and joining ----------------------------------------------- */

/* The metadata of part `index` of `count` of the checkpoint of `step`
 * under `tag`: a reason in why, or NULL. */
static const char *part_mismatch(const strata__ckpt_t *p, int64_t step,
                                 const char *tag, int index, int count)
{
    char s[24], ix[16], ct[16];
    snprintf(s, sizeof s, "%" PRId64, step);
    snprintf(ix, sizeof ix, "%d", index);
    snprintf(ct, sizeof ct, "%d", count);
    const struct { const char *key, *want; } k[] = {
        { "strata.part_tag", tag }, { "strata.step", s },
        { "strata.part_index", ix }, { "strata.part_count", ct },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const char *v = strata__ckpt_meta(p, k[i].key);
        if (!v || strcmp(v, k[i].want) != 0)
            return k[i].key;
    }
    return NULL;
}

int strata__ckpt_parts_check(const char *dir, int64_t step, uint64_t tag,
                             int count, char *why, size_t len)
{
    char t[24], path[4096], w[512];
    snprintf(t, sizeof t, "%016" PRIx64, tag);
    for (int j = 0; j < count; j++) {
        strata__ckpt_t *p = NULL;
        int rc = strata__ckpt_part_path(dir, step, j, count, path, sizeof path);
        if (rc == STRATA_OK)
            rc = strata__ckpt_header(path, &p, w, sizeof w);
        const char *bad = rc == STRATA_OK
                              ? part_mismatch(p, step, t, j, count) : NULL;
        strata__ckpt_free(p);
        if (rc != STRATA_OK || bad) {
            snprintf(why, len, "%s: %s", path,
                     rc != STRATA_OK ? w : "written for another checkpoint");
            return rc != STRATA_OK ? rc : STRATA_EDATA;
        }
    }
    return STRATA_OK;
}

/* One tensor of a part: NAME[ROW0:ROW1]. */
typedef struct piece {
    char    *base;          /* NAME (points into the part's name copy) */
    int64_t  r0, r1;
    int      part;
    const strata__tensor_t *t; /* of the header pass: shape and dtype */
    char    *name;          /* the whole name, owned */
} piece_t;

static int parse_piece(const char *name, piece_t *p)
{
    size_t n = strlen(name);
    const char *open = strrchr(name, '[');
    if (n < 5 || name[n - 1] != ']' || !open || open == name)
        return -1;
    char *end;
    long long a = strtoll(open + 1, &end, 10);
    if (end == open + 1 || *end != ':' || open[1] == '-' || open[1] == '+')
        return -1;
    const char *b0 = end + 1;
    long long b = strtoll(b0, &end, 10);
    if (end == b0 || *end != ']' || end != name + n - 1 || *b0 == '-'
        || *b0 == '+' || a < 0 || b <= a)
        return -1;
    if (!(p->name = strdup(name)))
        return -2;
    p->name[open - name] = '\0';
    p->base = p->name;
    p->r0 = a;
    p->r1 = b;
    return 0;
}

static int cmp_piece_t(const void *a, const void *b)
{
    const piece_t *x = a, *y = b;
    int d = strcmp(x->base, y->base);
    return d ? d : (x->r0 < y->r0 ? -1 : x->r0 > y->r0);
}

/* The joined tensors: from the header pass, their names, shapes and
 * where each piece goes. */
typedef struct joined {
    piece_t          *pc;   /* every piece, sorted by (base, r0) */
    int               npc;
    strata__tensor_t *t;    /* one per base */
    int               nt;
    size_t           *at;   /* per piece: its offset in data */
    char             *names;
    unsigned char    *data;
} joined_t;

static void joined_free(joined_t *j)
{
    for (int i = 0; i < j->npc; i++)
        free(j->pc[i].name);
    free(j->pc);
    free(j->t);
    free(j->at);
    free(j->names);
    free(j->data);
}

#define REFUSE(...) (snprintf(why, len, __VA_ARGS__), STRATA_EDATA)

/* Group the pieces by tensor: every group one dtype and row shape, its
 * rows tiling [0, total) without gap or overlap. */
static int plan(joined_t *j, char *why, size_t len)
{
    qsort(j->pc, (size_t)j->npc, sizeof *j->pc, cmp_piece_t);
    j->t = calloc((size_t)j->npc + 1, sizeof *j->t);
    j->at = calloc((size_t)j->npc + 1, sizeof *j->at);
    size_t names = 1, bytes = ALIGN;
    for (int i = 0; i < j->npc; i++)
        names += strlen(j->pc[i].base) + 1;
    j->names = malloc(names);
    if (!j->t || !j->at || !j->names)
        return STRATA_ENOMEM;
    char *nm = j->names;
    for (int i = 0; i < j->npc;) {
        const piece_t *f = &j->pc[i];
        int k = i;
        int64_t rows = 0;
        for (; k < j->npc && !strcmp(j->pc[k].base, f->base); k++) {
            const piece_t *p = &j->pc[k];
            const strata__tensor_t *x = p->t;
            int same = !strcmp(x->dtype, f->t->dtype) && x->ndim == f->t->ndim;
            for (int d = 1; same && d < x->ndim; d++)
                same = x->shape[d] == f->t->shape[d];
            if (!same)
                return REFUSE("part %d: %s[%" PRId64 ":%" PRId64 "] has "
                              "another dtype or row shape than its other "
                              "pieces", p->part, p->base, p->r0, p->r1);
            if (x->ndim ? x->shape[0] != p->r1 - p->r0 : p->r1 - p->r0 != 1)
                return REFUSE("part %d: %s[%" PRId64 ":%" PRId64 "] holds "
                              "%" PRId64 " rows", p->part, p->base, p->r0,
                              p->r1, x->ndim ? x->shape[0] : 1);
            if (p->r0 != rows)
                return REFUSE("%s: rows %" PRId64 " to %" PRId64 " are %s",
                              p->base, rows < p->r0 ? rows : p->r0,
                              rows < p->r0 ? p->r0 : rows,
                              rows < p->r0 ? "in no part" : "in two parts");
            j->at[k] = bytes;
            bytes += x->nbytes;
            rows = p->r1;
        }
        strata__tensor_t *t = &j->t[j->nt++];
        strcpy(nm, f->base);
        t->name = nm;
        nm += strlen(nm) + 1;
        t->dtype = f->t->dtype;
        t->ndim = f->t->ndim;
        for (int d = 0; d < t->ndim; d++)
            t->shape[d] = d ? f->t->shape[d] : rows;
        if (!t->ndim && rows != 1)
            return REFUSE("%s: a scalar in %" PRId64 " rows", f->base, rows);
        t->nbytes = bytes - j->at[i];
        t->data = (const void *)j->at[i]; /* an offset until data exists */
        bytes = (bytes + ALIGN - 1) & ~(size_t)(ALIGN - 1);
        i = k;
    }
    j->data = malloc(bytes);
    if (!j->data)
        return STRATA_ENOMEM;
    for (int i = 0; i < j->nt; i++)
        j->t[i].data = j->data + (size_t)j->t[i].data;
    return STRATA_OK;
}

/* The header pass: every part's tensors as pieces. */
static int collect(const char *dir, int64_t step, const char *tag, int count,
                   joined_t *j, char *why, size_t len,
                   strata__ckpt_t **hdr)
{
    char path[4096], w[512];
    for (int k = 0; k < count; k++) {
        int rc = strata__ckpt_part_path(dir, step, k, count, path, sizeof path);
        if (rc == STRATA_OK)
            rc = strata__ckpt_header(path, &hdr[k], w, sizeof w);
        if (rc != STRATA_OK) {
            snprintf(why, len, "part %d (%s): %s", k, path, w);
            return rc == STRATA_ENOENT ? STRATA_EDATA : rc;
        }
        const char *bad = part_mismatch(hdr[k], step, tag, k, count);
        if (bad)
            return REFUSE("part %d (%s) was written for another checkpoint "
                          "(%s differs)", k, path, bad);
        int nt = strata__ckpt_ntensors(hdr[k]);
        piece_t *pc = realloc(j->pc, sizeof *pc * (size_t)(j->npc + nt + 1));
        if (!pc)
            return STRATA_ENOMEM;
        j->pc = pc;
        for (int i = 0; i < nt; i++) {
            const strata__tensor_t *x = strata__ckpt_tensor(hdr[k], i);
            piece_t *p = &j->pc[j->npc];
            memset(p, 0, sizeof *p);
            int r = parse_piece(x->name, p);
            if (r == -2)
                return STRATA_ENOMEM;
            if (r < 0)
                return REFUSE("part %d (%s): tensor '%.80s' is not named "
                              "NAME[ROW0:ROW1]", k, path, x->name);
            p->part = k;
            p->t = x;
            j->npc++;
        }
    }
    return STRATA_OK;
}

/* The data pass: each part read whole (its CRC checked), one at a time,
 * its pieces copied into place. */
static int fill(const char *dir, int64_t step, int count, joined_t *j,
                char *why, size_t len)
{
    char path[4096], w[512];
    for (int k = 0; k < count; k++) {
        strata__ckpt_t *p = NULL;
        int rc = strata__ckpt_part_path(dir, step, k, count, path, sizeof path);
        if (rc == STRATA_OK)
            rc = strata__ckpt_load_part(path, &p, w, sizeof w);
        if (rc != STRATA_OK) {
            snprintf(why, len, "part %d (%s): %s", k, path, w);
            return rc == STRATA_ENOENT ? STRATA_EDATA : rc;
        }
        for (int i = 0; i < j->npc && rc == STRATA_OK; i++) {
            if (j->pc[i].part != k)
                continue;
            /* the file as read now, not as its header said a moment ago */
            char full[4096];
            snprintf(full, sizeof full, "%s[%" PRId64 ":%" PRId64 "]",
                     j->pc[i].base, j->pc[i].r0, j->pc[i].r1);
            const strata__tensor_t *x = strata__ckpt_find(p, full);
            if (!x || x->nbytes != j->pc[i].t->nbytes
                || strcmp(x->dtype, j->pc[i].t->dtype))
                rc = REFUSE("part %d (%s) changed while read", k, path);
            else
                memcpy(j->data + j->at[i], x->data, x->nbytes);
        }
        strata__ckpt_free(p);
        if (rc != STRATA_OK)
            return rc;
    }
    return STRATA_OK;
}

int strata__ckpt_join(const char *path, strata__ckpt_t *c, char *why,
                      size_t len)
{
    const char *ct = strata__ckpt_meta(c, "strata.part_count"),
               *tag = strata__ckpt_meta(c, "strata.part_tag"),
               *st = strata__ckpt_meta(c, "strata.step");
    char *end = NULL, *e2 = NULL;
    long count = ct ? strtol(ct, &end, 10) : 0;
    long long step = st ? strtoll(st, &e2, 10) : -1;
    if (!ct || *end || count < 1 || count > STRATA_CKPT_MAX_PARTS || !tag
        || strlen(tag) != 16 || !st || *e2 || step < 0)
        return REFUSE("strata.part_count '%s', strata.part_tag '%s' or "
                      "strata.step '%s' is not valid", ct ? ct : "(missing)",
                      tag ? tag : "(missing)", st ? st : "(missing)");
    char dir[4096];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1,
             slash ? path : ".");
    joined_t j = { 0 };
    strata__ckpt_t **hdr = calloc((size_t)count, sizeof *hdr);
    int rc = hdr ? collect(dir, step, tag, (int)count, &j, why, len, hdr)
                 : STRATA_ENOMEM;
    if (rc == STRATA_OK)
        rc = plan(&j, why, len);
    if (rc == STRATA_OK)
        rc = fill(dir, step, (int)count, &j, why, len);
    for (long k = 0; hdr && k < count; k++)
        strata__ckpt_free(hdr[k]);
    free(hdr);
    if (rc == STRATA_OK) {
        rc = strata__ckpt_adopt(c, j.t, j.nt, j.names, j.data);
        j.names = NULL;
        j.data = NULL;
        if (rc == STRATA_EDATA)
            snprintf(why, len, "a tensor is both in the file and in a part");
    }
    if (rc == STRATA_ENOMEM)
        snprintf(why, len, "out of memory joining its %ld parts", count);
    joined_free(&j);
    return rc;
}
