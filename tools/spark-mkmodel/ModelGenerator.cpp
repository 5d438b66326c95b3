//===- ModelGenerator.cpp - write random-weight Spark checkpoints ---------===//
#include "ModelGenerator.h"


#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace llvm;

namespace spark {

Expected<ModelConfig> presetConfig(StringRef name) {
  ModelConfig c;
  if (name == "tiny") {
    c.hiddenSize = 16;
    c.intermediateSize = 32;
    c.numLayers = 4;
    c.numHeads = 4;
    c.numKVHeads = 2;
    c.headDim = 8;
    c.slidingWindow = 8;
    c.vocabSize = 64;
    c.maxPositionEmbeddings = 4096;
  } else if (name == "mini") {
    c.hiddenSize = 256;
    c.intermediateSize = 768;
    c.numLayers = 8;
    c.numHeads = 4;
    c.numKVHeads = 2;
    c.headDim = 64;
    c.slidingWindow = 64;
    c.vocabSize = 4096;
    c.maxPositionEmbeddings = 32768;
  } else if (name == "1.7b") {
    c.hiddenSize = 2048;
    c.intermediateSize = 6656;
    c.numLayers = 28;
    c.numHeads = 8;
    c.numKVHeads = 2;
    c.headDim = 256;
    c.slidingWindow = 512;
    c.vocabSize = 131072;
    c.maxPositionEmbeddings = 1048576;
  } else {
    return createStringError(inconvertibleErrorCode(),
                             "unknown preset '%s'; expected tiny, mini or 1.7b",
                             name.str().c_str());
  }
  c.rmsNormEps = 1e-6;
  c.tieWordEmbeddings = true;
  c.headwiseGate = true;
  c.layerTypes = defaultLayerTypes(c.numLayers);
  c.fullRope = {5000000.0, 0.25};
  c.slidingRope = {10000.0, 1.0};
  return c;
}

namespace {

/// How one tensor's values are drawn: uniform with this mean and std.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  double mean = 0.0, stddev = 1.0;

