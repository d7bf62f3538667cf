#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

// Macros over SSL_ctrl / SSL_CTX_ctrl, and constants built from macros, which Swift cannot
// import: small inline wrappers (../shared/PLATFORM.md §1).
static inline long parley_ssl_ctx_set_min_tls12(SSL_CTX *ctx) { return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION); }
static inline long parley_ssl_ctx_set_modes(SSL_CTX *ctx) {
    return SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
}
static inline uint64_t parley_ssl_ctx_ignore_unexpected_eof(SSL_CTX *ctx) { return SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION); }
static inline long parley_ssl_set_server_name(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }
static inline int parley_ssl_filetype_pem(void) { return SSL_FILETYPE_PEM; }
static inline int parley_ssl_verify_peer(void) { return SSL_VERIFY_PEER; }
static inline uint64_t parley_ssl_ctx_prefer_server_ciphers(SSL_CTX *ctx) { return SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE); }
static inline long parley_ssl_ctx_set_session_cache_server(SSL_CTX *ctx) { return SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER); }
