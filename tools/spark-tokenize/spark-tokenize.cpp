//===- spark-tokenize.cpp - text to token ids and back --------------------===//
//
// spark-tokenize DIR [--add-special] [FILE...]  text on stdin (or each FILE)
//                                                -> ids on stdout, a line each
// spark-tokenize DIR --decode [--skip-special]  ids on stdin -> text on stdout
// spark-tokenize DIR --bench N                  encode stdin N times, report speed
// spark-tokenize DIR --chat VARS.json [--template FILE] [--ids]
//                                                render the chat template
// spark-tokenize DIR --bench-grammar TOOLS.json [--bench N]
//                                                cost of the tool grammar's mask
//
// DIR is a checkpoint folder (or any folder with a tokenizer.json), or the
// tokenizer.json itself. Ids are printed on one line separated by spaces;
// --decode reads ids separated by any whitespace and writes the text byte
// for byte. Invalid UTF-8 on stdin is encoded as U+FFFD (as Hugging Face's
// bindings do) and reported on stderr.
//
//===----------------------------------------------------------------------===//
#include "ChatTemplate.h"
#include "Tokenizer.h"
#include "ToolCalls.h"

#include <algorithm>
#include <random>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

using namespace spark::text;

namespace {

const char *kUsage =
    "usage: spark-tokenize DIR [--add-special] [FILE...]\n"
    "       spark-tokenize DIR --decode [--skip-special]\n"
    "       spark-tokenize DIR --bench N\n"
    "       spark-tokenize DIR --chat VARS.json [--template FILE] [--ids]\n"
    "       spark-tokenize DIR --bench-grammar TOOLS.json [--bench N]\n"
    "DIR: a folder holding tokenizer.json (a checkpoint), or the file itself.\n"
    "Encodes UTF-8 text read from stdin (or each FILE) and prints the ids\n"
    "on one line (a line per FILE);\n"
    "--decode reads ids and writes the text. --add-special adds the tokens\n"
    "of the file's post-processor (BOS...); --skip-special drops special\n"
    "tokens when decoding; --bench N encodes stdin N times and reports the\n"
    "speed on stderr. --chat renders the folder's chat template (from\n"
    "tokenizer_config.json, or --template FILE) with the variables of a JSON\n"
    "object (messages, tools, add_generation_prompt, ...; bos_token and\n"
    "eos_token default to the folder's) and prints the text, or its ids with\n"
    "--ids. --bench-grammar generates N (default 20) tool calls from random\n"
    "logits under the tool grammar (spark-run --grammar tools) and reports\n"
    "the time its mask takes per token at this vocabulary.\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "spark-tokenize: error: %s\n", message.c_str());
  return 1;
}

std::string readStdin() {
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, stdin)) > 0)
    text.append(buffer, n);
  return text;
}

bool readFile(const std::string &path, std::string &out) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return false;
  char buffer[1 << 16];
  size_t n;
  out.clear();
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0)
    out.append(buffer, n);
  std::fclose(f);
  return true;
}

int renderChat(const std::string &dir, const std::string &varsFile,
               const std::string &templateFile, bool ids) {
  std::string vars, source, origin;
  if (!readFile(varsFile, vars))
    return fail(varsFile + ": cannot open: " + std::strerror(errno));
  ChatConfig cfg;
  if (!templateFile.empty()) {
    if (!readFile(templateFile, cfg.source))
      return fail(templateFile + ": cannot open: " + std::strerror(errno));
    cfg.origin = templateFile;
    try {
      ChatConfig folder = loadChatConfig(dir);
      cfg.bosToken = folder.bosToken;
      cfg.eosToken = folder.eosToken;
    } catch (const TextError &) {
      // A folder without a template still lends its special tokens, if any.
    }
  } else {
    cfg = loadChatConfig(dir);
  }
  auto tmpl = ChatTemplate::parse(cfg.source, cfg.origin);
  std::string text = tmpl->render(withSpecialTokens(vars, varsFile, cfg));
  if (!ids) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : fail("stdout: write failed");
  }
  auto tokenizer = Tokenizer::load(dir);
  std::string line;
  for (int32_t id : tokenizer->encode(text, false))
    line += (line.empty() ? "" : " ") + std::to_string(id);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : fail("stdout: write failed");
}

