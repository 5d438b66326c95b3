//===- Checkpoint.cpp - open and validate a Spark-X2.5 checkpoint ---------===//
#include "spark/Import/Checkpoint.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace spark {

namespace {

Error error(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), "%s",
                           message.str().c_str());
}

std::string formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

constexpr StringLiteral kSingleFile = "model.safetensors";
constexpr StringLiteral kIndexFile = "model.safetensors.index.json";

} // namespace

std::string Checkpoint::relativeFile(const TensorView &tensor) const {
  return sys::path::filename(tensor.path).str();
}

Expected<std::unique_ptr<Checkpoint>>
Checkpoint::open(StringRef directory, const CheckpointOptions &options) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir = directory.str();
  if (!sys::fs::is_directory(directory))
    return error(directory + ": not a checkpoint directory (expected a folder "
                             "with config.json and model.safetensors)");
  SmallString<256> configPath(directory);
  sys::path::append(configPath, "config.json");
  Expected<ModelConfig> config = ModelConfig::load(configPath);
  if (!config)
    return config.takeError();
  ckpt->modelConfig = std::move(*config);
  if (Error e = ckpt->loadFiles())
    return e;
  if (Error e = ckpt->resolveTensors())
    return e;
  if (options.checkFinite)
    if (Error e = ckpt->checkFiniteWeights())
      return e;
  return ckpt;
}

Error Checkpoint::loadFiles() {
  SmallString<256> indexPath(dir), singlePath(dir);
  sys::path::append(indexPath, kIndexFile);
  sys::path::append(singlePath, kSingleFile);

  // shard file name -> tensors the index assigns to it.
  std::map<std::string, StringSet<>> indexed;
  if (sys::fs::exists(indexPath)) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
        MemoryBuffer::getFile(indexPath, /*IsText=*/true);
    if (!buffer)
      return error(indexPath + ": cannot read: " +
                   buffer.getError().message());
    Expected<json::Value> index = json::parse((*buffer)->getBuffer());
    if (!index)
      return error(indexPath + ": not valid JSON: " +
                   toString(index.takeError()));
    const json::Object *root = index->getAsObject();
    const json::Object *weightMap = root ? root->getObject("weight_map") : nullptr;
    if (!weightMap)
      return error(indexPath + ": field 'weight_map' is missing; expected an "
                               "object mapping tensor names to shard files");
    for (const auto &entry : *weightMap) {
      std::optional<StringRef> shard = entry.second.getAsString();
      if (!shard || shard->empty() || shard->contains('/') ||
          shard->contains('\\'))
        return error(indexPath + ": weight_map entry '" + entry.first.str() +
                     "' must name a shard file in the checkpoint folder");
      indexed[shard->str()].insert(entry.first.str());
    }
    if (indexed.empty())
      return error(indexPath + ": weight_map is empty");
  } else if (sys::fs::exists(singlePath)) {
    indexed[kSingleFile.str()];
  } else {
    return error(dir + ": neither " + kSingleFile + " nor " + kIndexFile +
                 " exists");
  }

  for (auto &[shard, names] : indexed) {
    SmallString<256> path(dir);
    sys::path::append(path, shard);
    if (!sys::fs::exists(path))
      return error(indexPath + ": shard '" + shard +
                   "' listed in weight_map does not exist");
    Expected<std::unique_ptr<SafetensorsFile>> file =
        SafetensorsFile::open(path);
    if (!file)
      return file.takeError();
    for (const TensorView &tensor : (*file)->tensors()) {
      bool sharded = shard != kSingleFile.str() || !names.empty();
      if (sharded && !names.contains(tensor.name))
        return error(path + ": tensor '" + tensor.name +
                     "' is not assigned to this shard by " + kIndexFile);
      auto [it, inserted] = byName.try_emplace(tensor.name, &tensor);
      if (!inserted)
        return error(path + ": tensor '" + tensor.name +
                     "' is duplicated (also in " + it->second->path + ")");
    }
    for (const auto &name : names)
      if (!byName.count(name.getKey()))
        return error(path + ": tensor '" + name.getKey() +
                     "' is listed in " + kIndexFile +
                     " for this shard but missing from it");
    files.push_back(std::move(*file));
  }
  return Error::success();
}

