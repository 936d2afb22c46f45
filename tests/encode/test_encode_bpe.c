/*
 * test_encode_bpe.c — the encoder with the C BPE tokenizer (src/tokenizer) against the
 * reference encode_record() run with Hugging Face on the same tokenizer.json
 * (tests/encode/fixtures/tokenizer.json, trained by scripts/encode/train_test_tokenizer.py):
 * identical ids (SHA-256), state tokens cut, and spans on every record of the fixture.
 */
#include "encode_fixture.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/encode/fixtures/records.jsonl";
    const char *tokenizer_path = argc > 2 ? argv[2] : "tests/encode/fixtures/tokenizer.json";
    tok_tokenizer *tok = NULL;
    int status = tok_load(tokenizer_path, NULL, &tok);
    CHECK_MSG(status == CLEF_OK, "tok_load(%s): %s", tokenizer_path, clef_last_error());
    if (status != CLEF_OK)
        return test_summary();
    fixture_stats st = run_fixture(path, "bpe", clef_tokenize_tok, tok);
    CHECK(st.records >= 1000);
    CHECK_EQ_INT(st.matched, st.records);
    CHECK(st.cut > 0 && st.refused > 0 && st.real > 0);
    tok_free(tok);
    return test_summary();
}
