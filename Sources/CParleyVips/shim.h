#include <vips/vips.h>

// libvips' optional arguments are NULL-terminated variadics, which Swift cannot call; these
// wrappers fix the options Parley uses.

// Opens an image lazily: only the header is read until pixels are asked for.
static inline VipsImage *parley_vips_open(const char *path) {
    return vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
}

// A thumbnail that fits a size x size box, never enlarged, EXIF orientation applied.
static inline int parley_vips_thumbnail(const char *path, VipsImage **out, int size) {
    return vips_thumbnail(path, out, size, "height", size, "size", VIPS_SIZE_DOWN, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
}

// Baseline JPEG without any metadata (no EXIF, XMP or IPTC: nothing that could hold a location).
static inline int parley_vips_jpegsave(VipsImage *image, const char *path, int quality) {
    return vips_jpegsave(image, path, "Q", quality, "strip", TRUE, "optimize_coding", TRUE, NULL);
}

// Drops the alpha channel by flattening onto white (JPEG has no transparency).
static inline int parley_vips_flatten_white(VipsImage *image, VipsImage **out) {
    double white[3] = {255, 255, 255};
    VipsArrayDouble *background = vips_array_double_new(white, 3);
    int result = vips_flatten(image, out, "background", background, NULL);
    vips_area_unref(VIPS_AREA(background));
    return result;
}

static inline void parley_vips_unref(VipsImage *image) { g_object_unref(image); }
