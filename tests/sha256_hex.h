/*
 * sha256_hex.h — SHA-256 of a buffer as 64 lowercase hex digits (OpenSSL's EVP_Digest, the
 * library the engine links for complete.json), for tests that compare what the engine wrote
 * or computed with a digest a fixture script stored. Header-only: one static function, one
 * copy per test program.
 */
#ifndef CLEF_TESTS_SHA256_HEX_H
#define CLEF_TESTS_SHA256_HEX_H

#include <openssl/evp.h>

#include <stddef.h>
#include <stdio.h>

static void sha256_hex(const void *data, size_t size, char hex[65]) {
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(data, size, md, &len, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

#endif /* CLEF_TESTS_SHA256_HEX_H */
