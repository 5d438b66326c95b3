//===- ModelLoader.cpp - load a host build in this process ---------------===//
#include "ModelLoader.h"
#include "model_dir.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace spark {

std::string LoadedModel::load(const std::string &outDir,
                              spark_open_params params,
                              const std::string &pack) {
  char error[1024] = "";
  if (spark_open_model_dir(outDir.c_str(),
                           pack.empty() ? nullptr : pack.c_str(), params,
                           &model, &library, error, sizeof(error)) != 0)
    return error;
  return "";
}

LoadedModel::~LoadedModel() { spark_close_model_dir(model, library); }

std::string ModelSession::open(const std::string &outDir, int threads) {
  spark_open_params params = spark_open_params_default();
  params.num_threads = threads;
  if (std::string error = loaded.load(outDir, params); !error.empty())
    return error;
  spark_model_get_info(loaded.model, &info);
  if (spark_session_create(loaded.model, nullptr, &session) != SPARK_OK)
    return outDir + ": cannot create a session";
  return "";
}

ModelSession::~ModelSession() { spark_session_destroy(session); }

std::string writeFileAtomically(const std::string &path,
                                const std::string &text) {
  // llvm::writeToOutput: a temporary name beside `path`, renamed into place.
  if (llvm::Error e = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
        os << text;
        return llvm::Error::success();
      }))
    return path + ": cannot write: " + llvm::toString(std::move(e));
  return "";
}

Arguments::Arguments(int argc, char **argv,
                     const std::map<std::string, bool> &options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positionals.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    size_t eq = name.find('=');
    bool inlineValue = eq != std::string::npos;
    if (inlineValue) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = options.find(name);
    if (it == options.end()) {
      message = "unknown option --" + name;
      return;
    }
    if (it->second && !inlineValue) {
      if (i + 1 >= argc) {
        message = "--" + name + " needs a value";
        return;
      }
      value = argv[++i];
    }
    values[name] = value;
  }
}

std::string Arguments::get(const std::string &name,
                           const std::string &fallback) const {
  auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

long long Arguments::getInt(const std::string &name, long long fallback) {
  auto it = values.find(name);
  if (it == values.end())
    return fallback;
  char *end = nullptr;
  errno = 0;
  long long v = strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end || errno)
    message = "--" + name + ": '" + it->second + "' is not an integer";
  return v;
}

double Arguments::getDouble(const std::string &name, double fallback) {
  auto it = values.find(name);
  if (it == values.end())
    return fallback;
  char *end = nullptr;
  double v = strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end)
    message = "--" + name + ": '" + it->second + "' is not a number";
  return v;
}

std::string readTokenSequences(const std::string &path, int32_t vocab,
                               int32_t maxTokens,
                               std::vector<std::vector<int32_t>> &sequences) {
  FILE *f = fopen(path.c_str(), "r");
  if (!f)
    return path + ": " + strerror(errno);
  sequences.clear();
  std::string error;
  char buffer[1 << 16];
  std::string line;
  int lineNumber = 0;
  auto parse = [&]() {
    ++lineNumber;
    std::vector<int32_t> ids;
    const char *p = line.c_str();
    while (*p) {
      if (*p == ' ' || *p == '\t' || *p == ',' || *p == '\r') {
        ++p;
        continue;
      }
      if (*p == '#' && ids.empty())
        return;
      char *end = nullptr;
      errno = 0;
      long long id = strtoll(p, &end, 10);
      if (end == p || errno || id < 0 || id >= vocab) {
        error = path + ":" + std::to_string(lineNumber) + ": '" +
                std::string(p, strcspn(p, " \t,\r")) +
                "' is not a token id; expected integers in [0, " +
                std::to_string(vocab) + ")";
        return;
      }
      ids.push_back(int32_t(id));
      p = end;
    }
    if (ids.empty())
      return;
    if (int32_t(ids.size()) > maxTokens) {
      error = path + ":" + std::to_string(lineNumber) + ": " +
              std::to_string(ids.size()) + " tokens; the build holds at most " +
              std::to_string(maxTokens) + " positions";
      return;
    }
    sequences.push_back(std::move(ids));
  };
  while (error.empty() && fgets(buffer, sizeof(buffer), f)) {
    line += buffer;
    if (!line.empty() && line.back() != '\n' && !feof(f))
      continue; // a line longer than the buffer
    if (!line.empty() && line.back() == '\n')
      line.pop_back();
    parse();
    line.clear();
  }
  if (error.empty() && !line.empty())
    parse();
  fclose(f);
  if (error.empty() && sequences.empty())
    error = path + ": no token sequence; expected token ids, one sequence per "
                   "line";
  return error;
}

} // namespace spark
