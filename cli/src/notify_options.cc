// Notifier plugins for `kiln scheduler --notify` (notify_options.h).
#include "notify_options.h"

#include <unistd.h>

#include <cctype>
#include <filesystem>

#include "kiln/common/error.h"
#include "kiln/plugin_host/host_services.h"
#include "kiln/plugin_host/registry.h"

namespace kiln::cli {
namespace {

/// A notifier plugin instance as a scheduler::Notifier.
class PluginNotifier final : public scheduler::Notifier {
 public:
  PluginNotifier(const plugins::PluginInfo& info, plugins::PluginConfig config)
      : host_(KILN_PLUGIN_NOTIFIER, info.name, std::move(config)),
        table_(static_cast<const kiln_notifier_functions*>(info.functions)) {
    if (info.functionsSize < KILN_NOTIFIER_DELIVER_MIN_SIZE || !table_->deliver)
      throw Error("notifier plugin '" + info.name + "' (" + info.file +
                  ") was built against ABI minor " +
                  std::to_string(info.abiMinor) +
                  ", which has no deliver function: rebuild it");
    kiln_error err{};
    if (table_->create(host_.table(), &instance_, &err) != KILN_OK)
      throw Error("notifier '" + info.name + "': " + err.message);
  }
  ~PluginNotifier() override { table_->destroy(instance_); }
  PluginNotifier(const PluginNotifier&) = delete;
  PluginNotifier& operator=(const PluginNotifier&) = delete;

  std::optional<std::string> deliver(const std::string& event,
                                     const std::string& body) override {
    kiln_error err{};
    if (table_->deliver(instance_, event.c_str(), body.c_str(), body.size(),
                        &err) == KILN_OK)
      return std::nullopt;
    return std::string(err.message);
  }

 private:
  plugins::HostServices host_;
  const kiln_notifier_functions* table_;
  void* instance_ = nullptr;
};

bool isHttpsWebhook(const NotifySpec& spec) {
  return spec.kind == "webhook" && spec.argument.rfind("https://", 0) == 0;
}

// "command:CMD" → {"command", CMD}.
NotifySpec parseSpec(const std::string& s) {
  auto colon = s.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    throw Error("--notify '" + s +
                "': expected KIND:ARGUMENT, e.g. command:/usr/local/bin/hook "
                "or webhook:http://host:8080/hook");
  NotifySpec spec{s.substr(0, colon), s.substr(colon + 1)};
  for (char c : spec.kind)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      throw Error("--notify '" + s + "': '" + spec.kind +
                  "' is not a notifier name");
  if (spec.argument.size() > 4096)
    throw Error("--notify " + spec.kind +
                ": the argument is longer than "
                "4096 bytes");
  if (spec.kind == "webhook" && spec.argument.rfind("http://", 0) != 0 &&
      spec.argument.rfind("https://", 0) != 0)
    throw Error("--notify '" + s +
                "': a webhook URL is http(s)://HOST[:PORT][/PATH]");
  return spec;
}

// Whether `kind` is a forge's status notifier (docs/ci.md).
bool isForgeStatus(const std::string& kind) {
  return kind == "github-status" || kind == "gitea-status" ||
         kind == "gitlab-status";
}

// A forge status notifier's argument, "API_URL;KEY=VALUE;...", as its
// configuration: api-url, token-file, link, timeout-ms, ca-file, jobs.
plugins::PluginConfig forgeStatusConfig(const NotifySpec& spec) {
  plugins::PluginConfig config;
  size_t at = 0;
  for (bool first = true; at <= spec.argument.size(); first = false) {
    size_t end = spec.argument.find(';', at);
    if (end == std::string::npos) end = spec.argument.size();
    std::string part = spec.argument.substr(at, end - at);
    at = end + 1;
    if (first) {
      config["api-url"] = part;
      continue;
    }
    auto eq = part.find('=');
    std::string key = part.substr(0, eq);
    if (eq == std::string::npos ||
        (key != "token-file" && key != "link" && key != "timeout-ms" &&
         key != "ca-file" && key != "jobs"))
      throw Error("--notify " + spec.kind + ": '" + part +
                  "' is not token-file=, link=, timeout-ms=, ca-file= or "
                  "jobs=");
    config[key] = part.substr(eq + 1);
  }
  if (!config.count("token-file"))
    throw Error("--notify " + spec.kind +
                ": expected API_URL;token-file=PATH[;link=KILN_URL]");
  return config;
}

// The plugin configuration of `spec`: its argument is a webhook's URL, a
// forge status notifier's settings or another notifier's command.
plugins::PluginConfig configOf(const NotifySpec& spec,
                               const std::string& secretFile,
                               const std::string& caFile) {
  if (isForgeStatus(spec.kind)) return forgeStatusConfig(spec);
  plugins::PluginConfig config{
      {spec.kind == "webhook" ? "url" : "command", spec.argument}};
  if (spec.kind == "webhook" && !secretFile.empty())
    config["secret-file"] = secretFile;
  if (isHttpsWebhook(spec) && !caFile.empty()) config["ca-file"] = caFile;
  return config;
}

// Throws Error unless `path` (given as `option`) is a readable file.
void checkReadable(const std::string& option, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) ||
      ::access(path.c_str(), R_OK) != 0)
    throw Error(option + " " + path + ": not a readable file");
}

}  // namespace

