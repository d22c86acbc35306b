/* Floating-point environment of compute threads. */
#include "runtime.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

/* Flush denormals to zero (FTZ) and treat denormal inputs as zero (DAZ) in
 * the calling thread, as TensorFlow does in its compute threads. Without it
 * the optimizer slots of weights whose gradient stays zero (the always-black
 * border pixels of an image) decay into denormals, and every arithmetic
 * operation on them costs ~100x: training slows down epoch after epoch. */
void strata__fpenv_fast(void)
{
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ (bit 15) | DAZ (bit 6) */
#elif defined(__aarch64__)
    unsigned long fpcr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr | (1ul << 24)));
#endif
}
