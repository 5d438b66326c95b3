//===- spark-bench.cpp - prefill / decode speed, load time, memory --------===//
//
// spark-bench OUT [-p 512] [-n 128] [-t 1,2] [-r 3]
//
// Prints, in llama-bench's table form, pp<P> (prompt tokens per second in
// prefill chunks) and tg<N> (tokens per second decoding one at a time from an
// empty context), then the time from spark_model_open to a session ready to
// decode and the peak anonymous RSS (RssAnon, not VmRSS: the weights are a
// file mapping and do not count). A benchmark, not a test: quote ratios
// measured in one run.
//
//===----------------------------------------------------------------------===//
#include "ModelLoader.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

const char *kUsage = "usage: spark-bench OUT [-p|--prompt 512] [-n|--gen 128] "
                     "[-t|--threads 1,2] [-r|--repetitions 3] [--no-verify]\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "spark-bench: error: %s\n", message.c_str());
  return 1;
}

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// RssAnon of this process in bytes.
size_t rssAnon() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("RssAnon:", 0) == 0)
      return size_t(std::stoull(line.substr(8))) * 1024;
  return 0;
}

struct Stats {
  double mean = 0, stddev = 0;
};

Stats stats(const std::vector<double> &values) {
  Stats s;
  for (double v : values)
    s.mean += v;
  s.mean /= double(values.size());
  for (double v : values)
    s.stddev += (v - s.mean) * (v - s.mean);
  s.stddev = values.size() > 1 ? std::sqrt(s.stddev / double(values.size() - 1)) : 0;
  return s;
}

} // namespace

int main(int argc, char **argv) {
  // Accept llama-bench's short flags too.
  std::vector<char *> normalized;
  std::vector<std::string> storage;
  storage.reserve(argc);
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-p") a = "--prompt";
    else if (a == "-n") a = "--gen";
    else if (a == "-t") a = "--threads";
    else if (a == "-r") a = "--repetitions";
    storage.push_back(a);
  }
  for (std::string &s : storage)
    normalized.push_back(s.data());
  spark::Arguments args(int(normalized.size()), normalized.data(),
                        {{"prompt", true}, {"gen", true}, {"threads", true},
                         {"repetitions", true}, {"no-verify", false},
                         {"help", false}});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  long long prompt = args.getInt("prompt", 512), gen = args.getInt("gen", 128),
            reps = args.getInt("repetitions", 3);
  if (!args.error().empty())
    return fail(args.error() + "\n" + kUsage);
  if (args.positional().size() != 1)
    return fail(std::string("expected one output folder\n") + kUsage);
  std::vector<int> threadCounts;
  std::stringstream list(args.get("threads", "1,2"));
  for (std::string item; std::getline(list, item, ',');) {
    int t = std::atoi(item.c_str());
    if (t < 1)
      return fail("--threads: '" + item + "' is not a positive thread count");
    threadCounts.push_back(t);
  }
  if (prompt < 1 || gen < 1 || reps < 1)
    return fail("-p, -n and -r must be positive");

  struct Row {
    int threads;
    std::string test;
    Stats speed;
  };
  std::vector<Row> rows;
  struct Load {
    int threads;
    double seconds;
    size_t anonAfterOpen;
  };
  std::vector<Load> loads;
  size_t peakAnon = rssAnon();
  spark_model_info info{};
  // Copies: info's strings live in the library, unloaded after each run.
  std::string target, dispatch;
  for (int threads : threadCounts) {
    spark::LoadedModel loaded;
    spark_open_params params = spark_open_params_default();
    params.num_threads = threads;
    params.verify_checksums = !args.has("no-verify");
    double start = now();
    std::string error = loaded.load(args.positional()[0], params);
    if (!error.empty())
      return fail(error);
    spark_session *session;
    if (spark_status s = spark_session_create(loaded.model, nullptr, &session))
      return fail(std::string("session: ") + spark_status_string(s));
    loads.push_back({threads, now() - start, rssAnon()});
    spark_model_get_info(loaded.model, &info);
    target = info.target;
    dispatch = info.dispatch;
    if (prompt + 1 > info.max_context || gen > info.max_context)
      return fail("the build holds " + std::to_string(info.max_context) +
                  " positions; -p and -n must fit (spark-compile --max-context)");
    std::vector<int32_t> tokens(size_t(std::max(prompt, gen)));
    uint64_t state = 42;
    for (int32_t &t : tokens) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      t = int32_t((state >> 33) % uint64_t(info.vocab_size));
    }
    std::vector<double> pp, tg;
    for (long long r = 0; r <= reps; ++r) { // r == 0 warms up
      spark_session_reset(session);
      double t0 = now();
      if (spark_status s = spark_session_eval(session, tokens.data(),
                                              int32_t(prompt), 0, nullptr))
        return fail(std::string("prefill: ") + spark_status_string(s));
      double t1 = now();
      spark_session_reset(session);
      for (long long i = 0; i < gen; ++i)
        if (spark_status s = spark_session_decode(session, tokens[size_t(i)]))
          return fail(std::string("decode: ") + spark_status_string(s));
      double t2 = now();
      peakAnon = std::max(peakAnon, rssAnon());
      if (r > 0) {
        pp.push_back(double(prompt) / (t1 - t0));
        tg.push_back(double(gen) / (t2 - t1));
      }
    }
    rows.push_back({threads, "pp" + std::to_string(prompt), stats(pp)});
    rows.push_back({threads, "tg" + std::to_string(gen), stats(tg)});
    spark_session_destroy(session);
  }

  std::printf("| model | size | backend | threads | test | t/s |\n"
              "| --- | ---: | --- | ---: | ---: | ---: |\n");
  for (const Row &row : rows)
    std::printf("| spark %s | %.2f GiB | %s %s | %d | %s | %.2f ± %.2f |\n",
                args.positional()[0].c_str(),
                double(info.pack_bytes) / (1024.0 * 1024 * 1024), target.c_str(),
                dispatch.c_str(), row.threads, row.test.c_str(), row.speed.mean,
                row.speed.stddev);
  std::printf("\n| threads | open to ready-to-decode | RssAnon when ready | "
              "peak RssAnon |\n| ---: | ---: | ---: | ---: |\n");
  for (const Load &load : loads)
    std::printf("| %d | %.1f ms | %.1f MiB | %.1f MiB |\n", load.threads,
                load.seconds * 1000.0,
                double(load.anonAfterOpen) / (1024.0 * 1024),
                double(peakAnon) / (1024.0 * 1024));
  return 0;
}
