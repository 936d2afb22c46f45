/*
 * codec_exif.c — the EXIF Orientation tag through libexif (see codec.h).
 *
 * Pillow's exif_transpose reads Image.getexif()[0x0112], i.e. IFD0 only (IFD1 describes the
 * thumbnail), and applies it when it is a single integer 2..8. libexif is told not to "fix"
 * the data to the specification (that may add default entries) so only what the file says is
 * read.
 */
#include "media/codec.h"

#include <libexif/exif-data.h>

#include <stdlib.h>
#include <string.h>

static const uint8_t exif_header[6] = {'E', 'x', 'i', 'f', 0, 0};

int clef_codec_exif_orientation(const uint8_t *data, size_t size) {
    if (!data || size == 0 || size > ((size_t)64 << 20))
        return 1;
    uint8_t *owned = NULL;
    const uint8_t *block = data;
    size_t block_size = size;
    if (size < 6 || memcmp(data, exif_header, 6) != 0) { /* bare TIFF (PNG eXIf, WebP EXIF) */
        owned = malloc(size + 6);
        if (!owned)
            return 1;
        memcpy(owned, exif_header, 6);
        memcpy(owned + 6, data, size);
        block = owned;
        block_size = size + 6;
    }
    int orientation = 1;
    ExifData *ed = exif_data_new();
    if (ed) {
        exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
        exif_data_load_data(ed, block, (unsigned int)block_size);
        ExifEntry *e = ed->ifd[EXIF_IFD_0]
                           ? exif_content_get_entry(ed->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION)
                           : NULL;
        /* Pillow gives an int for a single BYTE / SHORT / LONG value, a tuple otherwise (which
         * exif_transpose ignores). */
        if (e && e->data && e->components == 1) {
            ExifByteOrder order = exif_data_get_byte_order(ed);
            if (e->format == EXIF_FORMAT_SHORT && e->size >= 2)
                orientation = exif_get_short(e->data, order);
            else if (e->format == EXIF_FORMAT_LONG && e->size >= 4)
                orientation = exif_get_long(e->data, order) <= 8
                                  ? (int)exif_get_long(e->data, order) : 0;
            else if (e->format == EXIF_FORMAT_BYTE && e->size >= 1)
                orientation = e->data[0];
        }
        exif_data_unref(ed);
    }
    free(owned);
    return orientation;
}
