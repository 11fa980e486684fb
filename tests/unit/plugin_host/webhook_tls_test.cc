// The `webhook` notifier over https, against a TLS listener on loopback
// with a certificate the test makes (openssl req): refused when its CA is
// not trusted (the system's CAs, or another CA file) or when it does not
// name the URL's host; delivered, with the host name in SNI, when the
// configured CA file holds it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <mutex>
#include <thread>

#include "kiln/common/file.h"
#include "kiln/plugin_host/host_services.h"
#include "kiln/plugin_host/registry.h"
#include "test_support.h"

namespace kiln::plugins {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using ::testing::HasSubstr;

// One POST the listener received, and the SNI name it came with.
struct Delivery {
  std::string sni, event, body;
};

// A TLS HTTP/1.1 listener on 127.0.0.1 (its own thread, one connection at
// a time): answers 200 to each request and records it; a client that
// refuses the certificate just ends the handshake.
class TlsListener {
 public:
  TlsListener(const std::string& cert, const std::string& key)
      : ctx_(asio::ssl::context::tls_server),
        acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    ctx_.use_certificate_chain_file(cert);
    ctx_.use_private_key_file(key, asio::ssl::context::pem);
    thread_ = std::thread([this] { serve(); });
  }
  ~TlsListener() {
    stop_ = true;
    boost::system::error_code ec;
    tcp::socket wake(io_);  // unblocks accept()
    wake.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  std::vector<Delivery> received() {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  void serve() {
    while (!stop_) {
      tcp::socket sock(io_);
      boost::system::error_code ec;
      acceptor_.accept(sock, ec);
      if (ec || stop_) continue;
      beast::ssl_stream<tcp::socket> s(std::move(sock), ctx_);
      s.handshake(asio::ssl::stream_base::server, ec);
      if (ec) continue;  // the client refused us
      beast::flat_buffer buf;
      http::request<http::string_body> req;
      http::read(s, buf, req, ec);
      if (ec) continue;
      const char* sni =
          SSL_get_servername(s.native_handle(), TLSEXT_NAMETYPE_host_name);
      {
        std::lock_guard lock(mu_);
        received_.push_back({sni ? sni : "",
                             std::string(req["X-Kiln-Event"]), req.body()});
      }
      http::response<http::string_body> res(http::status::ok, 11);
      res.body() = "ok";
      res.prepare_payload();
      http::write(s, res, ec);
      s.shutdown(ec);
    }
  }

  asio::io_context io_;
  asio::ssl::context ctx_;
  tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Delivery> received_;
  std::thread thread_;
};

// A self-signed certificate for `san` (e.g. "DNS:localhost") and its key,
// as <dir>/<name>.pem and <dir>/<name>.key.
void makeCertificate(const std::string& dir, const std::string& name,
                     const std::string& san) {
  auto r = test::run({"openssl", "req", "-x509", "-newkey", "ec",
                      "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-days", "2", "-subj", "/CN=kiln test " + name,
                      "-addext", "subjectAltName=" + san, "-keyout",
                      dir + "/" + name + ".key", "-out",
                      dir + "/" + name + ".pem"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
}

// A webhook instance configured with `config`; deliver() gives the error
// text, "" on success.
class Webhook {
 public:
  explicit Webhook(PluginConfig config)
      : host_(KILN_PLUGIN_NOTIFIER, "webhook", std::move(config)) {
    auto* p = registry_.loadFile(test::pluginBuildDir() +
                                 "/kiln-plugin-webhook.so");
    if (!p) throw Error("cannot load the webhook plugin");
    f_ = static_cast<const kiln_notifier_functions*>(p->functions);
    if (f_->create(host_.table(), &instance_, &err_) != KILN_OK)
      instance_ = nullptr;
  }
  ~Webhook() {
    if (instance_) f_->destroy(instance_);
  }
  std::string createError() const { return instance_ ? "" : err_.message; }
  std::string deliver(const std::string& body) {
    kiln_error e{};
    if (f_->deliver(instance_, "build.finished", body.c_str(), body.size(),
                    &e) == KILN_OK)
      return "";
    return e.message;
  }

 private:
  PluginRegistry registry_;
  HostServices host_;
  const kiln_notifier_functions* f_ = nullptr;
  void* instance_ = nullptr;
  kiln_error err_{};
};

TEST(WebhookTls, DeliversOnlyToACertificateItsCasVouchFor) {
  TempDir d("kiln-webhook-tls");
  makeCertificate(d.path(), "server", "DNS:localhost");
  makeCertificate(d.path(), "stranger", "DNS:localhost");
  TlsListener listener(d.path() + "/server.pem", d.path() + "/server.key");
  std::string url = "https://localhost:" + std::to_string(listener.port());

  Webhook systemCas({{"url", url + "/hook"}});  // not in the system's CAs
  ASSERT_EQ(systemCas.createError(), "");
  EXPECT_THAT(systemCas.deliver("{\"n\":1}"),
              HasSubstr("certificate verify failed"));
  Webhook otherCa({{"url", url + "/hook"},
                   {"ca-file", d.path() + "/stranger.pem"}});
  ASSERT_EQ(otherCa.createError(), "");
  EXPECT_THAT(otherCa.deliver("{\"n\":2}"),
              HasSubstr("certificate verify failed"));
  // The right CA, but the certificate does not name 127.0.0.1.
  Webhook wrongName({{"url", "https://127.0.0.1:" +
                                 std::to_string(listener.port()) + "/hook"},
                     {"ca-file", d.path() + "/server.pem"}});
  ASSERT_EQ(wrongName.createError(), "");
  EXPECT_THAT(wrongName.deliver("{\"n\":3}"),
              HasSubstr("certificate verify failed"));
  EXPECT_TRUE(listener.received().empty());

  Webhook trusted({{"url", url + "/hook"},
                   {"ca-file", d.path() + "/server.pem"}});
  ASSERT_EQ(trusted.createError(), "");
  EXPECT_EQ(trusted.deliver("{\"n\":4}"), "");
  auto got = listener.received();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].sni, "localhost");
  EXPECT_EQ(got[0].event, "build.finished");
  EXPECT_EQ(got[0].body, "{\"n\":4}");
}

TEST(WebhookTls, ACaFileMustBeReadableAndIsForHttpsOnly) {
  Webhook missing({{"url", "https://localhost:1/"},
                   {"ca-file", "/nonexistent/ca.pem"}});
  EXPECT_THAT(missing.createError(), HasSubstr("/nonexistent/ca.pem"));
  Webhook plain({{"url", "http://localhost:1/"}, {"ca-file", "/etc/hosts"}});
  EXPECT_THAT(plain.createError(), HasSubstr("for https URLs"));
}

}  // namespace
}  // namespace kiln::plugins
