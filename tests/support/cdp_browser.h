#pragma once
/// Headless Chromium driven over the Chrome DevTools Protocol for the web's
/// browser tests: Debian's `chromium` started through `kiln::Process` with
/// `--remote-debugging-port=0`, and a Boost.Beast WebSocket client on the
/// loopback port it writes to `<profile>/DevToolsActivePort`. No npm
/// package and no network: what CI has offline.
///
///   test::CdpBrowser browser(dir + "/chromium");
///   auto page = browser.newPage(/*javascript=*/true);
///   page.navigate("http://127.0.0.1:PORT/");
///   EXPECT_THAT(page.text(), HasSubstr("Queue"));
///   page.screenshot(artifactDir + "/overview.png");

#include <chrono>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/common/process.h"

namespace kiln::test {

class CdpBrowser;

/// One tab of the browser (a flattened CDP session). Copyable handle; the
/// browser must outlive it. Every call throws Error on a CDP error or when
/// the browser does not answer within the browser's timeout.
class CdpPage {
 public:
  /// Loads `url` and waits for its load event.
  void navigate(const std::string& url);
  /// Evaluates a JavaScript expression in the page (DevTools' own
  /// evaluation: works with the page's scripts disabled too) and returns
  /// its value; throws Error on an exception in the page.
  nlohmann::json evaluate(const std::string& expression);
  /// The document's visible text (`document.body.innerText`).
  std::string text();
  /// The document's HTML as the browser holds it now (DOM.getOuterHTML).
  std::string html();
  /// Writes a PNG of the full page to `path`.
  void screenshot(const std::string& path);
  /// Polls `expression` until it is true or `timeout` passes (an
  /// evaluation failing meanwhile, e.g. during a navigation, counts as
  /// false).
  bool waitFor(const std::string& expression,
               std::chrono::milliseconds timeout);
  /// Evaluates `expression` (which starts a navigation, e.g. clicks a
  /// form's button) and waits for the next load event.
  void navigateBy(const std::string& expression);

 private:
  friend class CdpBrowser;
  CdpPage(CdpBrowser* browser, std::string session)
      : browser_(browser), session_(std::move(session)) {}
  nlohmann::json call(const std::string& method,
                      nlohmann::json params = nlohmann::json::object());
  CdpBrowser* browser_;
  std::string session_;
};

/// A headless Chromium process and the DevTools connection to it. Not
/// thread-safe. Destroying it closes the connection and kills the browser
/// (its process group).
class CdpBrowser {
 public:
  /// The Chromium executable on PATH (`chromium`, `chromium-browser`), or
  /// "" when there is none (the test skips).
  static std::string findChromium();
  /// Starts the browser with its profile (and log, `chromium.log`) in
  /// `profileDir` (created) and connects; throws Error with the browser's
  /// log if it does not come up within `timeout`.
  explicit CdpBrowser(const std::string& profileDir,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~CdpBrowser();
  CdpBrowser(const CdpBrowser&) = delete;
  CdpBrowser& operator=(const CdpBrowser&) = delete;

  /// Opens a 1280×900 tab; with `javascript` false the page's scripts do
  /// not run (Emulation.setScriptExecutionDisabled), as in a browser with
  /// JavaScript off.
  CdpPage newPage(bool javascript);

  /// Sends one command (to `session`, "" for the browser) and returns its
  /// result; events read meanwhile are queued for waitEvent().
  nlohmann::json call(const std::string& method, const nlohmann::json& params,
                      const std::string& session);
  /// Returns the next event `method` of `session` (queued or read now);
  /// throws Error if none comes within the timeout.
  nlohmann::json waitEvent(const std::string& method,
                           const std::string& session);
  /// Drops queued events of `session` named `method`.
  void dropEvents(const std::string& method, const std::string& session);

 private:
  struct Connection;
  nlohmann::json readMessage();
  std::string log() const;

  std::string profileDir_;
  std::unique_ptr<Process> process_;
  std::unique_ptr<Connection> conn_;
  std::deque<nlohmann::json> events_;
  int64_t nextId_ = 1;
};

}  // namespace kiln::test
