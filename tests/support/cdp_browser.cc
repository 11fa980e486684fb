#include "cdp_browser.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include "kiln/common/encoding.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln::test {

namespace beast = boost::beast;
namespace asio = boost::asio;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

/// How long one answer or event may take before the browser counts as hung.
constexpr int kAnswerSeconds = 60;

std::string lastLines(const std::string& text, size_t bytes = 4000) {
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

}  // namespace

struct CdpBrowser::Connection {
  asio::io_context io;
  beast::websocket::stream<asio::ip::tcp::socket> ws{io};
};

std::string CdpBrowser::findChromium() {
  for (const char* name : {"chromium", "chromium-browser"}) {
    if (!haveProgram(name)) continue;
    auto r = run({"sh", "-c", std::string("command -v ") + name});
    if (r.exitCode == 0) return r.out.substr(0, r.out.find('\n'));
  }
  return "";
}

CdpBrowser::CdpBrowser(const std::string& profileDir,
                       std::chrono::milliseconds timeout)
    : profileDir_(profileDir) {
  std::string exe = findChromium();
  if (exe.empty()) throw Error("no chromium on PATH");
  createDirs(profileDir_);
  std::string portFile = profileDir_ + "/DevToolsActivePort";
  ::unlink(portFile.c_str());
  ProcessSpec spec;
  spec.program = exe;
  // root needs --no-sandbox; no GPU, no first-run UI, no network services.
  spec.args = {exe,
               "--headless",
               "--no-sandbox",
               "--disable-gpu",
               "--disable-dev-shm-usage",
               "--no-first-run",
               "--disable-background-networking",
               "--disable-extensions",
               "--remote-debugging-address=127.0.0.1",
               "--remote-debugging-port=0",
               "--user-data-dir=" + profileDir_,
               "about:blank"};
  spec.env = currentEnvironment();
  spec.outputFile = profileDir_ + "/chromium.log";
  spec.truncateOutputFile = true;
  process_ = std::make_unique<Process>(spec);
  // The file holds the port, then the browser target's path.
  std::string port, path;
  bool up = pollUntil(
      [&] {
        if (!pathExists(portFile)) return false;
        auto lines = nonEmptyLines(readFile(portFile));
        if (lines.size() < 2) return false;
        port = lines[0];
        path = lines[1];
        return true;
      },
      timeout);
  if (!up) throw Error("chromium did not open its DevTools port: " + log());
  conn_ = std::make_unique<Connection>();
  auto& sock = beast::get_lowest_layer(conn_->ws);
  sock.connect({asio::ip::make_address("127.0.0.1"),
                static_cast<unsigned short>(std::stoi(port))});
  timeval tv{kAnswerSeconds, 0};
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  conn_->ws.read_message_max(256u << 20);  // full-page screenshots
  conn_->ws.handshake("127.0.0.1:" + port, path);
}

CdpBrowser::~CdpBrowser() {
  if (conn_) {
    beast::error_code ec;
    beast::get_lowest_layer(conn_->ws).close(ec);
  }
  if (process_) process_->killTree();
}

std::string CdpBrowser::log() const {
  std::string file = profileDir_ + "/chromium.log";
  return pathExists(file) ? lastLines(readFile(file)) : "";
}

json CdpBrowser::readMessage() {
  beast::flat_buffer buffer;
  beast::error_code ec;
  conn_->ws.read(buffer, ec);
  if (ec)
    throw Error("DevTools connection: " + ec.message() +
                " (no answer within " + std::to_string(kAnswerSeconds) +
                " s?); chromium log: " + log());
  return json::parse(beast::buffers_to_string(buffer.data()));
}

