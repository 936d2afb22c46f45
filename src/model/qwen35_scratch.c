/*
 * qwen35_scratch.c — the matmul scratch a backbone forward of T rows can ask its backend for
 * beyond the RunState: the backend's own buffers that its matmuls grow on first use (the CUDA
 * backend's bf16 staging of x), which a RunState does not plan. The quantized matrices'
 * scratch proper is not counted here: the RunState plans it and the forward hands it to them
 * (qwen35_state.c). But their input may be staged as a BF16 matrix's is (the CUDA backend's
 * NF4 matmuls read x's bf16 rows there, the exact FP8 path writes its bf16 code values
 * there), so each counts as a BF16 matrix of its shape. The engine adds it to a context's
 * device memory when a placement profile holds the device to a budget (clef_profile_check),
 * so the budget is checked before a record runs, not discovered by an allocation failing in
 * the middle of one.
 */
#include "model/qwen35_internal.h"

size_t qwen35_matmul_scratch_bytes(const qwen35_model *m, clef_backend *be, int64_t T) {
    size_t most = 0;
    for (int64_t i = 0; m && i < m->cfg.num_hidden_layers; i++) {
        const qwen35_layer *L = &m->w.layers[i];
        const clef_matrix *ws[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->in_qkv, &L->in_z, &L->in_b,
                                   &L->in_a, &L->out_proj, &L->q_proj, &L->k_proj, &L->v_proj, &L->o_proj};
        for (size_t j = 0; j < sizeof ws / sizeof *ws; j++) {
            if (!ws[j]->data)
                continue; /* the other mixer's matrices */
            clef_matrix staged = *ws[j]; /* a quantized one: its input staged as for BF16 */
            if (staged.quant) {
                staged.type = CLEF_WTYPE_BF16, staged.quant = NULL, staged.packed = NULL;
                staged.ld = staged.cols, staged.quant_row0 = 0;
            }
            size_t b = clef_matmul_workspace_size(be, T, &staged);
            most = b > most ? b : most;
        }
    }
    return most;
}
