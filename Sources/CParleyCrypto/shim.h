#include <openssl/sha.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
