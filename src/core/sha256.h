/*
 * sha256.h — SHA-256 of a file (OpenSSL libcrypto), for complete.json verification.
 */
#ifndef CLEF_CORE_SHA256_H
#define CLEF_CORE_SHA256_H

/* Hash the file at path; write 64 lowercase hex digits + NUL into hex. */
int clef_sha256_file(const char *path, char hex[65]);

struct clef_file;
/* The same for a file already open (clef_file_open / clef_release_open_file): the file is
 * hashed as opened, so no path is looked up twice. */
int clef_sha256_open_file(const struct clef_file *f, char hex[65]);

#endif /* CLEF_CORE_SHA256_H */
