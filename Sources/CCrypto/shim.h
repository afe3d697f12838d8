// OpenSSL's libcrypto: SHA-256 for token digests, AES-256-GCM and HMAC for sealed content, random keys.
#pragma once
#include <openssl/sha.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