json CdpBrowser::call(const std::string& method, const json& params,
                      const std::string& session) {
  int64_t id = nextId_++;
  json msg = {{"id", id}, {"method", method}, {"params", params}};
  if (!session.empty()) msg["sessionId"] = session;
  conn_->ws.text(true);
  conn_->ws.write(asio::buffer(msg.dump()));
  for (;;) {
    json m = readMessage();
    if (!m.contains("id")) {
      events_.push_back(std::move(m));
      continue;
    }
    if (m["id"] != id) continue;
    if (m.contains("error"))
      throw Error("DevTools " + method + ": " + m["error"].dump());
    return m.value("result", json::object());
  }
}

json CdpBrowser::waitEvent(const std::string& method,
                           const std::string& session) {
  auto matches = [&](const json& e) {
    return e.value("method", "") == method &&
           e.value("sessionId", "") == session;
  };
  for (auto it = events_.begin(); it != events_.end(); ++it)
    if (matches(*it)) {
      json e = std::move(*it);
      events_.erase(it);
      return e;
    }
  for (;;) {
    json m = readMessage();
    if (matches(m)) return m;
    if (!m.contains("id")) events_.push_back(std::move(m));
  }
}

void CdpBrowser::dropEvents(const std::string& method,
                            const std::string& session) {
  std::erase_if(events_, [&](const json& e) {
    return e.value("method", "") == method &&
           e.value("sessionId", "") == session;
  });
}

CdpPage CdpBrowser::newPage(bool javascript) {
  json target = call("Target.createTarget", {{"url", "about:blank"}}, "");
  json attached = call("Target.attachToTarget",
                       {{"targetId", target["targetId"]}, {"flatten", true}},
                       "");
  CdpPage page(this, attached["sessionId"].get<std::string>());
  page.call("Page.enable");
  page.call("Emulation.setDeviceMetricsOverride", {{"width", 1280},
                                                   {"height", 900},
                                                   {"deviceScaleFactor", 1},
                                                   {"mobile", false}});
  if (!javascript)
    page.call("Emulation.setScriptExecutionDisabled", {{"value", true}});
  return page;
}

// ---------------------------------------------------------------- page

json CdpPage::call(const std::string& method, json params) {
  return browser_->call(method, params, session_);
}

void CdpPage::navigate(const std::string& url) {
  browser_->dropEvents("Page.loadEventFired", session_);
  json r = call("Page.navigate", {{"url", url}});
  if (r.contains("errorText"))
    throw Error("navigating to " + url + ": " + r["errorText"].dump());
  browser_->waitEvent("Page.loadEventFired", session_);
}

void CdpPage::navigateBy(const std::string& expression) {
  browser_->dropEvents("Page.loadEventFired", session_);
  evaluate(expression);
  browser_->waitEvent("Page.loadEventFired", session_);
}

json CdpPage::evaluate(const std::string& expression) {
  json r = call("Runtime.evaluate",
                {{"expression", expression}, {"returnByValue", true}});
  if (r.contains("exceptionDetails"))
    throw Error("page exception in `" + expression +
                "`: " + r["exceptionDetails"].dump());
  return r["result"].value("value", json());
}

std::string CdpPage::text() {
  json v = evaluate("document.body ? document.body.innerText : ''");
  return v.is_string() ? v.get<std::string>() : "";
}

std::string CdpPage::html() {
  json doc = call("DOM.getDocument", {{"depth", 0}});
  json r = call("DOM.getOuterHTML", {{"nodeId", doc["root"]["nodeId"]}});
  return r["outerHTML"].get<std::string>();
}

void CdpPage::screenshot(const std::string& path) {
  json r = call("Page.captureScreenshot",
                {{"format", "png"}, {"captureBeyondViewport", true}});
  writeFile(path, base64Decode(r["data"].get<std::string>()));
}

bool CdpPage::waitFor(const std::string& expression,
                      std::chrono::milliseconds timeout) {
  return pollUntil(
      [&] {
        try {
          return evaluate("!!(" + expression + ")") == json(true);
        } catch (const Error&) {
          return false;  // e.g. the context went away during a navigation
        }
      },
      timeout);
}

}  // namespace kiln::test
