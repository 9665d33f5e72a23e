/* CRC-32C of long buffers by carry-less multiply folding (AVX-512 VPCLMULQDQ), for the log append's
 * batch check (issue 25; _cbody.pyx calls it through crc32c_fold()).
 *
 * The crc32c package's hardware path runs three interleaved crc32q streams: 8 bytes a cycle at best,
 * ~0.55 us for a 10.9 KB batch here. Folding 64-byte lanes with VPCLMULQDQ runs about twice that rate.
 * Why it is exact: the raw CRC (initial value folded into the first 4 bytes, no final xor) is linear,
 * CRC(M) = M(x) * x^32 mod P. A 16-byte block A followed, D bits later, by block B can be replaced by
 * A(x) * x^D + B(x) reduced to 128 bits (congruent mod P, same length): in the bit-reflected layout that
 * is clmul(A.lo, rev64(x^(D+63) mod P)) ^ clmul(A.hi, rev64(x^(D-1) mod P)) ^ B (the reflected product
 * is one bit short, hence the -1). The folded 64-byte state is then a message prefix with the same CRC:
 * it and the tail go through the crc32q instruction from a zero CRC.
 *
 * crc32c_fold_usable() says whether the CPU and OS run it (a runtime check; the build needs no -m flag,
 * the functions carry target attributes). Elsewhere it is 0 and the caller keeps its CRC function.
 */
#ifndef LOGSOURCE_CRC32C_FOLD_H
#define LOGSOURCE_CRC32C_FOLD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && (__GNUC__ >= 11)
#define LOGSOURCE_CRC_FOLD 1
#include <immintrin.h>

#define LS_TARGET __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))

LS_TARGET static inline uint32_t ls_crc32q(uint32_t crc, const uint8_t* p, size_t n) {
    uint64_t c = crc, w;
    while (n >= 8) {
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}

/* x = clmul(x.lo64, k.lo64) ^ clmul(x.hi64, k.hi64) ^ b, in each 128-bit lane */
LS_TARGET static inline __m512i ls_fold(__m512i x, __m512i k, __m512i b) {
    __m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
    __m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, b, 0x96);
}

/* the constants per 128-bit lane: low qword rev64(x^(D+63) mod P), high qword rev64(x^(D-1) mod P) */
#define LS_K(D_HI, D_LO) _mm512_set_epi64((long long)(D_LO), (long long)(D_HI), (long long)(D_LO), \
    (long long)(D_HI), (long long)(D_LO), (long long)(D_HI), (long long)(D_LO), (long long)(D_HI))

/* the raw CRC-32C update of crc over p[:n] (the crc32c package's convention: crc in and out not
 * inverted by this function); n >= 256 */
LS_TARGET static uint32_t crc32c_fold_raw(uint32_t crc, const uint8_t* p, size_t n) {
    const __m512i k512 = LS_K(0x1c19243b00000000ULL, 0x75bba45b00000000ULL);
    const __m512i k1024 = LS_K(0x6577b24500000000ULL, 0x7417153f00000000ULL);
    const __m512i k1536 = LS_K(0x7ccbbbf200000000ULL, 0x31c9460800000000ULL);
    const __m512i k2048 = LS_K(0xe9a5d8be00000000ULL, 0x1426a81500000000ULL);
    __m512i x0 = _mm512_loadu_si512((const void*)p);
    __m512i x1 = _mm512_loadu_si512((const void*)(p + 64));
    __m512i x2 = _mm512_loadu_si512((const void*)(p + 128));
    __m512i x3 = _mm512_loadu_si512((const void*)(p + 192));
    x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    p += 256;
    n -= 256;
    while (n >= 256) {
        x0 = ls_fold(x0, k2048, _mm512_loadu_si512((const void*)p));
        x1 = ls_fold(x1, k2048, _mm512_loadu_si512((const void*)(p + 64)));
        x2 = ls_fold(x2, k2048, _mm512_loadu_si512((const void*)(p + 128)));
        x3 = ls_fold(x3, k2048, _mm512_loadu_si512((const void*)(p + 192)));
        p += 256;
        n -= 256;
    }
    /* the four states into one: x0 is 1536 bits before x3's start, x1 1024, x2 512 */
    __m512i x = ls_fold(x0, k1536, x3);
    x = _mm512_xor_si512(x, ls_fold(x1, k1024, _mm512_setzero_si512()));
    x = _mm512_xor_si512(x, ls_fold(x2, k512, _mm512_setzero_si512()));
    while (n >= 64) {
        x = ls_fold(x, k512, _mm512_loadu_si512((const void*)p));
        p += 64;
        n -= 64;
    }
    uint8_t state[64];
    _mm512_storeu_si512((void*)state, x);
    return ls_crc32q(ls_crc32q(0, state, 64), p, n);
}

static int crc32c_fold_usable(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")
        && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul")
        && __builtin_cpu_supports("sse4.2");
}

#else /* no GCC x86-64 with these intrinsics: never used */
#define LOGSOURCE_CRC_FOLD 0
static uint32_t crc32c_fold_raw(uint32_t crc, const uint8_t* p, size_t n) {
    (void)p;
    (void)n;
    return crc;
}
static int crc32c_fold_usable(void) { return 0; }
#endif

#endif