std::vector<NotifySpec> parseNotifyOptions(
    const std::vector<std::string>& specs, const std::string& secretFile,
    const std::string& caFile) {
  std::vector<NotifySpec> out;
  bool webhook = false, https = false;
  for (auto& s : specs) {
    out.push_back(parseSpec(s));
    if (isForgeStatus(out.back().kind))
      forgeStatusConfig(out.back());  // checked now, not at start
    webhook = webhook || out.back().kind == "webhook";
    https = https || isHttpsWebhook(out.back());
  }
  if (!secretFile.empty()) {
    if (!webhook)
      throw Error(
          "--notify-secret-file is for webhook notifiers, and no "
          "--notify webhook:URL was given");
    checkReadable("--notify-secret-file", secretFile);
  }
  if (!caFile.empty()) {
    if (!https)
      throw Error(
          "--notify-ca-file is for https webhooks, and no "
          "--notify webhook:https://URL was given");
    checkReadable("--notify-ca-file", caFile);
  }
  return out;
}

SchedulerNotifiers::SchedulerNotifiers(const std::vector<std::string>& specs,
                                       const std::string& secretFile,
                                       const std::string& caFile)
    : registry_(std::make_shared<prometheus::Registry>()),
      wake_(std::make_shared<std::atomic<scheduler::NotificationDelivery*>>(
          nullptr)) {
  std::vector<std::string> targets;
  for (auto& spec : parseNotifyOptions(specs, secretFile, caFile)) {
    const auto& info =
        plugins::processPlugins().require(KILN_PLUGIN_NOTIFIER, spec.kind);
    // Stable names: the outbox keeps rows per name across restarts.
    std::string name = spec.kind;
    for (int n = 2; notifiers_.count(name); n++)
      name = spec.kind + "-" + std::to_string(n);
    notifiers_[name] = std::make_shared<PluginNotifier>(
        info, configOf(spec, secretFile, caFile));
    targets.push_back(name);
  }
  if (targets.empty()) return;
  auto wake = wake_;
  outbox_ = std::make_shared<scheduler::NotificationOutbox>(targets, [wake] {
    if (auto* d = wake->load()) d->wake();
  });
}

SchedulerNotifiers::~SchedulerNotifiers() { wake_->store(nullptr); }

void SchedulerNotifiers::start(const scheduler::DatabaseSpec& database,
                               const Clock& clock) {
  if (!outbox_) return;
  scheduler::DeliveryOptions o;
  o.registry = registry_;
  delivery_ = std::make_unique<scheduler::NotificationDelivery>(
      database, notifiers_, clock, o);
  delivery_->start();
  wake_->store(delivery_.get());
}

}  // namespace kiln::cli
