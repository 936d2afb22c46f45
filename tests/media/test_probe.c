/*
 * test_probe.c — image sizes read from headers before decoding, against Pillow's Image.size
 * on files Pillow wrote (PNG/JPEG/WebP in every mode requests bring), and the refusals:
 * a decompression bomb (100000x100000 declared in a 60-byte PNG), over 16 MP, 0x0, 1x100000,
 * truncated headers — each with the status probe.txt names and a message naming the field.
 * Every file is also probed cut at every length, which must fail cleanly (no read past the end;
 * ASan checks) or give the same size.
 */
#include "clef.h"
#include "media/image_probe.h"
#include "media/image_source.h"
#include "media_fixture.h"
#include "test.h"

#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s fixtures/probe\n", argv[0]);
        return 2;
    }
    char path[1024], name[256], a[32], b[32];
    snprintf(path, sizeof path, "%s/probe.txt", argv[1]);
    FILE *list = fopen(path, "r");
    CHECK_MSG(list != NULL, "cannot open %s", path);
    if (!list)
        return test_summary();
    int files = 0, refusals = 0;
    while (fscanf(list, "%255s %31s %31s", name, a, b) == 3) {
        snprintf(path, sizeof path, "%s/%s", argv[1], name);
        size_t size = 0;
        uint8_t *bytes = media_fixture_read(path, &size);
        CHECK_MSG(bytes != NULL, "cannot read %s", path);
        if (!bytes)
            continue;
        clef_image_file file = {clef_image_sniff(bytes, size), bytes, size};
        CHECK_MSG(file.format != 0, "%s: signature not recognised", name);
        int64_t w = 0, h = 0;
        int st = file.format ? clef_image_probe(&file, "images[1]", &w, &h) : -1;
        if (strcmp(a, "refused") == 0) {
            refusals++;
            int want = strcmp(b, "too_long") == 0 ? CLEF_ERR_REQUEST_TOO_LONG
                                                  : CLEF_ERR_REQUEST_INVALID;
            CHECK_MSG(st == want, "%s: status %d, want %d (%s)", name, st, want, b);
            CHECK_MSG(strstr(clef_last_error(), "images[1]") != NULL, "%s: %s", name,
                      clef_last_error());
        } else {
            CHECK_MSG(st == CLEF_OK && w == atoll(a) && h == atoll(b),
                      "%s: clef %lldx%lld (status %d: %s), Pillow %sx%s", name, (long long)w,
                      (long long)h, st, st ? clef_last_error() : "", a, b);
        }
        /* Every prefix: refused as malformed, or the same answer once the header is whole. */
        for (size_t cut = 0; cut < size && cut < 4096; cut++) {
            clef_image_file part = {file.format ? file.format : CLEF_IMAGE_PNG, bytes, cut};
            int64_t pw = 0, ph = 0;
            int pst = clef_image_probe(&part, "images[1]", &pw, &ph);
            if (pst == CLEF_OK && st == CLEF_OK)
                CHECK_MSG(pw == w && ph == h, "%s cut at %zu: %lldx%lld", name, cut,
                          (long long)pw, (long long)ph);
            else if (pst != CLEF_OK)
                CHECK_MSG(pst == CLEF_ERR_REQUEST_INVALID || pst == CLEF_ERR_REQUEST_TOO_LONG,
                          "%s cut at %zu: status %d", name, cut, pst);
        }
        free(bytes);
        files++;
    }
    fclose(list);
    CHECK_MSG(files >= 20 && refusals >= 7, "probe fixture too small: %d files", files);
    return test_summary();
}
