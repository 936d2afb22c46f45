/*
 * test_encode_bytes.c — the encoder against the reference encode_record() on the records
 * fixture, with a tokenizer both sides share exactly: every piece becomes its UTF-8 bytes.
 * This pins the prompt text, piece boundaries, question/option order, spans and truncation
 * independently of BPE (test_encode_bpe does the same with the BPE tokenizer).
 */
#include "encode_fixture.h"

static int byte_tokenize(const void *ctx, const char *text, size_t len, tok_ids *out) {
    (void)ctx;
    for (size_t i = 0; i < len; i++)
        if (tok_ids_push(out, (unsigned char)text[i]) != 0)
            return CLEF_ERR_OUT_OF_MEMORY;
    return CLEF_OK;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/encode/fixtures/records.jsonl";
    fixture_stats st = run_fixture(path, "bytes", byte_tokenize, NULL);
    CHECK(st.records >= 1000);
    CHECK_EQ_INT(st.matched, st.records);
    CHECK(st.cut > 0 && st.refused > 0 && st.real > 0);
    return test_summary();
}
