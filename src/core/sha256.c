/*
 * sha256.c — streaming SHA-256 over a file with libcrypto's EVP interface.
 */
#include "core/sha256.h"

#include "core/error.h"
#include "core/io.h"

#include <openssl/evp.h>
#include <stdlib.h>

int clef_sha256_file(const char *path, char hex[65]) {
    clef_file f;
    int rc = clef_file_open(&f, path);
    if (rc != CLEF_OK)
        return rc;
    rc = clef_sha256_open_file(&f, hex);
    clef_file_close(&f);
    return rc;
}

int clef_sha256_open_file(const clef_file *fp, char hex[65]) {
    const clef_file f = *fp;
    const char *path = f.path;
    int rc = CLEF_OK;
    enum { CHUNK = 4 << 20 };
    unsigned char *buf = malloc(CHUNK);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!buf || !ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "cannot start SHA-256 of '%s'", path);
        goto done;
    }
    for (uint64_t off = 0; off < f.size;) {
        size_t n = f.size - off > CHUNK ? CHUNK : (size_t)(f.size - off);
        rc = clef_file_pread(&f, buf, n, off);
        if (rc != CLEF_OK)
            goto done;
        EVP_DigestUpdate(ctx, buf, n);
        off += n;
    }
    unsigned char md[32];
    unsigned int md_len = 0;
    EVP_DigestFinal_ex(ctx, md, &md_len);
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = '\0';
done:
    EVP_MD_CTX_free(ctx);
    free(buf);
    return rc;
}
