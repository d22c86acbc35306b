/* Levenshtein distance between two names: the "did you mean" of config
 * keys, sections and a graph's layer names. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int strata__edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int *row = malloc((lb + 1) * sizeof *row);
    if (!row)
        return (int)(la > lb ? la : lb);
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    int d = row[lb];
    free(row);
    return d;
}