Error Checkpoint::resolveTensors() {
  const ModelConfig &c = modelConfig;
  StringSet<> claimed;
  // Looks up `name`, checks its shape, and marks it as accounted for.
  auto take = [&](const std::string &name, ArrayRef<int64_t> shape,
                  const TensorView *&out) -> Error {
    auto it = byName.find(name);
    if (it == byName.end())
      return error(dir + ": tensor '" + name + "' is missing (expected shape " +
                   formatShape(shape) + ")");
    const TensorView *tensor = it->second;
    if (tensor->dtype != DType::F32 && tensor->dtype != DType::F16 &&
        tensor->dtype != DType::BF16)
      return error(tensor->path + ": tensor '" + name + "' has dtype " +
                   dtypeName(tensor->dtype).str() +
                   "; expected F32, F16 or BF16");
    if (ArrayRef<int64_t>(tensor->shape) != shape)
      return error(tensor->path + ": tensor '" + name + "' has shape " +
                   formatShape(tensor->shape) + "; expected " +
                   formatShape(shape) + " from config.json");
    claimed.insert(name);
    out = tensor;
    return Error::success();
  };
  auto has = [&](const std::string &name) { return byName.count(name) != 0; };

  const int64_t d = c.hiddenSize, hd = c.headDim, q = c.numHeads * hd,
                kv = c.numKVHeads * hd, inter = c.intermediateSize;
  if (Error e = take("model.embedding.weight", {c.vocabSize, d},
                     embeddingTensor))
    return e;
  if (Error e = take("model.norm.weight", {d}, finalNormTensor))
    return e;
  if (c.tieWordEmbeddings) {
    headTensor = embeddingTensor;
    if (has("lm_head.weight")) { // present though tied: ignored
      const TensorView *ignored;
      if (Error e = take("lm_head.weight", {c.vocabSize, d}, ignored))
        return e;
    }
  } else if (Error e = take("lm_head.weight", {c.vocabSize, d}, headTensor)) {
    return e;
  }

  layerTensors.resize(c.numLayers);
  for (int64_t i = 0; i < c.numLayers; ++i) {
    LayerTensors &layer = layerTensors[i];
    std::string prefix = formatv("model.layers.{0}.", i).str();
    auto name = [&](StringRef suffix) { return prefix + suffix.str(); };
    auto alternatives = [&](StringRef fused, StringRef split) -> Error {
      if (has(name(fused)) && has(name(split)))
        return error(dir + ": layer " + Twine(i) + " has both '" + name(fused) +
                     "' and '" + name(split) + "'; expected one layout");
      return Error::success();
    };

    if (Error e = take(name("input_layernorm.weight"), {d}, layer.inputNorm))
      return e;
    if (Error e = alternatives("self_attn.q_k_v_proj.weight",
                               "self_attn.q_proj.weight"))
      return e;
    if (has(name("self_attn.q_proj.weight"))) {
      if (Error e = take(name("self_attn.q_proj.weight"), {q, d}, layer.q))
        return e;
      if (Error e = take(name("self_attn.k_proj.weight"), {kv, d}, layer.k))
        return e;
      if (Error e = take(name("self_attn.v_proj.weight"), {kv, d}, layer.v))
        return e;
    } else if (Error e = take(name("self_attn.q_k_v_proj.weight"),
                              {q + 2 * kv, d}, layer.qkv)) {
      return e;
    }
    if (c.headwiseGate)
      if (Error e = take(name("self_attn.g_proj.weight"), {c.numHeads, d},
                         layer.attnGate))
        return e;
    if (Error e = take(name("self_attn.out_proj.weight"), {d, q}, layer.out))
      return e;
    if (Error e = take(name("post_attention_layernorm.weight"), {d},
                       layer.postNorm))
      return e;
    if (Error e = alternatives("mlp.gate_up_proj.weight",
                               "mlp.gate_proj.weight"))
      return e;
    if (has(name("mlp.gate_up_proj.weight"))) {
      if (Error e = take(name("mlp.gate_up_proj.weight"), {2 * inter, d},
                         layer.gateUp))
        return e;
    } else {
      if (Error e = take(name("mlp.gate_proj.weight"), {inter, d}, layer.gate))
        return e;
      if (Error e = take(name("mlp.up_proj.weight"), {inter, d}, layer.up))
        return e;
    }
    if (Error e = take(name("mlp.down_proj.weight"), {d, inter}, layer.down))
      return e;
  }

  // The 4-bit grids brought for the matrices (every claimed 2-D tensor but
  // an ignored lm_head.weight).
  std::vector<std::string> matrices;
  for (const auto &entry : claimed)
    if (byName.lookup(entry.getKey())->shape.size() == 2 &&
        !(c.tieWordEmbeddings && entry.getKey() == "lm_head.weight"))
      matrices.push_back(entry.getKey().str());
  for (const std::string &matrix : matrices)
    if (Error e = takeGrid(matrix, claimed))
      return e;

  // Report the first unexpected tensor in name order, so the message does
  // not depend on hash order.
  std::vector<StringRef> unexpected;
  for (const auto &entry : byName)
    if (!claimed.contains(entry.getKey()))
      unexpected.push_back(entry.getKey());
  if (unexpected.empty())
    return Error::success();
  StringRef first = *llvm::min_element(unexpected);
  std::string why = first.ends_with("g_proj.weight") && !c.headwiseGate
                        ? " (headwise_attn_output_gate is false)"
                        : "";
  return error(byName[first]->path + ": unexpected tensor '" + first + "'" +
               why + "; it is not part of a spark2_5 model with this config");
}

