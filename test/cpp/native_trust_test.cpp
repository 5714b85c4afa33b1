// Trust in native code (include/etmlir/runtime/native_code.h): a "cpu" delegate, whose payload is
// a shared object the runtime loads and runs, is refused unless the load allows native code or the
// payload is signed (Ed25519, libsodium) by a trusted key; the same rule holds for a "cpu" delegate
// inside a "nested" payload. The measured attack: a payload changed after signing, its CRC
// recomputed (so et-verify-pte and the payload reader accept it), must be refused, and refused
// before anything of it is written out or mapped.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cpu_backend.h"
#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/native_code.h"
#include "etmlir/runtime/payload_header.h"
#include "etmlir/runtime/program.h"
#include "nested_backend.h"
#include "test_util.h"

namespace etmlir {
namespace {

#define REQUIRE_SIGNATURES()                                                                    \
  do {                                                                                          \
    if (!native_code_signatures_supported())                                                    \
      GTEST_SKIP() << "this runtime was built without libsodium (it checks no signatures)";     \
  } while (0)

// A key pair from a fixed seed (the seed is the secret key).
struct Key {
  explicit Key(uint8_t fill) : seed(kEd25519SeedBytes), public_key(kEd25519PublicKeyBytes) {
    for (size_t i = 0; i < seed.size(); ++i) seed[i] = static_cast<uint8_t>(fill + 7 * i);
    Error e = ed25519_public_key(seed.data(), public_key.data());
    EXPECT_FALSE(e) << e.message();
  }
  TrustedKey trusted() const {
    TrustedKey k;
    std::memcpy(k.bytes, public_key.data(), sizeof(k.bytes));
    return k;
  }
  test::PteSignature sign(const std::vector<uint8_t>& payload) const {
    test::PteSignature s{public_key, std::vector<uint8_t>(kEd25519SignatureBytes)};
    Error e = sign_payload(seed.data(), Span<const uint8_t>(payload.data(), payload.size()), s.signature.data());
    EXPECT_FALSE(e) << e.message();
    return s;
  }
  std::string fingerprint() const {
    char buffer[32];
    return key_fingerprint(public_key.data(), buffer, sizeof(buffer));
  }
  std::vector<uint8_t> seed;
  std::vector<uint8_t> public_key;
};

// Mappings of loaded payloads: a dlopen'ed memfd shows as "/memfd:etmlir-cpu-payload".
size_t payload_mappings() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  size_t n = 0;
  while (std::getline(maps, line)) n += line.find("etmlir-cpu-payload") != std::string::npos;
  return n;
}

class NativeTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    so_ = test::cpu_fixture_bytes();
    ASSERT_FALSE(so_.empty()) << "the fixture shared object was not built";
    ASSERT_FALSE(register_nested_backend(backends_));
    ASSERT_FALSE(register_cpu_backend(backends_));
    test::CpuPayloadHeader h;
    h.entry = "scale2";
    h.inputs = {{ScalarType::Float, {4, 4}}};
    h.outputs = {{ScalarType::Float, {4, 4}}};
    header_ = h;
    payload_ = test::write_cpu_payload(h, so_);
  }

  // Loads "forward" of `pte` with `trust`: the error (ok when it loaded, and then it ran y = 2x).
  Error load(const std::vector<uint8_t>& pte, const NativeCodeTrust* trust) {
    test::LoadedMethod loaded;
    if (Error e = test::load_forward(pte, &backends_, &loaded, trust)) return e;
    if (!loaded.method) return loaded.error;
    float x[16];
    for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i) - 3.f;
    int64_t sizes[] = {4, 4};
    EXPECT_FALSE(loaded.method->set_input(0, x, sizeof(x), ScalarType::Float, sizes));
    Error run = loaded.method->execute();
    EXPECT_FALSE(run) << run.message();
    const float* y = loaded.method->output(0).to_tensor().data_as<float>();
    for (int i = 0; i < 16; ++i) EXPECT_EQ(y[i], 2.f * x[i]) << i;
    return Error::ok();
  }

  // The error of a load that must be refused for trust: no payload mapped, code Untrusted.
  std::string refused(const std::vector<uint8_t>& pte, const NativeCodeTrust* trust) {
    size_t before = payload_mappings();
    Error e = load(pte, trust);
    EXPECT_EQ(payload_mappings(), before) << "the refused payload was mapped";
    EXPECT_EQ(e.code(), ErrorCode::Untrusted) << e.message();
    return e.message();
  }

  static NativeCodeTrust trusting(const std::vector<TrustedKey>& keys, bool allow = false) {
    NativeCodeTrust trust;
    trust.allow_native_code = allow;
    trust.trusted_keys = Span<const TrustedKey>(keys.data(), keys.size());
    return trust;
  }

  // The fixture's shared object with a byte of its code changed, wrapped in a payload with the
  // same header: the header's CRC is recomputed, so only a signature tells it from the original.
  std::vector<uint8_t> tampered_payload() const {
    std::vector<uint8_t> so = so_;
    so[so.size() / 2] ^= 0xff;
    return test::write_cpu_payload(header_, so);
  }

  std::vector<uint8_t> so_;
  test::CpuPayloadHeader header_;
  std::vector<uint8_t> payload_;
  BackendRegistry backends_;
};

