#include "client/completion.h"

#include <set>

#include "core/problem.h"

namespace transposed {
namespace {

// What an option's value completes to.
enum class Value { kNone, kFile, kDType, kOther };

struct Opt {
  std::string name;  // "--dtype", or the positional's name
  std::string help;  // the first sentence, without the characters the shells' syntax uses
  Value value;
  bool positional;
};

struct Command {
  std::string name, help;
  std::vector<Opt> opts;  // its own, then the global ones
};

std::string Clean(std::string s) {
  if (const size_t stop = s.find(". "); stop != std::string::npos) s.resize(stop);
  if (const size_t paren = s.find(" ("); paren != std::string::npos) s.resize(paren);
  std::string out;
  for (char c : s) {
    if (c == '\'' || c == '"' || c == '`' || c == '$' || c == '\\') continue;
    out += (c == '[' || c == ']' || c == ':') ? ' ' : c;
  }
  return out;
}

Value ValueOf(const CLI::Option* o) {
  if (o->get_expected_max() == 0) return Value::kNone;  // a flag
  if (o->get_type_name() == "FILE") return Value::kFile;
  if (o->check_lname("dtype")) return Value::kDType;
  return Value::kOther;
}

std::vector<Opt> OptionsOf(const CLI::App& app, std::set<std::string>* seen) {
  std::vector<Opt> out;
  for (const CLI::Option* o : app.get_options({})) {
    if (o->get_positional()) {
      out.push_back({o->get_name(), Clean(o->get_description()), ValueOf(o), true});
      continue;
    }
    for (const std::string& n : o->get_lnames())
      if (seen->insert(n).second)
        out.push_back({"--" + n, Clean(o->get_description()), ValueOf(o), false});
  }
  return out;
}

std::vector<Command> Commands(const CLI::App& app, std::vector<Opt>* globals) {
  std::set<std::string> none;
  *globals = OptionsOf(app, &none);
  std::vector<Command> out;
  for (const CLI::App* sub : app.get_subcommands({})) {
    std::set<std::string> seen;
    Command c{sub->get_name(), Clean(sub->get_description()), OptionsOf(*sub, &seen)};
    for (const Opt& g : OptionsOf(app, &seen)) c.opts.push_back(g);
    out.push_back(std::move(c));
  }
  return out;
}

std::string DTypeWords() {
  std::string out;
  for (DType t : AllDTypes()) out += (out.empty() ? "" : " ") + std::string(DTypeName(t));
  return out;
}

std::string Bash(const CLI::App& app) {
  std::vector<Opt> globals;
  const std::vector<Command> cmds = Commands(app, &globals);
  std::string names, pattern, files, dtypes, values;
  std::set<std::string> file_opts, dtype_opts, value_opts;
  for (const Command& c : cmds) {
    names += " " + c.name;
    pattern += (pattern.empty() ? "" : "|") + c.name;
    for (const Opt& o : c.opts) {
      if (o.positional) continue;
      if (o.value == Value::kFile) file_opts.insert(o.name);
      if (o.value == Value::kDType) dtype_opts.insert(o.name);
      if (o.value == Value::kOther) value_opts.insert(o.name);
    }
  }
  auto join = [](const std::set<std::string>& s) {
    std::string out;
    for (const std::string& n : s) out += (out.empty() ? "" : "|") + n;
    return out.empty() ? std::string("--none-") : out;
  };
  std::string out =
      "# bash completion of transposectl (generated: transposectl completion bash)\n"
      "_transposectl() {\n"
      "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd= i words\n"
      "  case $prev in\n"
      "    " + join(file_opts) + ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
      "    " + join(dtype_opts) + ") COMPREPLY=($(compgen -W \"" + DTypeWords() +
      "\" -- \"$cur\")); return ;;\n"
      "    " + join(value_opts) + ") return ;;\n"
      "  esac\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    case ${COMP_WORDS[i]} in " + pattern + ") cmd=${COMP_WORDS[i]}; break ;; esac\n"
      "  done\n"
      "  case $cmd in\n";
  std::string global_words;
  for (const Opt& o : globals) global_words += " " + o.name;
  for (const Command& c : cmds) {
    std::string words, positional;
    for (const Opt& o : c.opts) {
      if (!o.positional) {
        words += " " + o.name;
      } else if (o.value == Value::kFile) {
        positional = " COMPREPLY+=($(compgen -f -- \"$cur\"));";
      } else if (c.name == "completion") {
        for (const std::string& s : CompletionShells()) words += " " + s;
      }
    }
    out += "    " + c.name + ") words=\"" + words.substr(words.empty() ? 0 : 1) +
           "\"; COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"));" + positional + " ;;\n";
  }
  out += "    *) words=\"" + names.substr(1) + global_words +
         "\"; COMPREPLY=($(compgen -W \"$words\" -- \"$cur\")) ;;\n"
         "  esac\n"
         "}\n"
         "complete -F _transposectl transposectl\n";
  return out;
}

