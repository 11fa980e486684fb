#include "kiln/store/signature.h"

#include <gtest/gtest.h>

#include "kiln/common/encoding.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/narinfo.h"
#include "test_support.h"

namespace kiln::store {
namespace {

SecretKey vectorSecret() {
  return readSecretKeyFile(test::vectorPath("cache/secret.key"));
}

// Every row of fingerprints.tsv: the fingerprint is re-created from the
// narinfo and the signature re-made byte for byte from secret.key.
TEST(SignatureVectors, EveryFingerprintAndSignature) {
  auto rows = test::readTsv(test::vectorPath("cache/fingerprints.tsv"));
  ASSERT_EQ(rows.size(), 14u);
  auto sk = vectorSecret();
  PublicKeys trusted;
  trusted.add(readPublicKeyFile(test::vectorPath("cache/public.key")));
  StoreDir sd;
  for (size_t i = 1; i < rows.size(); ++i) {
    auto f = test::vectorPath("cache/" + rows[i][0]);
    auto ni = NarInfo::parse(sd, readFile(f), f);
    auto fp =
        pathFingerprint(sd, ni.path, ni.narHash, ni.narSize, ni.references);
    EXPECT_EQ(fp, rows[i][1]);
    EXPECT_EQ(sk.sign(fp), rows[i][2]);
    EXPECT_TRUE(trusted.verify(fp, rows[i][2]));
  }
}

TEST(Signature, KeyFilesRoundTrip) {
  auto sk = vectorSecret();
  EXPECT_EQ(sk.name(), "test-cache-1");
  EXPECT_EQ(sk.toString(), readFile(test::vectorPath("cache/secret.key")));
  EXPECT_EQ(sk.toPublicKey().toString(),
            readFile(test::vectorPath("cache/public.key")));
}

TEST(Signature, TamperedFieldsFail) {
  auto rows = test::readTsv(test::vectorPath("cache/fingerprints.tsv"));
  PublicKeys trusted;
  trusted.add(vectorSecret().toPublicKey());
  const auto& fp = rows[1][1];
  const auto& sig = rows[1][2];
  ASSERT_TRUE(trusted.verify(fp, sig));
  // NarSize 400 → 401; a changed hash character; a dropped reference.
  auto tampered = fp;
  tampered.replace(tampered.find(";400;"), 5, ";401;");
  EXPECT_FALSE(trusted.verify(tampered, sig));
  tampered = fp;
  tampered[tampered.find("sha256:") + 8] ^= 1;
  EXPECT_FALSE(trusted.verify(tampered, sig));
  EXPECT_FALSE(trusted.verify(fp.substr(0, fp.rfind(',')), sig));
  // A flipped signature bit.
  auto raw = base64Decode(sig.substr(sig.find(':') + 1));
  raw[10] ^= 4;
  EXPECT_FALSE(trusted.verify(fp, "test-cache-1:" + base64Encode(raw)));
  EXPECT_FALSE(trusted.verify(fp, "garbage"));
}

TEST(Signature, SameBytesUnderAnotherNameDoNotMatch) {
  auto rows = test::readTsv(test::vectorPath("cache/fingerprints.tsv"));
  auto pub = vectorSecret().toPublicKey();
  PublicKeys other;
  other.add(PublicKey("other-cache", pub.key()));
  EXPECT_FALSE(other.verify(rows[1][1], rows[1][2]));
  PublicKeys none;
  EXPECT_FALSE(none.verify(rows[1][1], rows[1][2]));
}

TEST(Signature, GeneratedKeysSignAndVerify) {
  auto sk = SecretKey::generate("kiln-test-1");
  auto again = SecretKey::parse(sk.toString());
  EXPECT_EQ(again.toString(), sk.toString());
  auto pub = PublicKey::parse(sk.toPublicKey().toString());
  PublicKeys trusted;
  trusted.add(pub);
  auto sig = sk.sign("data");
  EXPECT_TRUE(trusted.verify("data", sig));
  EXPECT_FALSE(trusted.verify("datA", sig));
  auto other = SecretKey::generate("kiln-test-1");
  EXPECT_FALSE(trusted.verify("data", other.sign("data")));
  EXPECT_THROW(SecretKey::generate(""), FormatError);
  EXPECT_THROW(SecretKey::generate("a b"), FormatError);
}

void expectBadKey(bool secret, const std::string& text,
                  const std::string& reason) {
  try {
    if (secret)
      SecretKey::parse(text);
    else
      PublicKey::parse(text);
    ADD_FAILURE() << "accepted " << text;
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos)
        << e.what();
  }
}

TEST(Signature, MalformedKeyFilesAreRejectedClearly) {
  auto sk = readFile(test::vectorPath("cache/secret.key"));
  auto pk = readFile(test::vectorPath("cache/public.key"));
  expectBadKey(false, "", "not of the form <name>:<base64>");
  expectBadKey(false, pk.substr(pk.find(':')), "empty key name");
  expectBadKey(false, "k:!!!!", "bad base64");
  expectBadKey(false, "k:" + base64Encode("short"), "5 bytes instead of 32");
  expectBadKey(true, "k:" + base64Encode(std::string(32, 'x')),
               "32 bytes instead of 64");
  // The public half swapped for another key's: caught.
  auto raw = base64Decode(sk.substr(sk.find(':') + 1));
  raw[40] ^= 1;
  expectBadKey(true, "k:" + base64Encode(raw), "does not match its seed");
  // A public key file given where a secret key is expected, and back.
  expectBadKey(true, pk, "32 bytes instead of 64");
  expectBadKey(false, sk, "(is it a secret key?)");
  expectBadKey(false, "a b:" + pk.substr(pk.find(':') + 1), "space");
  // Key material never appears in a message, whichever parser fails.
  for (auto text : {"k:" + base64Encode(raw), sk, sk + "!"}) {
    for (bool secret : {true, false}) {
      try {
        if (secret)
          SecretKey::parse(text);
        else
          PublicKey::parse(text);
      } catch (const FormatError& e) {
        auto b64 = text.substr(text.find(':') + 1, 20);
        EXPECT_EQ(std::string(e.what()).find(b64), std::string::npos)
            << e.what();
      }
    }
  }
  // A trailing newline (keys pasted with echo) is tolerated.
  EXPECT_EQ(PublicKey::parse(pk + "\n").toString(), pk);
  TempDir tmp;
  writeFile(tmp.path() + "/bad", "nonsense");
  try {
    readPublicKeyFile(tmp.path() + "/bad");
    ADD_FAILURE();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(tmp.path() + "/bad"),
              std::string::npos);
  }
  EXPECT_THROW(readPublicKeyFile(tmp.path() + "/missing"), SysError);
}

TEST(Signature, FingerprintOfTextPath) {
  StoreDir sd;
  auto h = Hash::parse(
      "sha256:0sg9f58l1jj88w6pdrfdpj5x9b1zrwszk84j81zvby36q9whhhqa");
  EXPECT_EQ(
      pathFingerprint(sd, StorePath("9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt"),
                      h, 120, {}),
      "1;/nix/store/9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt;sha256:"
      "0sg9f58l1jj88w6pdrfdpj5x9b1zrwszk84j81zvby36q9whhhqa;120;");
  EXPECT_THROW(
      pathFingerprint(sd, StorePath("9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt"),
                      hashString(HashAlgo::kSha1, ""), 1, {}),
      Error);
}

}  // namespace
}  // namespace kiln::store