const char kPrefix[] = "method 'forward' delegate 0 (backend 'cpu'): init failed: cpu delegate 0: ";

TEST_F(NativeTrustTest, AnUnsignedPayloadIsRefusedWithoutTheOptIn) {
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", payload_, {4, 4});
  std::string message = refused(pte, nullptr);
  if (native_code_signatures_supported()) {
    EXPECT_EQ(message, std::string(kPrefix) +
                           "unsigned native code: to run it, allow native code (--allow-native, "
                           "allow_native_code=True) or sign it (et-sign) and trust the key (--trusted-key, "
                           "trusted_keys=)");
  } else {
    EXPECT_EQ(message, std::string(kPrefix) +
                           "native code: this runtime (built without libsodium) checks no signatures; to run it, "
                           "allow native code (--allow-native, allow_native_code=True)");
  }
  NativeCodeTrust nothing;  // a trust that allows nothing and trusts no key says the same
  EXPECT_EQ(refused(pte, &nothing), message);
  EXPECT_LT(message.size(), Error::kMaxMessage - 1) << "the message was cut";
}

TEST_F(NativeTrustTest, AnUnsignedPayloadRunsWithTheOptIn) {
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", payload_, {4, 4});
  NativeCodeTrust allow;
  allow.allow_native_code = true;
  Error e = load(pte, &allow);
  EXPECT_FALSE(e) << e.message();
}

TEST_F(NativeTrustTest, APayloadSignedByATrustedKeyRuns) {
  REQUIRE_SIGNATURES();
  Key key(1), other(2);
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", payload_, {4, 4}, {key.sign(payload_)});
  std::vector<TrustedKey> keys = {other.trusted(), key.trusted()};
  NativeCodeTrust trust = trusting(keys);
  Error e = load(pte, &trust);
  EXPECT_FALSE(e) << e.message();
  // A second signature by an untrusted key does not get in the way.
  pte = test::one_delegate_program("cpu", payload_, {4, 4}, {Key(3).sign(payload_), key.sign(payload_)});
  e = load(pte, &trust);
  EXPECT_FALSE(e) << e.message();
}

TEST_F(NativeTrustTest, APayloadSignedByAnUntrustedKeyIsRefused) {
  REQUIRE_SIGNATURES();
  Key key(1), other(2);
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", payload_, {4, 4}, {key.sign(payload_)});
  std::vector<TrustedKey> keys = {other.trusted()};
  NativeCodeTrust trust = trusting(keys);
  std::string expected = std::string(kPrefix) + "native code signed by " + key.fingerprint() +
                         ", not a trusted key: trust it (--trusted-key, trusted_keys=) or allow native code "
                         "(--allow-native, allow_native_code=True)";
  EXPECT_EQ(refused(pte, &trust), expected);
  EXPECT_EQ(refused(pte, nullptr), expected);
  // Several signers, none trusted: the first is named (the message stays whole: under 256 bytes).
  std::vector<test::PteSignature> three;
  for (uint8_t fill : {1, 4, 5}) three.push_back(Key(fill).sign(payload_));
  pte = test::one_delegate_program("cpu", payload_, {4, 4}, three);
  EXPECT_EQ(refused(pte, &trust), std::string(kPrefix) + "native code signed by " + key.fingerprint() +
                                      " and 2 others, none trusted: trust one (--trusted-key, trusted_keys=) or "
                                      "allow native code (--allow-native, allow_native_code=True)");
  EXPECT_EQ(key.fingerprint().size(), 23u);
  EXPECT_EQ(key.fingerprint().rfind("sha256:", 0), 0u);
}

