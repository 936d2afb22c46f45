/*
 * tok_release.c — clef_release_check_tokenizer (include/clef_release.h): load a release's
 * tokenizer exactly as clef_model_load does, and free it, so that `clef inspect` refuses
 * what a load would refuse.
 */
#include "clef_release.h"

#include "core/error.h"
#include "tokenizer/tokenizer.h"

int clef_release_check_tokenizer(const clef_release *rel) {
    if (!rel)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_release_check_tokenizer: rel is NULL");
    tok_tokenizer *tok = NULL;
    int rc = tok_load_dir(clef_release_dir(rel), &tok);
    tok_free(tok);
    return rc;
}
