// OpenSSL's libcrypto, for its digests: HeraldCore hashes access tokens with SHA-256.
#pragma once
#include <openssl/sha.h>