// The measured attack: the shared object changed after signing, the payload's CRC recomputed.
TEST_F(NativeTrustTest, APayloadChangedAfterSigningIsRefusedEvenWithItsCrcRecomputed) {
  REQUIRE_SIGNATURES();
  Key key(1);
  std::vector<uint8_t> tampered = tampered_payload();
  // The payload reader accepts it: the checksum matches the new body.
  PayloadView view;
  ASSERT_FALSE(read_payload(Span<const uint8_t>(tampered.data(), tampered.size()), "cpu", &view));
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", tampered, {4, 4}, {key.sign(payload_)});
  std::vector<TrustedKey> keys = {key.trusted()};
  NativeCodeTrust trust = trusting(keys);
  std::string expected = std::string(kPrefix) + "native code does not match its signature by trusted key " +
                         key.fingerprint() + ": the payload changed after it was signed; refused (re-sign it if you "
                                             "changed it yourself)";
  EXPECT_EQ(refused(pte, &trust), expected);
  // Allowing native code does not override a trusted key's signature that does not match.
  NativeCodeTrust both = trusting(keys, /*allow=*/true);
  EXPECT_EQ(refused(pte, &both), expected);
}

TEST_F(NativeTrustTest, TheSignatureCoversTheHeaderFieldsThatChooseWhatRuns) {
  REQUIRE_SIGNATURES();
  Key key(1);
  std::vector<TrustedKey> keys = {key.trusted()};
  NativeCodeTrust trust = trusting(keys);
  // Another entry point of the same shared object, a larger arena: the body is unchanged.
  test::CpuPayloadHeader other_entry = header_;
  other_entry.entry = "add_f32";
  test::CpuPayloadHeader other_arena = header_;
  other_arena.arena_bytes = 1 << 20;
  for (const test::CpuPayloadHeader& h : {other_entry, other_arena}) {
    std::vector<uint8_t> changed = test::write_cpu_payload(h, so_);
    std::vector<uint8_t> pte = test::one_delegate_program("cpu", changed, {4, 4}, {key.sign(payload_)});
    EXPECT_CONTAINS(refused(pte, &trust), "does not match its signature by trusted key");
  }
}

TEST_F(NativeTrustTest, ACorruptSignedPayloadIsRefusedWithoutCrashing) {
  REQUIRE_SIGNATURES();
  Key key(1);
  std::vector<TrustedKey> keys = {key.trusted()};
  NativeCodeTrust trust = trusting(keys);
  // Garbage where the code was (the ELF header kept, so that only the signature can tell).
  std::vector<uint8_t> so = so_;
  for (size_t i = 64; i < so.size(); ++i) so[i] = static_cast<uint8_t>(i * 131);
  std::vector<uint8_t> corrupt = test::write_cpu_payload(header_, so);
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", corrupt, {4, 4}, {key.sign(payload_)});
  EXPECT_CONTAINS(refused(pte, &trust), "the payload changed after it was signed");
  // The signature itself damaged: refused too.
  test::PteSignature bad = key.sign(payload_);
  bad.signature[5] ^= 1;
  pte = test::one_delegate_program("cpu", payload_, {4, 4}, {bad});
  EXPECT_CONTAINS(refused(pte, &trust), "does not match its signature");
}

TEST_F(NativeTrustTest, AnInnerCpuDelegateOfANestedPayloadFollowsTheSameRule) {
  std::vector<uint8_t> inner_unsigned = test::one_delegate_program("cpu", payload_, {4, 4});
  test::PayloadFields nested;
  nested.backend_id = "nested";
  nested.body_format = "pte";
  nested.entry_points = {{"forward", "forward"}};
  std::vector<uint8_t> pte =
      test::one_delegate_program("nested", test::write_payload(nested, inner_unsigned), {4, 4});
  std::string message = refused(pte, nullptr);
  EXPECT_EQ(message.rfind("method 'forward' delegate 0 (backend 'nested'): init failed: loading the payload: "
                          "method 'forward' delegate 0 (backend 'cpu'): init failed: cpu delegate 0: ",
                          0),
            0u)
      << message;
  NativeCodeTrust allow;
  allow.allow_native_code = true;
  Error e = load(pte, &allow);
  EXPECT_FALSE(e) << e.message();
  if (!native_code_signatures_supported()) return;
  // Signed inside: the outer load's trusted key lets it run, another key does not.
  Key key(1), other(2);
  std::vector<uint8_t> inner_signed = test::one_delegate_program("cpu", payload_, {4, 4}, {key.sign(payload_)});
  pte = test::one_delegate_program("nested", test::write_payload(nested, inner_signed), {4, 4});
  std::vector<TrustedKey> keys = {key.trusted()};
  NativeCodeTrust trust = trusting(keys);
  e = load(pte, &trust);
  EXPECT_FALSE(e) << e.message();
  std::vector<TrustedKey> others = {other.trusted()};
  NativeCodeTrust wrong = trusting(others);
  EXPECT_CONTAINS(refused(pte, &wrong), "cpu delegate 0: native code signed by " + key.fingerprint());
}

