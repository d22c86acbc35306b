/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of a
 * checkpoint's data section. Software slicing-by-8, and on x86-64 the SSE4.2
 * crc32 instruction when cpuid says it is there (about 10x faster: a
 * checkpoint of a few hundred MB is checked in well under a second). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "checkpoint/checkpoint.h"

#define CRC32C_POLY 0x82F63B78u

static uint32_t g_table[8][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
        g_table[0][i] = c;
    }
    for (int s = 1; s < 8; s++)
        for (int i = 0; i < 256; i++)
            g_table[s][i] = (g_table[s - 1][i] >> 8)
                            ^ g_table[0][g_table[s - 1][i] & 0xFF];
}

/* Raw register update (no pre/post inversion). */
static uint32_t sw_update(uint32_t c, const unsigned char *p, size_t n)
{
    pthread_once(&g_once, table_init);
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ g_table[0][(c ^ *p++) & 0xFF];
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);      /* memcpy: no unaligned/aliasing UB */
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = g_table[7][lo & 0xFF] ^ g_table[6][(lo >> 8) & 0xFF]
          ^ g_table[5][(lo >> 16) & 0xFF] ^ g_table[4][lo >> 24]
          ^ g_table[3][hi & 0xFF] ^ g_table[2][(hi >> 8) & 0xFF]
          ^ g_table[1][(hi >> 16) & 0xFF] ^ g_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ g_table[0][(c ^ *p++) & 0xFF];
    return c;
}

uint32_t strata__crc32c_sw(uint32_t crc, const void *data, size_t n)
{
    return ~sw_update(~crc, data, n);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t hw_update(uint32_t c, const unsigned char *p, size_t n)
{
    uint64_t c64 = c;
    while (n && ((uintptr_t)p & 7)) {
        c64 = _mm_crc32_u8((uint32_t)c64, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
        p += 8;
        n -= 8;
    }
    while (n--)
        c64 = _mm_crc32_u8((uint32_t)c64, *p++);
    return (uint32_t)c64;
}

static int have_sse42(void)
{
    static atomic_int cached = -1;   /* every thread computes the same */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}
#endif

uint32_t strata__crc32c(uint32_t crc, const void *data, size_t n)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (have_sse42())
        return ~hw_update(~crc, data, n);
#endif
    return ~sw_update(~crc, data, n);
}
