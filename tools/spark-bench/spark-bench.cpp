//===- spark-bench.cpp - prefill / decode speed, roofline, load, memory ---===//
//
// spark-bench OUT [-p 512] [-n 128] [-t 1,2] [-r 3] [-d 0,4096] [--json PATH]
//
// Prints, in llama-bench's table form, pp<P> (prompt tokens per second in
// prefill chunks) and tg<N> (tokens per second decoding one at a time, from
// an empty context or after -d tokens of prefill), then the time from
// spark_model_open to a session ready to decode and the peak anonymous RSS
// (RssAnon, not VmRSS: the weights are a file mapping and do not count).
//
// Beside each tg row: the read bandwidth of this machine measured in the same
// run with the same thread count (a stream over a 1 GiB buffer, right before
// each measured repetition of the row and after the last: on a shared VM the
// bandwidth moves from second to second), the bytes one decode step reads (the
// weights the manifest's decode_weight_bytes names, plus the cache positions
// attention reads, averaged over the run) and the decode speed as a share of
// the roofline, bandwidth / bytes per token; last, the same stream over the
// pages of the weight pack the model maps (after the row's last probe): on a
// VM those can read slower than the probe's buffer, and decode cannot beat
// them. A benchmark, not a test: quote ratios measured in one run.
//
//===----------------------------------------------------------------------===//
#include "ModelLoader.h"
#include "StreamRead.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Process.h"

#include <dlfcn.h>
#include <sys/mman.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

// One line of the usage per source line.
// clang-format off
const char *kUsage =
    "usage: spark-bench OUT [-p|--prompt 512] [-n|--gen 128] [-t|--threads 1,2]\n"
    "                   [-r|--repetitions 3] [-d|--depth 0[,4096,...]]\n"
    "                   [--json PATH] [--profile] [--no-bandwidth] [--no-verify]\n"
    "                   [--pack F]\n"
    "  -d: decode after this many prefilled positions (one tg row each)\n"
    "  --json: also write the results as JSON to PATH\n"
    "  --profile: time per kernel kind and layer type of the prefill of -p\n"
    "             tokens and of one decode step (after the largest -d)\n"
    "  --no-bandwidth: skip the stream-bandwidth probes (of a buffer and of\n"
    "                  the pack) and the roofline columns\n"
    "  --pack: open the weight pack F (of the same build) instead of\n"
    "          OUT/model.spkw: two builds of one model measured on the same\n"
    "          pages of one pack\n";
// clang-format on

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

/// A 1 GiB buffer of ones, in 2 MiB pages where the kernel gives them
/// (MADV_HUGEPAGE, as the runtime advises for the pack mapping): with 4 KiB
/// pages a stream spends part of its time on TLB misses the weights do not
/// have, and the roofline would be set too low.
class ProbeBuffer {
public:
  static constexpr size_t kBytes = size_t(1) << 30;
  ProbeBuffer() {
    void *p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return;
    madvise(p, kBytes, MADV_HUGEPAGE);
    data_ = static_cast<float *>(p);
    std::fill(data_, data_ + kBytes / sizeof(float), 1.0f);
  }
  ~ProbeBuffer() {
    if (data_)
      munmap(data_, kBytes);
  }
  ProbeBuffer(const ProbeBuffer &) = delete;
  ProbeBuffer &operator=(const ProbeBuffer &) = delete;
  const float *data() const { return data_; }
  size_t size() const { return data_ ? kBytes / sizeof(float) : 0; }

private:
  float *data_ = nullptr;
};