Error Checkpoint::takeGrid(const std::string &matrix, StringSet<> &claimed) {
  auto find = [&](StringRef suffix) -> const TensorView * {
    return byName.lookup(matrix + suffix.str());
  };
  auto fail = [&](const TensorView *t, const Twine &what) {
    return error(t->path + ": tensor '" + t->name + "' " + what);
  };
  Int4Grid grid;
  for (int bits : {4, 6}) {
    const std::string prefix = bits == 4 ? ".int4_" : ".int6_";
    Int4Grid g;
    g.bits = bits;
    g.codes = find(prefix + "codes");
    g.scales = find(prefix + "scales");
    g.zeros = find(prefix + "zeros");
    if (!g.codes && !g.scales && !g.zeros)
      continue;
    const TensorView *any = g.codes ? g.codes : g.scales ? g.scales : g.zeros;
    if (grid.codes || grid.scales || grid.zeros)
      return fail(any, "is part of a 6-bit grid for '" + matrix +
                           "', which also has a 4-bit one; give one grid");
    if (!g.codes || !g.scales)
      return fail(any, "is part of a " + std::to_string(bits) +
                           "-bit grid for '" + matrix + "', which needs " +
                           matrix + prefix + "codes and " + matrix + prefix +
                           "scales");
    grid = g;
  }
  if (!grid.codes)
    return Error::success();
  const TensorView &m = *byName.lookup(matrix);
  const int64_t rows = m.shape[0], cols = m.shape[1];
  if (grid.codes->dtype != DType::U8 ||
      ArrayRef<int64_t>(grid.codes->shape) != ArrayRef<int64_t>(m.shape))
    return fail(grid.codes, "is " + dtypeName(grid.codes->dtype).str() + " " +
                                formatShape(grid.codes->shape) +
                                "; expected U8 " + formatShape(m.shape) +
                                ", one " + std::to_string(grid.bits) +
                                "-bit code a byte");
  const TensorView *sides[] = {grid.scales, grid.zeros};
  for (const TensorView *side : sides) {
    if (!side)
      continue;
    const bool shaped = side->shape.size() == 2 && side->shape[0] == rows &&
                        side->shape[1] > 0 && cols % side->shape[1] == 0;
    const int64_t group = shaped ? cols / side->shape[1] : 0;
    if (side->dtype != DType::F16 || !shaped ||
        (group != 32 && group != 64 && group != 128 && group != 256))
      return fail(side, "is " + dtypeName(side->dtype).str() + " " +
                            formatShape(side->shape) + "; expected F16 [" +
                            std::to_string(rows) + ", " + std::to_string(cols) +
                            " / group], groups of 32, 64, 128 or 256 along "
                            "the input of " +
                            matrix);
    if (grid.group && group != grid.group)
      return fail(side, "has groups of " + std::to_string(group) + " where " +
                            grid.scales->name + " has " +
                            std::to_string(grid.group));
    grid.group = group;
  }
  for (const TensorView *t : {grid.codes, grid.scales, grid.zeros})
    if (t)
      claimed.insert(t->name);
  grids[matrix] = grid;
  return Error::success();
}

Error Checkpoint::checkFiniteWeights() {
  for (const std::unique_ptr<SafetensorsFile> &file : files)
    for (const TensorView &tensor : file->tensors()) {
      bool ignored = modelConfig.tieWordEmbeddings && tensor.name == "lm_head.weight";
      if (ignored)
        continue;
      if (Error e = file->checkFinite(tensor))
        return e;
    }
  return Error::success();
}

} // namespace spark
