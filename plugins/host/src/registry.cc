#include "kiln/plugin_host/registry.h"

#include <dirent.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "kiln/common/file.h"
#include "kiln/common/logging.h"

namespace kiln::plugins {
namespace {

constexpr std::string_view kFilePrefix = "kiln-plugin-";
constexpr std::string_view kFileSuffix = ".so";

/// One required function: its name and its offset in the table.
struct Required {
  const char* name;
  size_t offset;
};

#define KILN_REQ(table, field) \
  { #field, offsetof(table, field) }
const Required kSandboxRequired[] = {
    KILN_REQ(kiln_sandbox_functions, create),
    KILN_REQ(kiln_sandbox_functions, destroy),
    KILN_REQ(kiln_sandbox_functions, build_dir),
    KILN_REQ(kiln_sandbox_functions, start),
    KILN_REQ(kiln_sandbox_functions, finish)};
const Required kPlatformRequired[] = {
    KILN_REQ(kiln_platform_functions, create),
    KILN_REQ(kiln_platform_functions, destroy),
    KILN_REQ(kiln_platform_functions, systems),
    KILN_REQ(kiln_platform_functions, command)};
const Required kGenericRequired[] = {KILN_REQ(kiln_generic_functions, create),
                                     KILN_REQ(kiln_generic_functions, destroy)};
#undef KILN_REQ

/// The first required function missing from `table`, or "".
std::string missingFunction(uint32_t kind, const void* table, uint32_t size) {
  const Required* begin = kGenericRequired;
  const Required* end = std::end(kGenericRequired);
  if (kind == KILN_PLUGIN_SANDBOX) {
    begin = kSandboxRequired;
    end = std::end(kSandboxRequired);
  } else if (kind == KILN_PLUGIN_PLATFORM) {
    begin = kPlatformRequired;
    end = std::end(kPlatformRequired);
  }
  for (auto* r = begin; r != end; ++r) {
    if (r->offset + sizeof(void*) > size)
      return std::string(r->name) + " (the table has " + std::to_string(size) +
             " bytes)";
    const void* fn = nullptr;
    std::memcpy(&fn, static_cast<const char*>(table) + r->offset, sizeof fn);
    if (!fn) return std::string(r->name) + " (null)";
  }
  return "";
}

bool validName(const char* name) {
  if (!name || !*name) return false;
  for (const char* c = name; *c; ++c)
    if (!isalnum(static_cast<unsigned char>(*c)) && *c != '-' && *c != '_')
      return false;
  return true;
}

bool isPluginFile(const std::string& name) {
  return name.size() > kFilePrefix.size() + kFileSuffix.size() &&
         name.compare(0, kFilePrefix.size(), kFilePrefix) == 0 &&
         name.compare(name.size() - kFileSuffix.size(), kFileSuffix.size(),
                      kFileSuffix) == 0;
}

std::vector<std::string> splitColons(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string kindName(uint32_t kind) {
  switch (kind) {
    case KILN_PLUGIN_SANDBOX:
      return "sandbox";
    case KILN_PLUGIN_PLATFORM:
      return "platform";
    case KILN_PLUGIN_EVALUATOR:
      return "evaluator";
    case KILN_PLUGIN_NOTIFIER:
      return "notifier";
    default:
      return "kind " + std::to_string(kind);
  }
}

std::optional<kiln_plugin_kind> parseKind(std::string_view name) {
  for (uint32_t k = KILN_PLUGIN_SANDBOX; k <= KILN_PLUGIN_NOTIFIER; ++k)
    if (kindName(k) == name) return static_cast<kiln_plugin_kind>(k);
  return std::nullopt;
}

namespace {
/// The folders this build was configured with (for a program that is not
/// `kiln`, e.g. a test binary).
std::vector<std::string> configuredPluginDirs() {
  std::vector<std::string> dirs;
  if (pathExists(KILN_PLUGIN_BUILD_DIR)) dirs.push_back(KILN_PLUGIN_BUILD_DIR);
  dirs.push_back(KILN_PLUGIN_INSTALL_DIR);
  return dirs;
}
}  // namespace

std::vector<std::string> pluginDirsBeside(const std::string& exeDir) {
  // Installed: PREFIX/bin/kiln and PREFIX/lib/kiln/plugins, wherever PREFIX
  // is. Build tree: BUILD/cli/kiln and BUILD/plugins/lib.
  for (const char* rel :
       {"/../" KILN_PLUGIN_INSTALL_RELDIR, "/../plugins/lib"}) {
    auto dir = absPath(exeDir + rel);
    if (pathExists(dir)) return {dir};
  }
  return configuredPluginDirs();
}

std::vector<std::string> defaultPluginDirs() {
  if (const char* env = std::getenv("KILN_PLUGIN_PATH"); env && *env)
    return splitColons(env);
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return configuredPluginDirs();
  return pluginDirsBeside(exe.parent_path().string());
}

std::string PluginRegistry::validate(const kiln_plugin_descriptor* d) const {
  if (!d) return "kiln_plugin_entry returned no descriptor";
  if (d->size < offsetof(kiln_plugin_descriptor, functions) + sizeof(void*))
    return "descriptor of " + std::to_string(d->size) + " bytes is too small";
  if (d->abi_major != KILN_PLUGIN_ABI_MAJOR)
    return "built for plugin ABI " + std::to_string(d->abi_major) + "." +
           std::to_string(d->abi_minor) + ", this kiln loads ABI " +
           std::to_string(KILN_PLUGIN_ABI_MAJOR) + ".x (major " +
           std::to_string(KILN_PLUGIN_ABI_MAJOR) + " only)";
  if (d->kind < KILN_PLUGIN_SANDBOX || d->kind > KILN_PLUGIN_NOTIFIER)
    return "unknown plugin kind " + std::to_string(d->kind) +
           " (known: 1 sandbox, 2 platform, 3 evaluator, 4 notifier)";
  if (!validName(d->name))
    return "invalid plugin name (letters, digits, '-' and '_' only)";
  if (!d->functions) return "no function table";
  uint32_t size = 0;
  std::memcpy(&size, d->functions, sizeof size);
  if (auto missing = missingFunction(d->kind, d->functions, size);
      !missing.empty())
    return "missing required " + kindName(d->kind) + " function " + missing;
  for (auto& p : plugins_)
    if (p.kind == d->kind && p.name == d->name)
      return "duplicate " + kindName(d->kind) + " plugin '" + d->name +
             "': already loaded from " + p.file;
  return "";
}

const PluginInfo* PluginRegistry::loadLocked(const std::string& path) {
  std::string file = absPath(path);
  for (auto& p : plugins_)
    if (p.file == file) return &p;
  auto refuse = [&](std::string reason) -> const PluginInfo* {
    logWarn("plugin " + file + " refused: " + reason);
    refusals_.push_back({file, std::move(reason)});
    return nullptr;
  };
  // RTLD_NODELETE: even a refused library stays mapped (its initialisers
  // ran; nothing is ever unloaded).
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) return refuse(std::string("cannot load: ") + dlerror());
  void* sym = dlsym(handle, KILN_PLUGIN_ENTRY_SYMBOL);
  if (!sym)
    return refuse("no " KILN_PLUGIN_ENTRY_SYMBOL " symbol: not a kiln plugin");
  auto entry = reinterpret_cast<kiln_plugin_entry_fn>(sym);
  const kiln_plugin_descriptor* d = entry();
  if (auto why = validate(d); !why.empty()) return refuse(why);
  PluginInfo info;
  info.file = file;
  info.kind = static_cast<kiln_plugin_kind>(d->kind);
  info.name = d->name;
  info.version = d->version ? d->version : "";
  info.summary = d->summary ? d->summary : "";
  info.abiMajor = d->abi_major;
  info.abiMinor = d->abi_minor;
  info.functions = d->functions;
  std::memcpy(&info.functionsSize, d->functions, sizeof info.functionsSize);
  plugins_.push_back(std::move(info));
  return &plugins_.back();
}

const PluginInfo* PluginRegistry::loadFile(const std::string& path) {
  std::lock_guard lock(mu_);
  return loadLocked(path);
}

void PluginRegistry::loadDirectories(const std::vector<std::string>& dirs) {
  std::lock_guard lock(mu_);
  for (auto& dir : dirs) {
    if (std::find(dirs_.begin(), dirs_.end(), dir) != dirs_.end()) continue;
    dirs_.push_back(dir);
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    std::vector<std::string> names;
    while (auto* e = readdir(d))
      if (isPluginFile(e->d_name)) names.push_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    for (auto& n : names) loadLocked(dir + "/" + n);
  }
}

std::vector<PluginInfo> PluginRegistry::plugins() const {
  std::lock_guard lock(mu_);
  return {plugins_.begin(), plugins_.end()};
}

std::vector<PluginRefusal> PluginRegistry::refusals() const {
  std::lock_guard lock(mu_);
  return refusals_;
}

std::vector<std::string> PluginRegistry::directories() const {
  std::lock_guard lock(mu_);
  return dirs_;
}

const PluginInfo* PluginRegistry::find(kiln_plugin_kind kind,
                                       std::string_view name) const {
  std::lock_guard lock(mu_);
  for (auto& p : plugins_)
    if (p.kind == kind && p.name == name) return &p;
  return nullptr;
}

const PluginInfo& PluginRegistry::require(kiln_plugin_kind kind,
                                          std::string_view name) const {
  if (auto* p = find(kind, name)) return *p;
  std::lock_guard lock(mu_);
  std::string have, refused, dirs;
  for (auto& p : plugins_)
    if (p.kind == kind) have += (have.empty() ? "" : ", ") + p.name;
  for (auto& r : refusals_)
    refused += "; " + r.file + " was refused: " + r.reason;
  for (auto& d : dirs_) dirs += (dirs.empty() ? "" : ":") + d;
  throw Error("no " + kindName(kind) + " plugin named '" + std::string(name) +
              "' (loaded " + kindName(kind) +
              " plugins: " + (have.empty() ? "none" : have) + "; searched " +
              (dirs.empty() ? "nothing" : dirs) + ")" + refused);
}

namespace {
std::mutex gProcessMu;
std::vector<std::string> gConfiguredDirs;
bool gLoaded = false;
}  // namespace

void configurePluginDirs(const std::vector<std::string>& dirs) {
  std::lock_guard lock(gProcessMu);
  gConfiguredDirs = dirs;
  if (gLoaded) processPlugins().loadDirectories(dirs);
}

PluginRegistry& processPlugins() {
  static PluginRegistry registry;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> dirs;
    {
      std::lock_guard lock(gProcessMu);
      dirs = gConfiguredDirs.empty() ? defaultPluginDirs() : gConfiguredDirs;
      gLoaded = true;
    }
    registry.loadDirectories(dirs);
  });
  return registry;
}

}  // namespace kiln::plugins