std::string ZshSpec(const Opt& o) {
  std::string action;
  if (o.value == Value::kFile) action = ":file:_files";
  if (o.value == Value::kDType) action = ":dtype:(" + DTypeWords() + ")";
  if (o.value == Value::kOther) action = ":value: ";
  if (o.positional) return "'*:" + o.name + (o.value == Value::kFile ? ":_files'" : ": '");
  return "'" + o.name + "[" + o.help + "]" + action + "'";
}

std::string Zsh(const CLI::App& app) {
  std::vector<Opt> globals;
  const std::vector<Command> cmds = Commands(app, &globals);
  std::string out =
      "#compdef transposectl\n"
      "# zsh completion of transposectl (generated: transposectl completion zsh)\n"
      "_transposectl() {\n"
      "  local curcontext=$curcontext state line\n"
      "  local -a commands\n"
      "  commands=(\n";
  for (const Command& c : cmds) out += "    '" + c.name + ":" + c.help + "'\n";
  out += "  )\n  _arguments -C";
  for (const Opt& o : globals) out += " \\\n    " + ZshSpec(o);
  out += " \\\n    '1:command:->command' '*::argument:->argument'\n"
         "  case $state in\n"
         "    command) _describe -t commands command commands ;;\n"
         "    argument)\n"
         "      case $words[1] in\n";
  for (const Command& c : cmds) {
    out += "        " + c.name + ") _arguments";
    for (const Opt& o : c.opts) {
      if (o.positional && c.name == "completion") {
        std::string shells;
        for (const std::string& s : CompletionShells()) shells += (shells.empty() ? "" : " ") + s;
        out += " \\\n            '1:shell:(" + shells + ")'";
      } else {
        out += " \\\n            " + ZshSpec(o);
      }
    }
    out += " ;;\n";
  }
  out += "      esac ;;\n"
         "  esac\n"
         "}\n"
         "if [ \"$funcstack[1]\" = _transposectl ]; then _transposectl \"$@\"; else "
         "compdef _transposectl transposectl; fi\n";
  return out;
}

std::string FishLine(const std::string& condition, const Opt& o) {
  std::string out = "complete -c transposectl" + condition;
  if (o.positional) {
    if (o.value == Value::kFile) return out + " -F\n";
    return "";
  }
  out += " -l " + o.name.substr(2);
  if (o.value == Value::kFile) out += " -r -F";
  if (o.value == Value::kDType) out += " -x -a '" + DTypeWords() + "'";
  if (o.value == Value::kOther) out += " -x";
  return out + " -d '" + o.help + "'\n";
}

std::string Fish(const CLI::App& app) {
  std::vector<Opt> globals;
  const std::vector<Command> cmds = Commands(app, &globals);
  std::string out =
      "# fish completion of transposectl (generated: transposectl completion fish)\n"
      "complete -c transposectl -f\n";
  for (const Command& c : cmds)
    out += "complete -c transposectl -n '__fish_use_subcommand' -a " + c.name + " -d '" +
           c.help + "'\n";
  for (const Opt& o : globals) out += FishLine("", o);
  for (const Command& c : cmds) {
    const std::string cond = " -n '__fish_seen_subcommand_from " + c.name + "'";
    std::set<std::string> global_names;
    for (const Opt& g : globals) global_names.insert(g.name);
    for (const Opt& o : c.opts) {
      if (!o.positional && global_names.count(o.name)) continue;  // listed once, above
      if (o.positional && c.name == "completion") {
        std::string shells;
        for (const std::string& s : CompletionShells()) shells += (shells.empty() ? "" : " ") + s;
        out += "complete -c transposectl" + cond + " -a '" + shells + "'\n";
        continue;
      }
      out += FishLine(cond, o);
    }
  }
  return out;
}

}  // namespace

const std::vector<std::string>& CompletionShells() {
  static const std::vector<std::string> shells{"bash", "zsh", "fish"};
  return shells;
}

std::string CompletionScript(const CLI::App& app, const std::string& shell) {
  if (shell == "bash") return Bash(app);
  if (shell == "zsh") return Zsh(app);
  if (shell == "fish") return Fish(app);
  return "";
}

}  // namespace transposed
