/*
 * cpu_isa.c — the CPU kernels' instruction-set choice (see cpu_isa.h): cpuid once, capped by
 * what the build allows, by the environment variable CLEF_CPU_ISA (read once, with cpuid),
 * and by a process-wide limit for tests.
 */
#include "backend/cpu/cpu_isa.h"

#include "core/log.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_int isa_limit = CPU_ISA_AVX512;
static atomic_int isa_best = -1; /* -1: not probed yet */

/* What the compile flags allow when the build does not dispatch at run time. */
static cpu_isa build_allows(void) {
#if defined(CLEF_CPU_DISPATCH)
    return CPU_ISA_AVX512;
#elif defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && defined(__AVX512BW__)
    return CPU_ISA_AVX512;
#elif defined(__AVX2__) && defined(__FMA__)
    return CPU_ISA_AVX2;
#else
    return CPU_ISA_SCALAR;
#endif
}

/* CLEF_CPU_ISA: the best level the process may use, so one machine runs (and tests) what a
 * machine without AVX-512, or without AVX2, would. Unset or empty: no cap. An unknown value
 * caps nothing and says so in the log (a typo must not silently test the wrong kernels). */
static cpu_isa env_cap(void) {
    const char *v = getenv("CLEF_CPU_ISA");
    if (!v || !*v || strcmp(v, "avx512") == 0)
        return CPU_ISA_AVX512;
    if (strcmp(v, "avx2") == 0)
        return CPU_ISA_AVX2;
    if (strcmp(v, "c") == 0 || strcmp(v, "scalar") == 0)
        return CPU_ISA_SCALAR;
    CLEF_LOG_W("CLEF_CPU_ISA='%s' is not one of avx512, avx2, c: ignored", v);
    return CPU_ISA_AVX512;
}

static cpu_isa probe(void) {
    cpu_isa cpu = CPU_ISA_SCALAR;
#if CPU_HAVE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        cpu = CPU_ISA_AVX2;
    if (cpu == CPU_ISA_AVX2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw"))
        cpu = CPU_ISA_AVX512;
#endif
    cpu_isa build = build_allows(), env = env_cap();
    cpu_isa best = cpu < build ? cpu : build;
    return best < env ? best : env;
}

cpu_isa cpu_isa_best(void) {
    int best = atomic_load_explicit(&isa_best, memory_order_relaxed);
    if (best < 0) {
        best = (int)probe(); /* idempotent: racing first calls store the same value */
        atomic_store_explicit(&isa_best, best, memory_order_relaxed);
    }
    return (cpu_isa)best;
}

cpu_isa cpu_isa_active(void) {
    int best = (int)cpu_isa_best(), limit = atomic_load_explicit(&isa_limit, memory_order_relaxed);
    return (cpu_isa)(best < limit ? best : limit);
}

cpu_isa cpu_isa_set_limit(cpu_isa cap) {
    return (cpu_isa)atomic_exchange(&isa_limit, (int)cap);
}

/* cpuid's answer for the extension of a level, with what the build allows (as build_allows) */
static int probe_vnni(cpu_isa level) {
#if CPU_HAVE_X86
    __builtin_cpu_init();
    if (level == CPU_ISA_AVX512) {
#if defined(CLEF_CPU_DISPATCH) || defined(__AVX512VNNI__)
        return __builtin_cpu_supports("avx512vnni") != 0;
#endif
    } else if (level == CPU_ISA_AVX2) {
#if defined(CLEF_CPU_DISPATCH) || defined(__AVXVNNI__)
        return __builtin_cpu_supports("avxvnni") != 0;
#endif
    }
#endif
    (void)level;
    return 0;
}

int cpu_isa_has_vnni(cpu_isa level) {
    static atomic_int vnni[3] = {-1, -1, -1}; /* per level; -1: not probed yet */
    if (level < CPU_ISA_SCALAR || level > CPU_ISA_AVX512 || level > cpu_isa_best())
        return 0;
    int v = atomic_load_explicit(&vnni[level], memory_order_relaxed);
    if (v < 0) {
        v = probe_vnni(level); /* idempotent, as cpu_isa_best */
        atomic_store_explicit(&vnni[level], v, memory_order_relaxed);
    }
    return v;
}

const char *cpu_isa_name(cpu_isa isa) {
    switch (isa) {
    case CPU_ISA_AVX512: return "avx512";
    case CPU_ISA_AVX2: return "avx2";
    default: return "scalar";
    }
}