/// Read bandwidth in GB/s with `threads` threads: the best of 12 passes over
/// `buffer`, each thread summing its own slice (spark::widestLineSum: 64-byte
/// loads where the CPU has AVX-512). Passes take turns without prefetch and
/// with each line requested into L2 4, 6 or 12 KiB ahead: the decode
/// kernels' kind of prefetch at the distances they use
/// (microkernel_support.h; on CPUs with few L1 fill buffers, an Intel Xeon
/// here, a plain loop of narrow loads reads well below what memory delivers,
/// and decode would seem faster than its roofline). 0 if there is no buffer.
double streamBandwidth(const float *data, size_t bytes, int threads) {
  const size_t lines = bytes / 64;
  const spark::LineSum sumLines = spark::widestLineSum();
  static constexpr size_t kAhead[] = {0, 4096, 6144, 12288};
  double best = 0;
  volatile float sink = 0;
  for (int pass = 0; lines > 0 && pass < 12; ++pass) {
    const size_t ahead = kAhead[pass % 4];
    std::vector<float> sums(size_t(threads), 0.0f);
    double start = now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
#if defined(__x86_64__)
        // Denormals as zero: a pack's bytes read as floats hold some, and
        // an add of one takes a microcode assist on Intel cores.
        _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
        // whole blocks of 4 lines
        size_t begin = lines * size_t(t) / size_t(threads) / 4 * 4;
        size_t end = lines * size_t(t + 1) / size_t(threads) / 4 * 4;
        sums[size_t(t)] = sumLines(data + begin * 16, end - begin, ahead);
      });
    for (std::thread &w : workers)
      w.join();
    double seconds = now() - start;
    for (float v : sums)
      sink = sink + v;
    best = std::max(best, double(lines * 64) / seconds / 1e9);
  }
  return best;
}

double streamBandwidth(const ProbeBuffer &buffer, int threads) {
  return streamBandwidth(buffer.data(), buffer.size() * sizeof(float), threads);
}

/// `path` mapped read-only (no page touched), or an empty region if it
/// cannot be opened, is empty or cannot be mapped.
llvm::sys::fs::mapped_file_region mapFile(const std::string &path) {
  llvm::Expected<llvm::sys::fs::file_t> file =
      llvm::sys::fs::openNativeFileForRead(path);
  if (!file) {
    llvm::consumeError(file.takeError());
    return {};
  }
  uint64_t size = 0;
  std::error_code ec = llvm::sys::fs::file_size(path, size);
  llvm::sys::fs::mapped_file_region region;
  if (!ec && size > 0)
    region = llvm::sys::fs::mapped_file_region(
        *file, llvm::sys::fs::mapped_file_region::readonly, size_t(size), 0,
        ec);
  llvm::sys::fs::closeFile(*file);
  if (ec)
    return {};
  return region;
}

/// The weight pack mapped again (read-only, MADV_HUGEPAGE, as the runtime
/// maps it; LLVM's read-only mapping is private, which maps the same
/// page-cache pages, in 2 MiB pages as well once read): the pages the decode
/// steps read. On a VM they can read slower than the probe's fresh anonymous
/// pages (seen on an Intel Xeon guest: one pack 12.4-14.4 GB/s on one thread
/// where the probe and the other packs read 15.1-15.5), and no kernel
/// streams its weights faster than their pages deliver.
class PackMapping {
public:
  explicit PackMapping(const std::string &path) : region_(mapFile(path)) {
    if (region_)
      madvise(const_cast<char *>(region_.const_data()), region_.size(),
              MADV_HUGEPAGE);
  }
  /// GB/s of the stream over the whole pack (whole blocks of 4 lines), 0 if
  /// it could not be mapped.
  double bandwidth(int threads) const {
    return region_ && region_.size() >= 256
               ? streamBandwidth(
                     reinterpret_cast<const float *>(region_.const_data()),
                     region_.size() / 256 * 256, threads)
               : 0.0;
  }

private:
  llvm::sys::fs::mapped_file_region region_;
};

/// The share of the pack's pages in the page cache (mincore over a mapping
/// of it that touches none), or -1 if it cannot be told: a first open after
/// the cache was dropped reads the pack from disk.
double cachedShare(const std::string &path) {
  llvm::sys::fs::mapped_file_region region = mapFile(path);
  if (!region)
    return -1;
  const size_t page = size_t(llvm::sys::Process::getPageSizeEstimate());
  std::vector<unsigned char> resident((region.size() + page - 1) / page);
  if (mincore(const_cast<char *>(region.const_data()), region.size(),
              resident.data()) != 0)
    return -1;
  size_t in = 0;
  for (unsigned char r : resident)
    in += r & 1;
  return double(in) / double(resident.size());
}

