/* tests/gpu/fake_kg.c: kernels/cuda's API on the CPU, with checks. It is
 * built into strata_cuda_fake.so with core/device/cuda/kops_cuda.c; these three
 * are exported besides the module's table so that a test can dlsym() them
 * from the module the core loaded. */
#ifndef STRATA_TESTS_FAKE_KG_H
#define STRATA_TESTS_FAKE_KG_H
#include <stddef.h>

#define FAKE_KG_EXPORT __attribute__((visibility("default")))

extern FAKE_KG_EXPORT int fake_kg_violations;  /* breaches seen so far        */
FAKE_KG_EXPORT size_t fake_kg_live_blocks(void);/* device + page-locked blocks */
FAKE_KG_EXPORT int fake_kg_device_of(const void *p); /* -1 page-locked, -2 unknown */

#endif
