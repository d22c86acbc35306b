/* tests/gpu/fake_kg.c: kernels/cuda's API on the CPU, with checks. */
#ifndef STRATA_TESTS_FAKE_KG_H
#define STRATA_TESTS_FAKE_KG_H
#include <stddef.h>

extern int fake_kg_violations;          /* breaches seen so far        */
size_t fake_kg_live_blocks(void);       /* device + page-locked blocks */
int    fake_kg_device_of(const void *p);/* -1 page-locked, -2 unknown  */

#endif
