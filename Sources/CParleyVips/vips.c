// libvips through dlopen (see CParleyVips.h). The prototypes below are libvips 8's, with its
// pointer types made opaque; the option values are libvips 8's enums (VipsAccess,
// VipsFailOn, VipsSize), stable across its 8.x releases.
#include "CParleyVips.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>

enum {
    ACCESS_SEQUENTIAL = 1,  // VIPS_ACCESS_SEQUENTIAL
    FAIL_ON_ERROR = 2,      // VIPS_FAIL_ON_ERROR
    SIZE_DOWN = 2,          // VIPS_SIZE_DOWN
    GLIB_TRUE = 1,
};

static struct {
    int (*init)(const char *argv0);
    void (*block_untrusted_set)(int state);
    void (*operation_block_set)(const char *name, int state);
    void (*cache_set_max)(int max);
    void *(*image_new_from_file)(const char *name, ...);
    int (*thumbnail)(const char *filename, void **out, int width, ...);
    int (*jpegsave)(void *in, const char *filename, ...);
    int (*flatten)(void *in, void **out, ...);
    void *(*array_double_new)(const double *array, int n);
    void (*area_unref)(void *area);
    void (*object_unref)(void *object);
    int (*image_get_width)(const void *image);
    int (*image_get_height)(const void *image);
    int (*image_hasalpha)(void *image);
    int (*image_get_orientation_swap)(void *image);
    const char *(*error_buffer)(void);
    void (*error_clear)(void);
} vips;

static pthread_once_t started = PTHREAD_ONCE_INIT;
static const char *start_error = NULL;
static char start_error_text[512];

static void start(void) {
    // PARLEY_LIBVIPS names the library to load instead (a libvips built elsewhere); when set,
    // nothing else is tried.
    const char *named = getenv("PARLEY_LIBVIPS");
    void *library;
    if (named != NULL && named[0] != '\0') {
        library = dlopen(named, RTLD_NOW | RTLD_LOCAL);
    } else {
        library = dlopen("libvips.so.42", RTLD_NOW | RTLD_LOCAL);
        if (library == NULL) library = dlopen("libvips.so", RTLD_NOW | RTLD_LOCAL);
    }
    if (library == NULL) {
        const char *reason = dlerror();
        if (named != NULL && named[0] != '\0') {
            snprintf(start_error_text, sizeof start_error_text, "libvips could not be loaded from PARLEY_LIBVIPS: %s", reason ? reason : "not found");
        } else {
            snprintf(start_error_text, sizeof start_error_text, "libvips 8 is not installed (install libvips42): %s", reason ? reason : "not found");
        }
        start_error = start_error_text;
        return;
    }
    // dlsym on the library's handle also finds what its own dependencies export (GObject's unref).
    struct { void **slot; const char *name; } symbols[] = {
        {(void **)&vips.init, "vips_init"},
        {(void **)&vips.block_untrusted_set, "vips_block_untrusted_set"},
        {(void **)&vips.operation_block_set, "vips_operation_block_set"},
        {(void **)&vips.cache_set_max, "vips_cache_set_max"},
        {(void **)&vips.image_new_from_file, "vips_image_new_from_file"},
        {(void **)&vips.thumbnail, "vips_thumbnail"},
        {(void **)&vips.jpegsave, "vips_jpegsave"},
        {(void **)&vips.flatten, "vips_flatten"},
        {(void **)&vips.array_double_new, "vips_array_double_new"},
        {(void **)&vips.area_unref, "vips_area_unref"},
        {(void **)&vips.object_unref, "g_object_unref"},
        {(void **)&vips.image_get_width, "vips_image_get_width"},
        {(void **)&vips.image_get_height, "vips_image_get_height"},
        {(void **)&vips.image_hasalpha, "vips_image_hasalpha"},
        {(void **)&vips.image_get_orientation_swap, "vips_image_get_orientation_swap"},
        {(void **)&vips.error_buffer, "vips_error_buffer"},
        {(void **)&vips.error_clear, "vips_error_clear"},
    };
    for (size_t index = 0; index < sizeof symbols / sizeof symbols[0]; index++) {
        *symbols[index].slot = dlsym(library, symbols[index].name);
        if (*symbols[index].slot == NULL) {
            snprintf(start_error_text, sizeof start_error_text, "libvips lacks %s (libvips 8.13 or later is needed)", symbols[index].name);
            start_error = start_error_text;
            return;
        }
    }
    if (vips.init("parley") != 0) {
        snprintf(start_error_text, sizeof start_error_text, "libvips did not start: %s", vips.error_buffer() ? vips.error_buffer() : "no reason given");
        start_error = start_error_text;
    }
}

int parley_vips_start(void) {
    pthread_once(&started, start);
    return start_error == NULL ? 0 : -1;
}

const char *parley_vips_start_error(void) { return start_error; }

// Every function below is called only after parley_vips_start returned 0.

void parley_vips_block_untrusted(int on) { vips.block_untrusted_set(on); }
void parley_vips_block_operation(const char *name, int blocked) { vips.operation_block_set(name, blocked); }
void parley_vips_cache_set_max(int max) { vips.cache_set_max(max); }

ParleyVipsImage *parley_vips_open(const char *path) {
    return vips.image_new_from_file(path, "access", ACCESS_SEQUENTIAL, "fail_on", FAIL_ON_ERROR, NULL);
}

int parley_vips_thumbnail(const char *path, ParleyVipsImage **out, int size) {
    return vips.thumbnail(path, (void **)out, size, "height", size, "size", SIZE_DOWN, "fail_on", FAIL_ON_ERROR, NULL);
}

int parley_vips_jpegsave(ParleyVipsImage *image, const char *path, int quality) {
    return vips.jpegsave(image, path, "Q", quality, "strip", GLIB_TRUE, "optimize_coding", GLIB_TRUE, NULL);
}

int parley_vips_flatten_white(ParleyVipsImage *image, ParleyVipsImage **out) {
    double white[3] = {255, 255, 255};
    void *background = vips.array_double_new(white, 3);
    int result = vips.flatten(image, (void **)out, "background", background, NULL);
    vips.area_unref(background);  // VIPS_AREA(background): the array is its area
    return result;
}

void parley_vips_unref(ParleyVipsImage *image) { vips.object_unref(image); }
int parley_vips_width(const ParleyVipsImage *image) { return vips.image_get_width(image); }
int parley_vips_height(const ParleyVipsImage *image) { return vips.image_get_height(image); }
int parley_vips_has_alpha(ParleyVipsImage *image) { return vips.image_hasalpha(image); }
int parley_vips_orientation_swap(ParleyVipsImage *image) { return vips.image_get_orientation_swap(image); }
const char *parley_vips_error(void) { return vips.error_buffer(); }
void parley_vips_error_clear(void) { vips.error_clear(); }
