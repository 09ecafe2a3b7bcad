// Shell completion scripts of transposectl (bash, zsh, fish), generated from its CLI11 command
// line definition, so they never lag behind it: the commands with their descriptions, each
// command's options and the global ones, the values of --dtype (core/problem.h's names), file
// names for options and positionals whose type name is FILE, and nothing after a flag.
//
//   source <(transposectl completion bash)
//   transposectl completion zsh > "${fpath[1]}/_transposectl"     (or: source <(...))
//   transposectl completion fish > ~/.config/fish/completions/transposectl.fish
//
// Thread-safety: pure functions of the CLI::App they are given.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace transposed {

// The shells CompletionScript knows.
const std::vector<std::string>& CompletionShells();
// The script for `shell` (one of CompletionShells()); "" for another.
std::string CompletionScript(const CLI::App& app, const std::string& shell);

}  // namespace transposed