TEST_F(NativeTrustTest, MalformedSignaturesFailProgramLoad) {
  std::vector<uint8_t> short_key(31, 1), signature(kEd25519SignatureBytes, 2);
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", payload_, {4, 4}, {{short_key, signature}});
  test::LoadedMethod loaded;
  Error e = test::load_forward(pte, &backends_, &loaded, test::allow_native_code());
  EXPECT_EQ(e.code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(std::string(e.message()),
                  "delegate 0: signature 0 has a 31-byte key and a 64-byte signature (Ed25519: 32 and 64)");
  std::vector<test::PteSignature> many(kMaxPayloadSignatures + 1,
                                       test::PteSignature{std::vector<uint8_t>(32, 1), signature});
  pte = test::one_delegate_program("cpu", payload_, {4, 4}, many);
  e = test::load_forward(pte, &backends_, &loaded, test::allow_native_code());
  EXPECT_CONTAINS(std::string(e.message()), "delegate 0 has 9 signatures; at most 8 are read");
}

TEST_F(NativeTrustTest, SizingTheMethodAllocatorNeedsNoTrust) {
  // MethodMeta::method_allocator_bytes reads the header only: it runs nothing.
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", payload_, {4, 4});
  test::LoadedMethod loaded;
  ASSERT_FALSE(test::load_forward(pte, &backends_, &loaded));
  Result<MethodMeta> meta = loaded.program->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  Result<size_t> bytes = meta->method_allocator_bytes(&backends_, &test::all_kernels());
  EXPECT_TRUE(bytes.ok()) << bytes.error().message();
}

TEST(TrustedKeyFile, ParsesThePublicKeyLine) {
  std::string hex;
  for (int i = 0; i < 32; ++i) {
    char two[3];
    std::snprintf(two, sizeof(two), "%02X", i * 5);
    hex += two;
  }
  std::string text = std::string(kPublicKeyFileTag) + " " + hex + "\n";
  TrustedKey key;
  ASSERT_FALSE(parse_trusted_key(text.data(), text.size(), &key));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(key.bytes[i], i * 5) << i;
  auto error = [](const std::string& t) {
    TrustedKey k;
    return std::string(parse_trusted_key(t.data(), t.size(), &k).message());
  };
  EXPECT_EQ(error("etmlir-ed25519-secret-key " + hex + "\n"),
            "this is a secret key (etmlir-ed25519-secret-key): give the public key, the .pub file next to it");
  EXPECT_EQ(error(hex),
            "not an etmlir public key: it should be one line 'etmlir-ed25519-public-key <64 hex digits>' (et-sign "
            "keygen writes one)");
  EXPECT_EQ(error(std::string(kPublicKeyFileTag) + " " + hex.substr(2) + "\n"),
            "the public key has 62 hex digits after 'etmlir-ed25519-public-key '; an Ed25519 key has 64");
  EXPECT_EQ(error(std::string(kPublicKeyFileTag) + " " + hex + " extra\n"),
            "unexpected text after the public key's 64 hex digits (byte 91)");
  EXPECT_EQ(error(""), error(hex));
}

TEST(Signatures, SignAndVerifyOverTheExactBytes) {
  REQUIRE_SIGNATURES();
  Key key(9);
  std::vector<uint8_t> payload(1000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i);
  test::PteSignature s = key.sign(payload);
  Span<const uint8_t> bytes(payload.data(), payload.size());
  EXPECT_TRUE(verify_payload_signature(key.public_key.data(), s.signature.data(), bytes));
  payload[999] ^= 1;
  EXPECT_FALSE(verify_payload_signature(key.public_key.data(), s.signature.data(), bytes));
  payload[999] ^= 1;
  EXPECT_FALSE(verify_payload_signature(Key(8).public_key.data(), s.signature.data(), bytes));
  // What is signed: the domain string with its NUL, then SHA-512 of the payload.
  uint8_t message[kSignedMessageBytes];
  ASSERT_FALSE(signed_message(bytes, message));
  EXPECT_EQ(std::memcmp(message, "etmlir delegate payload signature v1", sizeof(kSignatureDomain)), 0);
}

}  // namespace
}  // namespace etmlir