int benchGrammar(const std::string &dir, const std::string &toolsFile, long runs) {
  std::string toolsJson;
  if (!readFile(toolsFile, toolsJson))
    return fail(toolsFile + ": cannot open: " + std::strerror(errno));
  auto tokenizer = Tokenizer::load(dir);
  auto tools = parseToolSpecs(toolsJson, toolsFile);
  // Any special token serves as the end token of this measurement.
  int32_t end = -1;
  for (int32_t id = 0; id < tokenizer->vocabSize() && end < 0; ++id)
    if (tokenizer->isSpecial(id))
      end = id;
  if (end < 0)
    return fail(tokenizer->path() + ": no special token to end a call with");
  int32_t vocab = tokenizer->vocabSize();
  std::vector<float> logits(vocab);
  std::vector<double> us;
  std::mt19937 rng(1);
  std::normal_distribution<float> noise(0.f, 3.f);
  auto setup = std::chrono::steady_clock::now();
  ToolGrammar grammar(*tokenizer, tools, {end}, true, 256);
  double setupS = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup).count();
  long complete = 0;
  for (long r = 0; r < runs; ++r) {
    grammar.reset();
    for (int step = 0; step < 2000 && !grammar.done(); ++step) {
      for (auto &l : logits)
        l = noise(rng);
      auto t0 = std::chrono::steady_clock::now();
      size_t allowed = grammar.mask(logits.data(), vocab);
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                       .count());
      if (!allowed)
        return fail("the grammar allowed no token (a bug)");
      int32_t best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (!grammar.accept(best))
        return fail("the grammar refused a token its mask allowed (a bug)");
    }
    complete += grammar.done();
  }
  std::sort(us.begin(), us.end());
  double mean = 0;
  for (double u : us)
    mean += u;
  mean /= us.size();
  std::printf("vocab %d, %zu tools: %ld of %ld calls complete, %zu masked tokens; "
              "mask per token: mean %.0f us, median %.0f us, p99 %.0f us, max %.0f us; "
              "setup %.0f ms\n",
              vocab, tools.size(), complete, runs, us.size(), mean, us[us.size() / 2],
              us[us.size() * 99 / 100], us.back(), setupS * 1e3);
  return 0;
}

int benchEncode(const Tokenizer &tokenizer, const std::string &text, bool addSpecial,
                long repeats) {
  size_t tokens = 0;
  auto start = std::chrono::steady_clock::now();
  for (long r = 0; r < repeats; ++r)
    tokens += tokenizer.encode(text, addSpecial).size();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr,
               "spark-tokenize: encoded %zu bytes x %ld in %.3f s: %.2f MB/s, "
               "%.0f tokens/s\n",
               text.size(), repeats, s, text.size() * repeats / s / 1e6, tokens / s);
  return 0;
}

