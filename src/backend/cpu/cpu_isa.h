/*
 * cpu_isa.h — which instruction set the CPU kernels run: AVX-512, AVX2 + FMA, or portable C.
 *
 * Every kernel that has vector paths (the GEMM register tile and its packing, the vector exp
 * behind SiLU / sigmoid / exp) compiles all of them into every build, each in a function with
 * a target attribute, and picks one per call from cpu_isa_active(): the best level that the
 * CPU supports (cpuid, once), the build allows and the environment variable CLEF_CPU_ISA
 * (avx512 | avx2 | c; read once, with cpuid) permits. A native build (CLEF_NATIVE=ON, or any
 * build without CLEF_CPU_DISPATCH) allows what its compile flags enable, so -march=x86-64-v3
 * runs the AVX2 path even on an AVX-512 machine; a portable build (CLEF_NATIVE=OFF defines
 * CLEF_CPU_DISPATCH) allows everything, so one x86-64 binary uses AVX2 or AVX-512 where present.
 *
 * The paths compute the same function bit for bit (same operations in the same order, fused
 * multiply-adds written out in all of them, -ffp-contract=off): the level changes speed, never
 * a result. test_backbone_cpu_ops checks that by running each level the machine has.
 */
#ifndef CLEF_BACKEND_CPU_ISA_H
#define CLEF_BACKEND_CPU_ISA_H

typedef enum cpu_isa { CPU_ISA_SCALAR = 0, CPU_ISA_AVX2 = 1, CPU_ISA_AVX512 = 2 } cpu_isa;

#if defined(__x86_64__) || defined(__i386__)
#define CPU_HAVE_X86 1
#define CPU_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define CPU_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))
/* the int8 dot-product extensions of the two levels (cpu_isa_has_vnni) */
#define CPU_TARGET_AVX512VNNI                                                                  \
    __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx512vnni,avx2,fma")))
#define CPU_TARGET_AVXVNNI __attribute__((target("avxvnni,avx2,fma")))
#else
#define CPU_HAVE_X86 0
#endif

/* The level the kernels use now: min(cpu, build, limit). Cheap (one relaxed atomic load). */
cpu_isa cpu_isa_active(void);

/* The best level this build may use on this CPU under CLEF_CPU_ISA (ignores the limit). */
cpu_isa cpu_isa_best(void);

/* Caps the active level (tests and benches run the lower paths on a better CPU; the cap is
 * process-wide, so set it only while no op runs). Returns the previous cap. */
cpu_isa cpu_isa_set_limit(cpu_isa cap);

const char *cpu_isa_name(cpu_isa isa);

/* Whether the int8 dot-product instructions (vpdpbusd) of a level may run: at CPU_ISA_AVX512
 * AVX-512 VNNI, at CPU_ISA_AVX2 AVX-VNNI (the VEX form), each where the CPU has it (cpuid)
 * and the build allows it (a dispatching build always; a native one where its compile flags
 * enable it); 0 at CPU_ISA_SCALAR. An extension of the level, not a level of its own: the
 * int8 kernels use it at the active level (CLEF_CPU_ISA=avx2 leaves AVX-512 VNNI out and
 * uses AVX-VNNI where present), and give the same bits with it or without. */
int cpu_isa_has_vnni(cpu_isa level);

#endif /* CLEF_BACKEND_CPU_ISA_H */
