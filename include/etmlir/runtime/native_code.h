// Trust in native code: which delegate payloads may run as machine code.
//
// Most payloads are data (the "nested" backend's is a program this runtime
// interprets with bounds-checked kernels). A payload that is machine code (the
// "cpu" backend's shared object) does whatever its author wrote the moment it
// is loaded; a CRC only catches accidents. Such a payload runs only when the
// host says so, per load (Program::load_method's `trust`):
//
//   etmlir::NativeCodeTrust trust;
//   trust.allow_native_code = true;                 // "I trust this file": any native payload runs
//   // or: only payloads signed by one of these keys run
//   etmlir::TrustedKey keys[1];
//   etmlir::parse_trusted_key(text, size, &keys[0]);  // a public key file (et-sign keygen writes one)
//   trust.trusted_keys = etmlir::Span<const etmlir::TrustedKey>(keys, 1);
//   auto method = program->load_method("forward", &memory, &kernels, &backends, &trust);
//
// Signatures: Ed25519 (libsodium) over kSignedMessageBytes bytes, the ASCII
// domain string kSignatureDomain (NUL included) followed by SHA-512 of the
// delegate's payload bytes exactly as the .pte stores them: the shared payload
// header (backend id, format, arch, CPU features, entry points, scratch, body
// offset/size/CRC) and the body. They live in the program, per delegate
// (program.fbs Delegate.signatures: public key + signature), so signing leaves
// the payload itself untouched. runtime/README.md ("Trust and native code")
// is the threat model.
//
// A build without libsodium (CMake found none) cannot check signatures:
// native_code_signatures_supported() is false and only allow_native_code lets
// native payloads run; the refusal says so.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/span.h"

namespace etmlir {

struct BackendInitContext;

constexpr size_t kEd25519PublicKeyBytes = 32;
constexpr size_t kEd25519SignatureBytes = 64;
constexpr size_t kEd25519SeedBytes = 32;
// What is signed: this string with its NUL, then SHA-512 of the payload.
constexpr const char kSignatureDomain[] = "etmlir delegate payload signature v1";
constexpr size_t kSignedMessageBytes = sizeof(kSignatureDomain) + 64;
// A public key file: this word, one space, 64 hex digits, then only whitespace.
constexpr const char kPublicKeyFileTag[] = "etmlir-ed25519-public-key";
// How many signatures one delegate may carry (Program::load refuses more).
constexpr size_t kMaxPayloadSignatures = 8;

struct TrustedKey {
  uint8_t bytes[kEd25519PublicKeyBytes];
};

// What the host trusts, for one load. Default: nothing (native payloads are refused).
struct NativeCodeTrust {
  // Run native payloads whether signed or not: the host vouches for the file.
  bool allow_native_code = false;
  // Run native payloads signed by one of these keys (their bytes are read during load_method only).
  Span<const TrustedKey> trusted_keys;
};

// One signature of a delegate's payload: views into the program (sizes checked by Program::load).
struct PayloadSignature {
  const uint8_t* public_key;  // kEd25519PublicKeyBytes
  const uint8_t* signature;   // kEd25519SignatureBytes
};

// For a backend whose payload is native code, at the start of init(), before
// anything of the payload is written anywhere or loaded: ok when a signature
// by a trusted key verifies over `payload`, or, when none of the trusted keys
// signed it, when context.trust allows native code. Otherwise an Untrusted
// error that says why (unsigned, signed by keys not trusted, or changed after
// a trusted key signed it: refused even when native code is allowed) and the
// ways to proceed.
Error check_native_code(const BackendInitContext& context, Span<const uint8_t> payload);

// True when this build can check (and make) signatures: it was linked with libsodium.
bool native_code_signatures_supported();

// A public key file's text (kPublicKeyFileTag, a space, 64 hex digits, optional trailing whitespace) into *out.
Error parse_trusted_key(const char* text, size_t size, TrustedKey* out);

// "sha256:" and the first 8 bytes of SHA-256(key) in hex (23 characters): how tools and messages
// name a key. "(no libsodium)" in a build without it. `size` >= 24.
const char* key_fingerprint(const uint8_t* public_key, char* buffer, size_t size);

// The message a signature covers (kSignedMessageBytes into `out`). NotSupported without libsodium.
Error signed_message(Span<const uint8_t> payload, uint8_t* out);

// Signing (for tools and tests; the runtime itself only verifies): the public key of a 32-byte
// seed (the secret key), and a signature of `payload` with it. NotSupported without libsodium.
Error ed25519_public_key(const uint8_t* seed, uint8_t* public_key);
Error sign_payload(const uint8_t* seed, Span<const uint8_t> payload, uint8_t* signature);
// True when `signature` by `public_key` verifies over `payload` (false without libsodium).
bool verify_payload_signature(const uint8_t* public_key, const uint8_t* signature, Span<const uint8_t> payload);

}  // namespace etmlir
