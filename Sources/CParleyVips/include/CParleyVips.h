#ifndef CPARLEYVIPS_H
#define CPARLEYVIPS_H

// libvips, loaded the first time an image is read (issue 29): a server that never sees a
// photo never maps libvips and the hundred libraries it pulls in (about 25 MB of a 63 MB
// resident set at start). Nothing here needs libvips' headers to build; libvips 8 (soname
// libvips.so.42) is needed at run time to read images; the environment variable
// PARLEY_LIBVIPS names another library file to load instead.

/// An image libvips holds; release it with parley_vips_unref.
typedef struct ParleyVipsImage ParleyVipsImage;

/// Loads libvips and starts it, once for the process; 0 on success. On failure,
/// parley_vips_start_error says why (the library is missing, a symbol is absent, or
/// vips_init failed) and every later call answers the same.
int parley_vips_start(void);
/// Why parley_vips_start failed; NULL if it did not.
const char *parley_vips_start_error(void);

/// Refuses every operation libvips marks untrusted (on: 1).
void parley_vips_block_untrusted(int on);
/// Blocks (1) or allows (0) an operation class and its subclasses, e.g. "VipsForeignLoad".
void parley_vips_block_operation(const char *name, int blocked);
/// The most operations libvips keeps cached (0: none).
void parley_vips_cache_set_max(int max);

/// Opens an image lazily: only the header is read until pixels are asked for; sequential
/// access, and any decoding error fails it. NULL on failure (see parley_vips_error).
ParleyVipsImage *parley_vips_open(const char *path);
/// A thumbnail that fits a size x size box, never enlarged, EXIF orientation applied; 0 on success.
int parley_vips_thumbnail(const char *path, ParleyVipsImage **out, int size);
/// Baseline JPEG without any metadata (no EXIF, XMP or IPTC: nothing that could hold a location).
int parley_vips_jpegsave(ParleyVipsImage *image, const char *path, int quality);
/// Drops the alpha channel by flattening onto white (JPEG has no transparency); 0 on success.
int parley_vips_flatten_white(ParleyVipsImage *image, ParleyVipsImage **out);
/// Releases an image.
void parley_vips_unref(ParleyVipsImage *image);

int parley_vips_width(const ParleyVipsImage *image);
int parley_vips_height(const ParleyVipsImage *image);
/// Nonzero if the image has an alpha channel.
int parley_vips_has_alpha(ParleyVipsImage *image);
/// Nonzero if the image's EXIF orientation swaps its width and height.
int parley_vips_orientation_swap(ParleyVipsImage *image);

/// libvips' accumulated error text (may be NULL), and clearing it.
const char *parley_vips_error(void);
void parley_vips_error_clear(void);

#endif
