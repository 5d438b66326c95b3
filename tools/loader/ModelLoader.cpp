//===- ModelLoader.cpp - load a host build in this process ---------------===//
#include "ModelLoader.h"
#include "model_dir.h"
#include "options.h"

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
  std::vector<spark_option> table;
  for (const auto &[name, takesValue] : options)
    table.push_back({name.c_str(), takesValue, nullptr});
  std::vector<const char *> found(argc > 0 ? size_t(argc) : 1);
  size_t count = 0;
  char error[512];
  if (spark_options_parse(argc, argv, table.data(), table.size(), found.data(),
                          found.size(), &count, error, sizeof(error)) != 0) {
    message = error;
    return;
  }
  positionals.assign(found.begin(), found.begin() + count);
  for (const spark_option &option : table)
    if (option.value)
      values[option.name] = option.value;
}

std::string Arguments::get(const std::string &name,
                           const std::string &fallback) const {
  auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

long long Arguments::getInt(const std::string &name, long long fallback) {
  auto it = values.find(name);
  const spark_option option = {
      name.c_str(), 1, it == values.end() ? nullptr : it->second.c_str()};
  long long v;
  char error[512];
  if (spark_option_int(&option, fallback, &v, error, sizeof(error)) != 0)
    message = error;
  return v;
}

double Arguments::getDouble(const std::string &name, double fallback) {
  auto it = values.find(name);
  const spark_option option = {
      name.c_str(), 1, it == values.end() ? nullptr : it->second.c_str()};
  double v;
  char error[512];
  if (spark_option_double(&option, fallback, &v, error, sizeof(error)) != 0)
    message = error;
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
