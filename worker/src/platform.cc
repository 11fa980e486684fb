#include "kiln/worker/platform.h"

#include <algorithm>

#include "kiln/common/error.h"
#include "plugin_instance.h"

namespace kiln::worker {

PluginPlatform::PluginPlatform(const plugins::PluginInfo& plugin,
                               plugins::PluginConfig config)
    : plugin_(plugin) {
  // fns() may be read only once the kind is checked.
  auto create = plugin.kind == KILN_PLUGIN_PLATFORM ? fns().create : nullptr;
  host_ = createPluginInstance(plugin, KILN_PLUGIN_PLATFORM, create,
                               std::move(config), &instance_);
  kiln_error err{};
  char buf[4096];
  if (fns().systems(instance_, buf, sizeof buf, &err) != KILN_OK) {
    fns().destroy(instance_);
    throw Error("platform " + plugin.name + ": " + err.message);
  }
  std::string list = buf;
  for (size_t start = 0; start < list.size();) {
    size_t end = std::min(list.find(' ', start), list.size());
    if (end > start) systems_.push_back(list.substr(start, end - start));
    start = end + 1;
  }
}

PluginPlatform::~PluginPlatform() { fns().destroy(instance_); }

const kiln_platform_functions& PluginPlatform::fns() const {
  return *static_cast<const kiln_platform_functions*>(plugin_.functions);
}

PlatformCommand PluginPlatform::command(const std::string& system,
                                        const std::string& program,
                                        const std::string& argv0) const {
  std::vector<char> buf(64 << 10);
  uint32_t count = 0;
  kiln_error err{};
  if (fns().command(instance_, system.c_str(), program.c_str(), argv0.c_str(),
                    buf.data(), buf.size(), &count, &err) != KILN_OK)
    throw Error("platform " + name() + ": " + err.message);
  if (count < 2 || count > 4096)
    throw Error("platform " + name() + ": a command of " +
                std::to_string(count) + " strings");
  std::vector<std::string> words;
  size_t at = 0;
  for (uint32_t i = 0; i < count; i++) {
    auto end = std::find(buf.begin() + at, buf.end(), '\0');
    if (end == buf.end())
      throw Error("platform " + name() + ": unterminated command");
    words.emplace_back(buf.data() + at, end - (buf.begin() + at));
    at = end - buf.begin() + 1;
  }
  PlatformCommand cmd;
  cmd.file = words[0];
  cmd.argv.assign(words.begin() + 1, words.end());
  if (cmd.file != program) cmd.hostPaths.push_back(cmd.file);
  return cmd;
}

std::shared_ptr<Platforms> Platforms::load(
    const std::vector<std::string>& names,
    const plugins::PluginConfig& config) {
  auto out = std::make_shared<Platforms>();
  for (auto& n : names)
    out->add(std::make_unique<PluginPlatform>(
        plugins::processPlugins().require(KILN_PLUGIN_PLATFORM, n), config));
  return out;
}

void Platforms::add(std::unique_ptr<PluginPlatform> platform) {
  list_.push_back(std::move(platform));
}

std::vector<std::string> Platforms::systems() const {
  std::vector<std::string> out;
  for (auto& p : list_)
    for (auto& s : p->systems())
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  return out;
}

std::optional<PlatformCommand> Platforms::command(
    const std::string& system, const std::string& program,
    const std::string& argv0) const {
  for (auto& p : list_) {
    auto& sys = p->systems();
    if (std::find(sys.begin(), sys.end(), system) != sys.end())
      return p->command(system, program, argv0);
  }
  return std::nullopt;
}

}  // namespace kiln::worker