/// The manifest's decode_weight_bytes (0 when the build predates it).
uint64_t decodeWeightBytes(const std::string &outDir) {
  std::ifstream in(outDir + "/manifest.json");
  std::stringstream text;
  text << in.rdbuf();
  const std::string key = "\"decode_weight_bytes\":";
  std::string all = text.str();
  size_t at = all.find(key);
  return at == std::string::npos
             ? 0
             : std::strtoull(all.c_str() + at + key.size(), nullptr, 10);
}

/// Cache bytes attention reads for a token at position `pos` (its own key
/// and value included): a ring cache at most its slots, a linear one every
/// position so far.
uint64_t cacheBytesAt(const spark_model_def *def, int64_t pos) {
  uint64_t bytes = 0;
  for (int32_t i = 0; i < def->num_caches; ++i) {
    const spark_cache_def &c = def->caches[i];
    int64_t positions = pos + 1;
    if (c.layout == SPARK_CACHE_RING)
      positions = std::min<int64_t>(positions, c.slots);
    bytes += uint64_t(positions) * uint64_t(c.kv_heads) * uint64_t(c.head_dim) *
             (c.dtype == SPARK_DTYPE_F32 ? 4 : 2);
  }
  return bytes;
}

Stats stats(const std::vector<double> &values) {
  Stats s;
  for (double v : values)
    s.mean += v;
  s.mean /= double(values.size());
  for (double v : values)
    s.stddev += (v - s.mean) * (v - s.mean);
  s.stddev =
      values.size() > 1 ? std::sqrt(s.stddev / double(values.size() - 1)) : 0;
  return s;
}

uint64_t clockNs() {
  using namespace std::chrono;
  return uint64_t(
      duration_cast<nanoseconds>(steady_clock::now().time_since_epoch())
          .count());
}

/// One line of a decode profile: a kind of call in one part of the model.
struct ProfileLine {
  std::string part, kind;
  int calls = 0; // per step
  double ms = 0; // per token
};

/// The profile lines of `ns` (each call's time over `tokens` tokens), largest
/// first, then "sampling" (when `sampling` is not negative) and the time
/// outside the calls.
std::vector<ProfileLine> profileLines(spark_model *model,
                                      const spark_model_def *def,
                                      const std::vector<uint64_t> &ns,
                                      uint64_t total, int64_t sampling,
                                      long long tokens) {
  int32_t numCalls = 0;
  const spark_call_def *calls = nullptr;
  spark_model_get_calls(model, &numCalls, &calls);
  std::vector<ProfileLine> lines;
  uint64_t inCalls = 0;
  for (int32_t i = 0; i < numCalls && size_t(i) < ns.size(); ++i) {
    int layer = calls[i].layer;
    std::string part = "model";
    if (layer >= 0 && 2 * layer < def->num_caches)
      part = def->caches[2 * layer].layout == SPARK_CACHE_RING
                 ? "sliding layers"
                 : "full layers";
    auto it =
        std::find_if(lines.begin(), lines.end(), [&](const ProfileLine &l) {
          return l.part == part && l.kind == calls[i].kind;
        });
    if (it == lines.end()) {
      lines.push_back({part, calls[i].kind});
      it = lines.end() - 1;
    }
    it->calls += 1;
    it->ms += double(ns[size_t(i)]) / 1e6 / double(tokens);
    inCalls += ns[size_t(i)];
  }
  std::sort(
      lines.begin(), lines.end(),
      [](const ProfileLine &a, const ProfileLine &b) { return a.ms > b.ms; });
  if (sampling >= 0)
    lines.push_back({"runtime", "sampling (greedy)", 1,
                     double(sampling) / 1e6 / double(tokens)});
  double outside =
      double(total) - double(inCalls) - double(sampling > 0 ? sampling : 0);
  lines.push_back({"runtime", "between calls", 0,
                   std::max(0.0, outside) / 1e6 / double(tokens)});
  return lines;
}

