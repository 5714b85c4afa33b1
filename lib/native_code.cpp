// Trust in native code (native_code.h): the opt-in, Ed25519 signatures over delegate payloads.
#include "etmlir/runtime/native_code.h"

#include <cstdio>
#include <cstring>

#include "etmlir/runtime/backend.h"

#if defined(ETMLIR_HAVE_LIBSODIUM)
#include <sodium.h>
#endif

namespace etmlir {
namespace {

constexpr const char kSecretKeyFileTag[] = "etmlir-ed25519-secret-key";

// The two ways to proceed, as every refusal names them (messages are at most 255 characters with the
// "method 'forward' delegate 0 (backend 'cpu'): init failed: cpu delegate 0: " prefix).
constexpr const char kAllow[] = "allow native code (--allow-native, allow_native_code=True)";
constexpr const char kTrust[] = "(--trusted-key, trusted_keys=)";

#if defined(ETMLIR_HAVE_LIBSODIUM)
bool sodium_ready() {
  static const bool ready = sodium_init() >= 0;  // thread-safe; sodium_init is idempotent
  return ready;
}
#endif

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool verify_message(const PayloadSignature& s, const uint8_t* message) {
#if defined(ETMLIR_HAVE_LIBSODIUM)
  return crypto_sign_verify_detached(s.signature, message, kSignedMessageBytes, s.public_key) == 0;
#else
  (void)s;
  (void)message;
  return false;
#endif
}

bool starts_with(const char* text, size_t size, const char* word) {
  size_t n = std::strlen(word);
  return size >= n && std::memcmp(text, word, n) == 0;
}

}  // namespace

bool native_code_signatures_supported() {
#if defined(ETMLIR_HAVE_LIBSODIUM)
  return sodium_ready();
#else
  return false;
#endif
}

Error signed_message(Span<const uint8_t> payload, uint8_t* out) {
#if defined(ETMLIR_HAVE_LIBSODIUM)
  if (!sodium_ready()) return Error::make(ErrorCode::Internal, "libsodium failed to initialize");
  std::memcpy(out, kSignatureDomain, sizeof(kSignatureDomain));
  crypto_hash_sha512_state state;
  crypto_hash_sha512_init(&state);
  crypto_hash_sha512_update(&state, payload.data(), payload.size());
  crypto_hash_sha512_final(&state, out + sizeof(kSignatureDomain));
  return Error::ok();
#else
  (void)payload;
  (void)out;
  return Error::make(ErrorCode::NotSupported, "this runtime was built without libsodium: it cannot sign or check "
                                              "signatures");
#endif
}

Error ed25519_public_key(const uint8_t* seed, uint8_t* public_key) {
#if defined(ETMLIR_HAVE_LIBSODIUM)
  if (!sodium_ready()) return Error::make(ErrorCode::Internal, "libsodium failed to initialize");
  uint8_t secret[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(public_key, secret, seed);
  sodium_memzero(secret, sizeof(secret));
  return Error::ok();
#else
  (void)seed;
  (void)public_key;
  return Error::make(ErrorCode::NotSupported, "this runtime was built without libsodium: it cannot make keys");
#endif
}

Error sign_payload(const uint8_t* seed, Span<const uint8_t> payload, uint8_t* signature) {
#if defined(ETMLIR_HAVE_LIBSODIUM)
  uint8_t message[kSignedMessageBytes];
  ET_CHECK_OK(signed_message(payload, message));
  uint8_t public_key[crypto_sign_PUBLICKEYBYTES];
  uint8_t secret[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(public_key, secret, seed);
  crypto_sign_detached(signature, nullptr, message, sizeof(message), secret);
  sodium_memzero(secret, sizeof(secret));
  return Error::ok();
#else
  (void)seed;
  (void)payload;
  (void)signature;
  return Error::make(ErrorCode::NotSupported, "this runtime was built without libsodium: it cannot sign");
#endif
}

bool verify_payload_signature(const uint8_t* public_key, const uint8_t* signature, Span<const uint8_t> payload) {
#if defined(ETMLIR_HAVE_LIBSODIUM)
  uint8_t message[kSignedMessageBytes];
  if (signed_message(payload, message)) return false;
  return verify_message(PayloadSignature{public_key, signature}, message);
#else
  (void)public_key;
  (void)signature;
  (void)payload;
  return false;
#endif
}

const char* key_fingerprint(const uint8_t* public_key, char* buffer, size_t size) {
  if (size == 0) return buffer;
#if defined(ETMLIR_HAVE_LIBSODIUM)
  if (sodium_ready()) {
    uint8_t digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, public_key, kEd25519PublicKeyBytes);
    std::snprintf(buffer, size, "sha256:%02x%02x%02x%02x%02x%02x%02x%02x", digest[0], digest[1], digest[2],
                  digest[3], digest[4], digest[5], digest[6], digest[7]);
    return buffer;
  }
#else
  (void)public_key;
#endif
  std::snprintf(buffer, size, "(no libsodium)");
  return buffer;
}

Error parse_trusted_key(const char* text, size_t size, TrustedKey* out) {
  constexpr size_t kTag = sizeof(kPublicKeyFileTag) - 1;
  constexpr size_t kDigits = 2 * kEd25519PublicKeyBytes;
  if (starts_with(text, size, kSecretKeyFileTag))
    return Error::make(ErrorCode::InvalidArgument,
                       "this is a secret key (%s): give the public key, the .pub file next to it", kSecretKeyFileTag);
  if (!starts_with(text, size, kPublicKeyFileTag) || size == kTag || text[kTag] != ' ')
    return Error::make(ErrorCode::InvalidArgument,
                       "not an etmlir public key: it should be one line '%s <64 hex digits>' (et-sign keygen "
                       "writes one)",
                       kPublicKeyFileTag);
  const char* digits = text + kTag + 1;
  size_t left = size - kTag - 1;
  size_t n = 0;
  while (n < left && hex_value(digits[n]) >= 0) ++n;
  if (n != kDigits)
    return Error::make(ErrorCode::InvalidArgument, "the public key has %zu hex digits after '%s '; an Ed25519 key has %zu",
                       n, kPublicKeyFileTag, kDigits);
  for (size_t i = n; i < left; ++i) {
    if (!is_space(digits[i]))
      return Error::make(ErrorCode::InvalidArgument, "unexpected text after the public key's %zu hex digits (byte %zu)",
                         kDigits, kTag + 1 + i);
  }
  for (size_t i = 0; i < kEd25519PublicKeyBytes; ++i)
    out->bytes[i] = static_cast<uint8_t>(hex_value(digits[2 * i]) * 16 + hex_value(digits[2 * i + 1]));
  return Error::ok();
}

Error check_native_code(const BackendInitContext& context, Span<const uint8_t> payload) {
  const NativeCodeTrust* trust = context.trust;
  bool allowed = trust != nullptr && trust->allow_native_code;
  Span<const TrustedKey> keys = trust != nullptr ? trust->trusted_keys : Span<const TrustedKey>();
  Span<const PayloadSignature> signatures = context.signatures;
  bool supported = native_code_signatures_supported();
  // A signature by a trusted key decides first: one that verifies lets the payload run; one that does
  // not refuses it even when native code is allowed (someone you trust signed other bytes than these).
  const PayloadSignature* failed = nullptr;
  if (supported && !keys.empty()) {
    uint8_t message[kSignedMessageBytes];
    bool hashed = false;
    for (const PayloadSignature& s : signatures) {
      bool trusted = false;
      for (const TrustedKey& k : keys)
        trusted = trusted || std::memcmp(k.bytes, s.public_key, kEd25519PublicKeyBytes) == 0;
      if (!trusted) continue;
      if (!hashed) {
        ET_CHECK_OK(signed_message(payload, message));
        hashed = true;
      }
      if (verify_message(s, message)) return Error::ok();
      if (failed == nullptr) failed = &s;
    }
  }
  char fingerprint[32];
  if (failed != nullptr)
    return Error::make(ErrorCode::Untrusted,
                       "native code does not match its signature by trusted key %s: the payload changed after it "
                       "was signed; refused (re-sign it if you changed it yourself)",
                       key_fingerprint(failed->public_key, fingerprint, sizeof(fingerprint)));
  if (allowed) return Error::ok();
  if (!supported)
    return Error::make(ErrorCode::Untrusted,
                       "native code%s: this runtime (built without libsodium) checks no signatures; to run it, %s",
                       signatures.empty() ? "" : " (signed)", kAllow);
  if (signatures.empty())
    return Error::make(ErrorCode::Untrusted,
                       "unsigned native code: to run it, %s or sign it (et-sign) and trust the key %s", kAllow,
                       kTrust);
  key_fingerprint(signatures[0].public_key, fingerprint, sizeof(fingerprint));
  if (signatures.size() == 1)
    return Error::make(ErrorCode::Untrusted, "native code signed by %s, not a trusted key: trust it %s or %s",
                       fingerprint, kTrust, kAllow);
  return Error::make(ErrorCode::Untrusted, "native code signed by %s and %zu other%s, none trusted: trust one %s or %s",
                     fingerprint, signatures.size() - 1, signatures.size() == 2 ? "" : "s", kTrust, kAllow);
}

}  // namespace etmlir
