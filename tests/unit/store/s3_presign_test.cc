// SigV4 query-string presigning against AWS's documented example
// ("Authenticating Requests: Using Query Parameters"): a GET of
// examplebucket's test.txt, signed 2013-05-24 00:00:00 UTC for a day.
#include "kiln/store/s3_presign.h"

#include <gtest/gtest.h>

#include "kiln/common/error.h"

namespace kiln::store {
namespace {

PresignRequest awsExample() {
  PresignRequest r;
  r.method = "GET";
  r.endpoint = "https://examplebucket.s3.amazonaws.com";
  r.path = "/test.txt";
  r.region = "us-east-1";
  r.accessKey = "AKIAIOSFODNN7EXAMPLE";
  r.secretKey = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  r.amzDate = "20130524T000000Z";
  r.expiresSec = 86400;
  return r;
}

TEST(S3Presign, MatchesAwsDocumentedExample) {
  EXPECT_EQ(presignUrl(awsExample()),
            "https://examplebucket.s3.amazonaws.com/test.txt"
            "?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3"
            "%2Faws4_request"
            "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400"
            "&X-Amz-SignedHeaders=host"
            "&X-Amz-Signature="
            "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
}

TEST(S3Presign, EncodesKeysAndRefusesMalformedInput) {
  auto r = awsExample();
  r.path = "/bucket/staging/a b+c.nar";
  EXPECT_EQ(
      presignUrl(r).substr(0, 77),
      "https://examplebucket.s3.amazonaws.com/bucket/staging/a%20b%2Bc.nar"
      "?X-Amz-Alg");
  EXPECT_NE(presignUrl(r), presignUrl(awsExample()));
  r = awsExample();
  r.expiresSec = 0;
  EXPECT_THROW(presignUrl(r), FormatError);
  r = awsExample();
  r.amzDate = "2013-05-24";
  EXPECT_THROW(presignUrl(r), FormatError);
  r = awsExample();
  r.endpoint = "ftp://x";
  EXPECT_THROW(presignUrl(r), FormatError);
  EXPECT_EQ(amzDate(1369353600), "20130524T000000Z");
}

// A part of a multipart upload: its parameters are sorted into the signed
// query after the X-Amz- ones (byte order), encoded, and signed: another
// part number is another signature (accepted by radosgw:
// ObjectStore FarmBucket.PresignedPartsMakeAMultipartUpload).
TEST(S3Presign, SignsExtraQueryParameters) {
  auto r = awsExample();
  r.method = "PUT";
  r.query = {{"uploadId", "2~a+b/c"}, {"partNumber", "2"}};
  std::string url = presignUrl(r);
  auto sig = url.find("&X-Amz-Signature=");
  ASSERT_NE(sig, std::string::npos);
  EXPECT_EQ(url.substr(0, sig).substr(url.find("&X-Amz-SignedHeaders")),
            "&X-Amz-SignedHeaders=host&partNumber=2&uploadId=2~a%2Bb%2Fc");
  auto other = r;
  other.query[1].second = "3";
  std::string url3 = presignUrl(other);
  EXPECT_NE(url.substr(sig), url3.substr(url3.find("&X-Amz-Signature=")));
}

}  // namespace
}  // namespace kiln::store