int run(int argc, char **argv) {
  std::string dir;
  bool addSpecial = false, decode = false, skipSpecial = false;
  long bench = 0;
  std::string chatVars, templateFile, grammarTools;
  std::vector<std::string> files;
  bool chatIds = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--add-special") {
      addSpecial = true;
    } else if (a == "--decode") {
      decode = true;
    } else if (a == "--skip-special") {
      skipSpecial = true;
    } else if (a == "--bench-grammar") {
      if (i + 1 >= argc)
        return fail(a + " needs a tools file");
      grammarTools = argv[++i];
    } else if (a == "--chat" || a == "--template") {
      if (i + 1 >= argc)
        return fail(a + " needs a file");
      (a == "--chat" ? chatVars : templateFile) = argv[++i];
    } else if (a == "--ids") {
      chatIds = true;
    } else if (a == "--bench") {
      if (i + 1 >= argc)
        return fail("--bench needs a repeat count");
      char *end;
      bench = std::strtol(argv[++i], &end, 10);
      if (*end || bench < 1 || bench > 1000000)
        return fail(std::string("--bench: expected a count in [1, 1000000], got '") +
                    argv[i] + "'");
    } else if (!a.empty() && a[0] == '-') {
      std::fputs(kUsage, stderr);
      return fail("unknown option '" + a + "'");
    } else if (dir.empty()) {
      dir = a;
    } else {
      files.push_back(a);
    }
  }
  if (dir.empty()) {
    std::fputs(kUsage, stderr);
    return fail("missing DIR (a folder with tokenizer.json)");
  }
  if (decode && (addSpecial || bench))
    return fail("--decode does not combine with --add-special or --bench");
  if (!decode && skipSpecial)
    return fail("--skip-special applies to --decode only");

  if (!chatVars.empty())
    return renderChat(dir, chatVars, templateFile, chatIds);
  if (!grammarTools.empty())
    return benchGrammar(dir, grammarTools, bench ? bench : 20);
  if (!templateFile.empty() || chatIds)
    return fail("--template and --ids apply to --chat only");
  if (!files.empty() && (decode || bench))
    return fail("input files apply to encoding only (--decode and --bench read stdin); got '" +
                files[0] + "'");

  std::unique_ptr<Tokenizer> tokenizer;
  try {
    tokenizer = Tokenizer::load(dir);
  } catch (const TextError &e) {
    return fail(e.what());
  }
  std::string input = files.empty() ? readStdin() : std::string();

  if (decode) {
    std::vector<int32_t> ids;
    const char *p = input.c_str();
    size_t index = 0;
    while (*p) {
      if (std::isspace(static_cast<unsigned char>(*p))) {
        ++p;
        continue;
      }
      char *end;
      long long v = std::strtoll(p, &end, 10);
      if (end == p || (*end && !std::isspace(static_cast<unsigned char>(*end))))
        return fail("stdin: id " + std::to_string(index) +
                    ": expected a decimal token id, got '" +
                    std::string(p, std::min<size_t>(std::strcspn(p, " \t\r\n"), 32)) + "'");
      if (v < 0 || v >= tokenizer->vocabSize())
        return fail("stdin: id " + std::to_string(index) + " (" + std::to_string(v) +
                    ") is outside the vocabulary of " + tokenizer->path() + " [0, " +
                    std::to_string(tokenizer->vocabSize()) + ")");
      ids.push_back(static_cast<int32_t>(v));
      p = end;
      ++index;
    }
    std::string text = tokenizer->decode(ids, skipSpecial);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : fail("stdout: write failed");
  }

  // Encoding: stdin, or each FILE with its ids on a line of their own.
  std::vector<std::pair<std::string, std::string>> inputs; // name, text
  if (files.empty()) {
    inputs.emplace_back("stdin", std::move(input));
  } else {
    for (auto &f : files) {
      std::string text;
      if (!readFile(f, text))
        return fail(f + ": cannot open: " + std::strerror(errno));
      inputs.emplace_back(f, std::move(text));
    }
  }
  std::string out;
  for (auto &[name, text] : inputs) {
    std::string repaired;
    size_t firstBad = 0;
    if (size_t bad = sanitizeUtf8(text, repaired, &firstBad))
      std::fprintf(stderr,
                   "spark-tokenize: warning: %s: %zu invalid UTF-8 sequence(s), the "
                   "first at byte %zu, encoded as U+FFFD\n",
                   name.c_str(), bad, firstBad);
    if (bench)
      return benchEncode(*tokenizer, repaired, addSpecial, bench);
    std::vector<int32_t> ids = tokenizer->encode(repaired, addSpecial);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i)
        out += ' ';
      out += std::to_string(ids[i]);
    }
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : fail("stdout: write failed");
}
} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const TextError &e) {
    return fail(e.what());
  } catch (const std::bad_alloc &) {
    return fail("out of memory");
  }
}