  uint64_t elements() const {
    uint64_t n = 1;
    for (int64_t d : shape)
      n *= uint64_t(d);
    return n;
  }
};

uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t hashName(StringRef name) {
  uint64_t h = 0xcbf29ce484222325ull; // FNV-1a
  for (char ch : name)
    h = (h ^ uint8_t(ch)) * 0x100000001b3ull;
  return h;
}

/// The tensors of the model in checkpoint order, with value scales chosen so
/// that every layer changes the residual stream by more than the input
/// token's own embedding: otherwise a tied head just echoes the input token.
std::vector<TensorSpec> modelTensors(const GeneratorOptions &options) {
  const ModelConfig &c = options.config;
  const int64_t d = c.hiddenSize, hd = c.headDim, q = c.numHeads * hd,
                kv = c.numKVHeads * hd, inter = c.intermediateSize;
  // Each layer's residual contribution has about this std; the embedding has
  // std 1, so the embedding's share of the final state is about 1/sqrt(d).
  const double residualGain = std::sqrt(double(d) / double(c.numLayers));
  auto in = [](int64_t fanIn) { return 1.0 / std::sqrt(double(fanIn)); };

  std::vector<TensorSpec> specs;
  auto add = [&](std::string name, std::vector<int64_t> shape, double mean,
                 double stddev) {
    specs.push_back({std::move(name), std::move(shape), mean, stddev});
  };
  add("model.embedding.weight", {c.vocabSize, d}, 0.0, 1.0);
  for (int64_t i = 0; i < c.numLayers; ++i) {
    std::string p = formatv("model.layers.{0}.", i).str();
    add(p + "input_layernorm.weight", {d}, 1.0, 0.2);
    if (options.splitQKV) {
      add(p + "self_attn.q_proj.weight", {q, d}, 0.0, in(d));
      add(p + "self_attn.k_proj.weight", {kv, d}, 0.0, in(d));
      add(p + "self_attn.v_proj.weight", {kv, d}, 0.0, in(d));
    } else {
      add(p + "self_attn.q_k_v_proj.weight", {q + 2 * kv, d}, 0.0, in(d));
    }
    if (c.headwiseGate)
      add(p + "self_attn.g_proj.weight", {c.numHeads, d}, 0.0, 2.0 * in(d));
    add(p + "self_attn.out_proj.weight", {d, q}, 0.0, residualGain * in(q));
    add(p + "post_attention_layernorm.weight", {d}, 1.0, 0.2);
    if (options.fusedGateUp) {
      add(p + "mlp.gate_up_proj.weight", {2 * inter, d}, 0.0, in(d));
    } else {
      add(p + "mlp.gate_proj.weight", {inter, d}, 0.0, in(d));
      add(p + "mlp.up_proj.weight", {inter, d}, 0.0, in(d));
    }
    add(p + "mlp.down_proj.weight", {d, inter}, 0.0,
        2.0 * residualGain * in(inter));
  }
  add("model.norm.weight", {d}, 1.0, 0.2);
  if (!c.tieWordEmbeddings || options.writeTiedHead)
    add("lm_head.weight", {c.vocabSize, d}, 0.0, 1.0);
  return specs;
}

/// Streams the tensor's values, in `dtype`, to `os` in bounded chunks.
void writeTensorData(raw_ostream &os, const TensorSpec &spec, DType dtype,
                     uint64_t seed) {
  uint64_t state = seed ^ hashName(spec.name);
  const double halfWidth = spec.stddev * std::sqrt(3.0);
  const size_t elementSize = dtypeSize(dtype);
  constexpr uint64_t kChunk = 1 << 20;
  std::vector<uint8_t> buffer(kChunk * elementSize);
  for (uint64_t done = 0, total = spec.elements(); done < total;) {
    uint64_t n = std::min(kChunk, total - done);
    for (uint64_t i = 0; i < n; ++i) {
      // 53 random bits -> [0, 1) -> [-1, 1)
      double u = double(splitmix64(state) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
      encodeElement(float(spec.mean + halfWidth * u), dtype,
                    buffer.data() + i * elementSize);
    }
    os.write(reinterpret_cast<const char *>(buffer.data()), n * elementSize);
    done += n;
  }
}

Error writeFileAtomically(StringRef path,
                          function_ref<void(raw_ostream &)> write) {
  // A temporary name beside `path`, renamed into place when complete.
  if (Error e = writeToOutput(path, [&](raw_ostream &os) {
        write(os);
        return Error::success();
      }))
    return createStringError(path + ": cannot write: " + toString(std::move(e)));
  return Error::success();
}

Error writeSafetensors(StringRef path, ArrayRef<const TensorSpec *> tensors,
                       DType dtype, uint64_t seed) {
  json::Object header;
  header["__metadata__"] = json::Object{{"format", "pt"}};
  uint64_t offset = 0;
  for (const TensorSpec *spec : tensors) {
    uint64_t bytes = spec->elements() * dtypeSize(dtype);
    json::Array shape;
    for (int64_t dim : spec->shape)
      shape.push_back(dim);
    header[spec->name] =
        json::Object{{"dtype", dtypeName(dtype)},
                     {"shape", std::move(shape)},
                     {"data_offsets", json::Array{offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = formatv("{0}", json::Value(std::move(header))).str();
  text.append((8 - text.size() % 8) % 8, ' '); // align the data section
  return writeFileAtomically(path, [&](raw_ostream &os) {
    uint64_t length = text.size();
    for (int i = 0; i < 8; ++i)
      os << char((length >> (8 * i)) & 0xff);
    os << text;
    for (const TensorSpec *spec : tensors)
      writeTensorData(os, *spec, dtype, seed);
  });
}

} // namespace

Error writeCheckpoint(const GeneratorOptions &options, StringRef directory) {
  if (options.shards < 1)
    return createStringError(inconvertibleErrorCode(),
                             "shard count must be at least 1, got %d",
                             options.shards);
  // Check the config the way the importer will read it.
  std::string configText =
      formatv("{0:2}", json::Value(options.config.toJSON())).str() + "\n";
  if (Expected<ModelConfig> check =
          ModelConfig::parse(configText, "generated config.json");
      !check)
    return check.takeError();
  if (std::error_code ec = sys::fs::create_directories(directory))
    return createStringError(ec, "%s: cannot create directory: %s",
                             directory.str().c_str(), ec.message().c_str());
  auto pathOf = [&](StringRef file) {
    SmallString<256> path(directory);
    sys::path::append(path, file);
    return std::string(path);
  };
  if (Error e = writeFileAtomically(pathOf("config.json"),
                                    [&](raw_ostream &os) { os << configText; }))
    return e;

  std::vector<TensorSpec> specs = modelTensors(options);
  if (options.shards == 1) {
    std::vector<const TensorSpec *> all;
    for (const TensorSpec &spec : specs)
      all.push_back(&spec);
    if (Error e = writeSafetensors(pathOf("model.safetensors"), all,
                                   options.dtype, options.seed))
      return e;
    if (options.verbose)
      outs() << "wrote " << pathOf("model.safetensors") << "\n";
    return Error::success();
  }

  // Fill shards in order, each up to about an equal share of the bytes.
  uint64_t totalBytes = 0;
  for (const TensorSpec &spec : specs)
    totalBytes += spec.elements() * dtypeSize(options.dtype);
  uint64_t perShard = (totalBytes + options.shards - 1) / options.shards;
  std::vector<std::vector<const TensorSpec *>> shards(options.shards);
  uint64_t filled = 0;
  for (const TensorSpec &spec : specs) {
    size_t index = std::min<size_t>(filled / std::max<uint64_t>(perShard, 1),
                                    options.shards - 1);
    shards[index].push_back(&spec);
    filled += spec.elements() * dtypeSize(options.dtype);
  }
  json::Object weightMap;
  for (int s = 0; s < options.shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1,
                  options.shards);
    for (const TensorSpec *spec : shards[s])
      weightMap[spec->name] = std::string(name);
    if (Error e = writeSafetensors(pathOf(name), shards[s], options.dtype,
                                   options.seed))
      return e;
    if (options.verbose)
      outs() << "wrote " << pathOf(name) << "\n";
  }
  json::Object index{{"metadata", json::Object{{"total_size", totalBytes}}},
                     {"weight_map", std::move(weightMap)}};
  return writeFileAtomically(
      pathOf("model.safetensors.index.json"), [&](raw_ostream &os) {
        os << formatv("{0:2}", json::Value(std::move(index))) << "\n";
      });
}

} // namespace spark