/// Decodes `gen` tokens from `state` (a session snapshot; empty: an empty
/// context) with the profile hook on and greedy sampling after each step;
/// returns the lines, largest first, with "sampling" and the step's own time
/// outside its calls last.
std::vector<ProfileLine> profileDecode(spark_model *model,
                                       spark_session *session,
                                       const spark_model_def *def,
                                       const std::vector<int32_t> &tokens,
                                       const std::vector<unsigned char> &state,
                                       long long gen, double &msPerToken) {
  int32_t numCalls = 0;
  const spark_call_def *calls = nullptr;
  spark_model_get_calls(model, &numCalls, &calls);
  std::vector<uint64_t> ns(size_t(numCalls), 0);
  spark_sampler_params sp = spark_sampler_params_default();
  sp.temperature = 0;
  spark_sampler *sampler = nullptr;
  spark_sampler_create(&sp, def->vocab_size, &sampler);
  if (state.empty())
    spark_session_reset(session);
  else
    spark_session_restore(session, state.data(), state.size());
  spark_model_set_profile(model, ns.data(), clockNs);
  uint64_t sampling = 0, start = clockNs();
  for (long long i = 0; i < gen; ++i) {
    spark_session_decode(session, tokens[size_t(i)]);
    const float *logits = nullptr;
    spark_session_logits(session, &logits);
    uint64_t s0 = clockNs();
    int32_t token;
    spark_sampler_sample(sampler, logits, &token);
    sampling += clockNs() - s0;
  }
  uint64_t total = clockNs() - start;
  spark_model_set_profile(model, nullptr, nullptr);
  spark_sampler_destroy(sampler);
  msPerToken = double(total) / 1e6 / double(gen);
  return profileLines(model, def, ns, total, int64_t(sampling), gen);
}

/// Prefills the first `prompt` of `tokens` into an empty context with the
/// profile hook on; the lines per prompt token, largest first.
std::vector<ProfileLine> profilePrefill(spark_model *model,
                                        spark_session *session,
                                        const spark_model_def *def,
                                        const std::vector<int32_t> &tokens,
                                        long long prompt, double &msPerToken) {
  int32_t numCalls = 0;
  const spark_call_def *calls = nullptr;
  spark_model_get_calls(model, &numCalls, &calls);
  std::vector<uint64_t> ns(size_t(numCalls), 0);
  spark_session_reset(session);
  spark_model_set_profile(model, ns.data(), clockNs);
  uint64_t start = clockNs();
  spark_status status =
      spark_session_eval(session, tokens.data(), int32_t(prompt), 0, nullptr);
  uint64_t total = clockNs() - start;
  spark_model_set_profile(model, nullptr, nullptr);
  if (status != SPARK_OK) { // the table's own prefill succeeded; say so if not
    std::fprintf(stderr, "spark-bench: profiled prefill: %s\n",
                 spark_status_string(status));
    msPerToken = 0;
    return {};
  }
  msPerToken = double(total) / 1e6 / double(prompt);
  return profileLines(model, def, ns, total, -1, prompt);
}

/// A comma-separated list of integers >= `least`; "" on success, else why not.
std::string parseList(const std::string &text, const char *option, int least,
                      std::vector<int> &out) {
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    char *end = nullptr;
    long value = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value < least || value > (1L << 30))
      return std::string(option) + ": '" + item + "' is not " +
             (least > 0 ? "a positive" : "a non-negative") + " whole number";
    out.push_back(int(value));
  }
  if (out.empty())
    return std::string(option) + ": expected a comma-separated list";
  return "";
}

} // namespace

