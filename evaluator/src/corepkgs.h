#pragma once
// Built-in Nix sources served under a virtual directory.
#include <string>
#include <string_view>

namespace kiln::eval {

/// Where <nix/x> resolves when no search path entry provides it.
constexpr const char* kCorepkgsPrefix = "/__corepkgs__/";

/// The source of a built-in file, or nullptr.
const char* corepkgsFile(std::string_view path);

}  // namespace kiln::eval