int main(int argc, char **argv) {
  // Accept llama-bench's short flags too.
  std::vector<char *> normalized;
  std::vector<std::string> storage;
  storage.reserve(argc);
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-p")
      a = "--prompt";
    else if (a == "-n")
      a = "--gen";
    else if (a == "-t")
      a = "--threads";
    else if (a == "-r")
      a = "--repetitions";
    else if (a == "-d")
      a = "--depth";
    storage.push_back(a);
  }
  for (std::string &s : storage)
    normalized.push_back(s.data());
  spark::Arguments args(int(normalized.size()), normalized.data(),
                        {{"prompt", true},
                         {"gen", true},
                         {"threads", true},
                         {"repetitions", true},
                         {"depth", true},
                         {"json", true},
                         {"no-bandwidth", false},
                         {"no-verify", false},
                         {"pack", true},
                         {"profile", false},
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
  const std::string outDir = args.positional()[0];
  const std::string pack = args.get("pack", "");
  std::vector<int> threadCounts, depths;
  std::string listError =
      parseList(args.get("threads", "1,2"), "--threads", 1, threadCounts);
  if (listError.empty())
    listError = parseList(args.get("depth", "0"), "--depth", 0, depths);
  if (!listError.empty())
    return fail(listError);
  if (prompt < 1 || gen < 1 || reps < 1)
    return fail("-p, -n and -r must be positive");
  const bool probe = !args.has("no-bandwidth");
  const uint64_t weightBytes = decodeWeightBytes(outDir);
  // The pack the runtime maps, streamed after each tg row's last probe.
  const std::string packPath = pack.empty() ? outDir + "/model.spkw" : pack;
  std::optional<PackMapping> packPages;
  if (probe)
    packPages.emplace(packPath);

  struct Row {
    int threads;
    std::string test;
    Stats speed;
    int depth = -1;       // tg rows: the prefilled positions
    double bandwidth = 0; // GB/s, the mean of the row's probes
    double bandwidthMin = 0, bandwidthMax = 0;
    int probes = 0;
    double packBandwidth = 0; // GB/s of a stream over the pack's pages
    double bytesPerToken = 0;
  };
  std::vector<Row> rows;
  struct Load {
    int threads;
    double seconds; // checksums verified at open (or not at all)
    double cached;  // the pack's share in the page cache before, or -1
    size_t anonAfterOpen;
    // SPARK_VERIFY_IN_BACKGROUND, opened again after the run's first open:
    // to ready-to-decode, and to the checksums' verdict (waited for at once)
    double backgroundReady = -1, backgroundVerified = -1;
  };
  std::vector<Load> loads;
  struct Profile {
    const char *phase; // "prefill" or "decode"
    int threads;
    int depth; // decode: positions before the step; prefill: prompt tokens
    double msPerToken;
    std::vector<ProfileLine> lines;
  };
  std::vector<Profile> profiles;
  size_t peakAnon = rssAnon();
  spark_model_info info{};
  // Copies: info's strings live in the library, unloaded after each run.
  std::string target, dispatch;
  // The probe's buffer is mapped for each probe and freed after it: never
  // in the RSS figures. 0 if it cannot be mapped.
  auto probeNow = [](int threads) {
    ProbeBuffer buffer;
    return buffer.size() ? streamBandwidth(buffer, threads) : 0.0;
  };
  auto probeFailed = [] {
    std::fprintf(stderr,
                 "spark-bench: cannot map 1 GiB for the bandwidth probe (%s); "
                 "run with --no-bandwidth\n",
                 std::strerror(errno));
    return 1;
  };
  for (int threads : threadCounts) {
    spark::LoadedModel loaded;
    spark_open_params params = spark_open_params_default();
    params.num_threads = threads;
    params.verify_checksums = !args.has("no-verify");
    const double cached = cachedShare(packPath);
    double start = now();
    std::string error = loaded.load(outDir, params, pack);
    if (!error.empty())
      return fail(error);
    spark_session *session;
    if (spark_status s = spark_session_create(loaded.model, nullptr, &session))
      return fail(std::string("session: ") + spark_status_string(s));
    loads.push_back({threads, now() - start, cached, rssAnon()});
    if (!args.has("no-verify")) {
      spark::LoadedModel background;
      spark_open_params deferred = params;
      deferred.verify_checksums = SPARK_VERIFY_IN_BACKGROUND;
      spark_session *ready;
      const double t0 = now();
      std::string error = background.load(outDir, deferred, pack);
      if (!error.empty())
        return fail(error);
      if (spark_status s =
              spark_session_create(background.model, nullptr, &ready))
        return fail(std::string("session: ") + spark_status_string(s));
      loads.back().backgroundReady = now() - t0;
      if (spark_status s =
              spark_model_wait_verified(background.model, nullptr, 0))
        return fail(std::string("background verification: ") +
                    spark_status_string(s));
      loads.back().backgroundVerified = now() - t0;
      spark_session_destroy(ready);
    }
    spark_model_get_info(loaded.model, &info);
    target = info.target;
    dispatch = info.dispatch;
    auto definition = reinterpret_cast<const spark_model_def *(*)(void)>(
        dlsym(loaded.library, "spark_model_definition"));
    if (!definition)
      return fail(outDir + "/libspark_model.so: no spark_model_definition");
    const spark_model_def *def = definition();
    const int maxDepth = *std::max_element(depths.begin(), depths.end());
    if (prompt > info.max_context || maxDepth + gen > info.max_context)
      return fail("the build holds " + std::to_string(info.max_context) +
                  " positions; -p and -d + -n must fit (spark-compile "
                  "--max-context)");
    std::vector<int32_t> tokens(
        size_t(std::max<long long>({prompt, gen, (long long)maxDepth})));
    uint64_t state = 42;
    for (int32_t &t : tokens) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      t = int32_t((state >> 33) % uint64_t(info.vocab_size));
    }
    std::vector<double> pp;
    for (long long r = 0; r <= reps; ++r) { // r == 0 warms up
      spark_session_reset(session);
      double t0 = now();
      if (spark_status s = spark_session_eval(session, tokens.data(),
                                              int32_t(prompt), 0, nullptr))
        return fail(std::string("prefill: ") + spark_status_string(s));
      if (r > 0)
        pp.push_back(double(prompt) / (now() - t0));
    }
    rows.push_back({threads, "pp" + std::to_string(prompt), stats(pp)});
    if (args.has("profile")) {
      Profile p{"prefill", threads, int(prompt), 0, {}};
      p.lines = profilePrefill(loaded.model, session, def, tokens, prompt,
                               p.msPerToken);
      profiles.push_back(std::move(p));
    }
    for (int depth : depths) {
      // Prefill `depth` positions once and restore them before each run
      // (the snapshot's own memory is left out of the RSS figures).
      spark_session_reset(session);
      if (depth > 0) {
        // The table comes at the end; a deep prefill takes minutes.
        std::fprintf(stderr,
                     "spark-bench: %d thread%s: prefilling %d positions\n",
                     threads, threads == 1 ? "" : "s", depth);
        const double start = now();
        if (spark_status s =
                spark_session_eval(session, tokens.data(), depth, 0, nullptr))
          return fail(std::string("prefill to depth: ") +
                      spark_status_string(s));
        std::fprintf(stderr, "spark-bench: prefilled %d positions in %.1f s\n",
                     depth, now() - start);
      }
      std::vector<unsigned char> snapshot;
      if (depth > 0) {
        size_t snapshotBytes = 0;
        spark_session_snapshot_bytes(session, &snapshotBytes);
        snapshot.resize(snapshotBytes);
        if (spark_status s = spark_session_snapshot(session, snapshot.data(),
                                                    snapshot.size()))
          return fail(std::string("snapshot: ") + spark_status_string(s));
      }
      std::vector<double> tg, bandwidths;
      for (long long r = 0; r <= reps; ++r) {
        if (probe && r > 0) { // right before each measured repetition
          bandwidths.push_back(probeNow(threads));
          if (bandwidths.back() == 0)
            return probeFailed();
        }
        spark_status restored =
            depth > 0 ? spark_session_restore(session, snapshot.data(),
                                              snapshot.size())
                      : spark_session_reset(session);
        if (restored != SPARK_OK)
          return fail(std::string("restore: ") + spark_status_string(restored));
        double t0 = now();
        for (long long i = 0; i < gen; ++i)
          if (spark_status s = spark_session_decode(session, tokens[size_t(i)]))
            return fail(std::string("decode: ") + spark_status_string(s));
        if (r > 0)
          tg.push_back(double(gen) / (now() - t0));
      }
      double packBandwidth = 0;
      if (probe) { // and after the last
        bandwidths.push_back(probeNow(threads));
        if (bandwidths.back() == 0)
          return probeFailed();
        packBandwidth = packPages->bandwidth(threads);
      }
      size_t anon = rssAnon();
      peakAnon = std::max(peakAnon,
                          anon > snapshot.size() ? anon - snapshot.size() : 0);
      if (args.has("profile") && depth == maxDepth) {
        Profile p{"decode", threads, depth, 0, {}};
        p.lines = profileDecode(loaded.model, session, def, tokens, snapshot,
                                gen, p.msPerToken);
        profiles.push_back(std::move(p));
      }
      double cacheBytes = 0;
      for (long long i = 0; i < gen; ++i)
        cacheBytes += double(cacheBytesAt(def, depth + i));
      Row row{threads,
              "tg" + std::to_string(gen) +
                  (depth ? " @ d" + std::to_string(depth) : ""),
              stats(tg)};
      row.depth = depth;
      if (!bandwidths.empty()) {
        row.bandwidth = stats(bandwidths).mean;
        row.bandwidthMin =
            *std::min_element(bandwidths.begin(), bandwidths.end());
        row.bandwidthMax =
            *std::max_element(bandwidths.begin(), bandwidths.end());
        row.probes = int(bandwidths.size());
        row.packBandwidth = packBandwidth;
      }
      row.bytesPerToken = double(weightBytes) + cacheBytes / double(gen);
      rows.push_back(row);
    }
    spark_session_destroy(session);
  }

  const bool roofline = probe && weightBytes > 0;
  std::printf("| model | size | backend | threads | test | t/s |%s\n"
              "| --- | ---: | --- | ---: | ---: | ---: |%s\n",
              roofline
                  ? " read GB/s | MB/token | roofline t/s | % of roofline | "
                    "pack GB/s |"
                  : "",
              roofline ? " ---: | ---: | ---: | ---: | ---: |" : "");
  for (const Row &row : rows) {
    std::printf("| spark %s | %.2f GiB | %s %s | %d | %s | %.2f ± %.2f |",
                outDir.c_str(),
                double(info.pack_bytes) / (1024.0 * 1024 * 1024),
                target.c_str(), dispatch.c_str(), row.threads, row.test.c_str(),
                row.speed.mean, row.speed.stddev);
    if (roofline && row.depth >= 0) {
      double limit = row.bandwidth * 1e9 / row.bytesPerToken;
      std::printf(" %.1f | %.1f | %.2f | %.0f%% | %.1f |", row.bandwidth,
                  row.bytesPerToken / 1e6, limit,
                  100.0 * row.speed.mean / limit, row.packBandwidth);
    } else if (roofline) {
      std::printf(" | | | | |");
    }
    std::printf("\n");
  }
  if (probe && weightBytes == 0)
    std::printf("\n(no roofline: %s/manifest.json has no decode_weight_bytes; "
                "rebuild with this spark-compile)\n",
                outDir.c_str());
  std::printf("\n| threads | pack in page cache | open to ready-to-decode | "
              "RssAnon when ready | peak RssAnon | ready, checksums in "
              "background | their verdict |\n| ---: | ---: | ---: | ---: | "
              "---: | ---: | ---: |\n");
  for (const Load &load : loads) {
    if (load.cached < 0)
      std::printf("| %d | ? |", load.threads);
    else
      std::printf("| %d | %.0f%% |", load.threads, load.cached * 100.0);
    std::printf(" %.1f ms | %.1f MiB | %.1f MiB |", load.seconds * 1000.0,
                double(load.anonAfterOpen) / (1024.0 * 1024),
                double(peakAnon) / (1024.0 * 1024));
    if (load.backgroundReady < 0)
      std::printf(" - | - |\n");
    else
      std::printf(" %.1f ms | %.1f ms |\n", load.backgroundReady * 1000.0,
                  load.backgroundVerified * 1000.0);
  }

  for (const Profile &p : profiles) {
    if (std::strcmp(p.phase, "prefill") == 0)
      std::printf("\nprofile of a prefill of %d tokens, %d thread%s (%.2f ms "
                  "per token; calls per chunk of the build's max_chunk):\n\n"
                  "| part | kind | calls | ms per token | share |\n"
                  "| --- | --- | ---: | ---: | ---: |\n",
                  p.depth, p.threads, p.threads == 1 ? "" : "s", p.msPerToken);
    else
      std::printf("\nprofile of one decode step, %d thread%s (%.2f ms per "
                  "token after %d positions, greedy sampling included):\n\n"
                  "| part | kind | calls | ms per token | share |\n"
                  "| --- | --- | ---: | ---: | ---: |\n",
                  p.threads, p.threads == 1 ? "" : "s", p.msPerToken, p.depth);
    for (const ProfileLine &line : p.lines)
      std::printf("| %s | %s | %d | %.3f | %.1f%% |\n", line.part.c_str(),
                  line.kind.c_str(), line.calls, line.ms,
                  100.0 * line.ms / p.msPerToken);
  }

  if (args.has("json")) {
    llvm::json::Array rowList;
    for (const Row &row : rows) {
      llvm::json::Object o{{"threads", row.threads},
                           {"test", row.test},
                           {"tokens_per_second", row.speed.mean},
                           {"stddev", row.speed.stddev}};
      if (row.depth >= 0) {
        o["depth"] = row.depth;
        o["bytes_per_token"] = row.bytesPerToken;
        if (probe) {
          o["read_gb_per_second"] = row.bandwidth;
          o["read_gb_per_second_min"] = row.bandwidthMin;
          o["read_gb_per_second_max"] = row.bandwidthMax;
          o["bandwidth_probes"] = row.probes;
          o["pack_read_gb_per_second"] = row.packBandwidth;
        }
        if (roofline)
          o["roofline_fraction"] =
              row.speed.mean * row.bytesPerToken / (row.bandwidth * 1e9);
      }
      rowList.push_back(std::move(o));
    }
    llvm::json::Array loadList;
    for (const Load &load : loads) {
      llvm::json::Object o{
          {"threads", load.threads},
          {"open_to_ready_ms", load.seconds * 1000.0},
          {"pack_cached_fraction", load.cached},
          {"rss_anon_ready_bytes", int64_t(load.anonAfterOpen)}};
      if (load.backgroundReady >= 0) { // not with --no-verify
        o["background_verify_ready_ms"] = load.backgroundReady * 1000.0;
        o["background_verify_verdict_ms"] = load.backgroundVerified * 1000.0;
      }
      loadList.push_back(std::move(o));
    }
    llvm::json::Array profileList;
    for (const Profile &p : profiles) {
      llvm::json::Array lines;
      for (const auto &line : p.lines)
        lines.push_back(llvm::json::Object{{"part", line.part},
                                           {"kind", line.kind},
                                           {"calls", line.calls},
                                           {"ms_per_token", line.ms}});
      profileList.push_back(llvm::json::Object{
          {"phase", p.phase},
          {"threads", p.threads},
          {std::strcmp(p.phase, "prefill") == 0 ? "tokens" : "depth", p.depth},
          {"ms_per_token", p.msPerToken},
          {"lines", std::move(lines)}});
    }
    llvm::json::Object report{{"build", outDir},
                              {"target", target},
                              {"dispatch", dispatch},
                              {"pack_bytes", int64_t(info.pack_bytes)},
                              {"decode_weight_bytes", int64_t(weightBytes)},
                              {"rows", std::move(rowList)},
                              {"loads", std::move(loadList)},
                              {"profiles", std::move(profileList)},
                              {"peak_rss_anon_bytes", int64_t(peakAnon)}};
    const std::string path = args.get("json", "");
    if (std::string e = spark::writeFileAtomically(
            path,
            llvm::formatv("{0:2}", llvm::json::Value(std::move(report))).str() +
                "\n");
        !e.empty())
      return fail(e);
  }
  return 0;
}
