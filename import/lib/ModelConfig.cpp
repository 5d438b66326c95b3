//===- ModelConfig.cpp - parse and check a Spark-X2.5 config.json ---------===//
#include "spark/Import/ModelConfig.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace llvm;

namespace spark {

StringRef layerTypeName(LayerType type) {
  return type == LayerType::Sliding ? "sliding_attention" : "full_attention";
}

std::vector<LayerType> defaultLayerTypes(int64_t numLayers) {
  std::vector<LayerType> types;
  for (int64_t i = 0; i < numLayers; ++i)
    types.push_back((i + 1) % 4 != 0 ? LayerType::Sliding : LayerType::Full);
  return types;
}

int64_t ModelConfig::rotaryDim(LayerType type) const {
  return static_cast<int64_t>(
      std::llround(headDim * rope(type).partialRotaryFactor));
}

namespace {

/// Reads fields of one JSON object and reports errors as "path: field ...".
class FieldReader {
public:
  FieldReader(const json::Object &object, StringRef path, std::string prefix)
      : object(object), path(path), prefix(std::move(prefix)) {}

  Error error(StringRef field, const Twine &what) const {
    return createStringError(inconvertibleErrorCode(), "%s: field '%s%s' %s",
                             path.str().c_str(), prefix.c_str(),
                             field.str().c_str(), what.str().c_str());
  }

  /// A required positive integer, at most `max` (sizes are bounded so that
  /// every tensor size and product of sizes fits 64 bits with room).
  Error positive(StringRef field, int64_t &out, int64_t max) const {
    const json::Value *value = object.get(field);
    if (!value)
      return error(field, "is missing; expected a positive integer");
    std::optional<int64_t> n = value->getAsInteger();
    if (!n || *n <= 0)
      return error(field, "must be a positive integer");
    if (*n > max)
      return error(field, formatv("is {0}; accepted: 1 to {1}", *n, max));
    out = *n;
    return Error::success();
  }

  /// An optional positive number; keeps `out` when absent.
  Error optionalPositiveNumber(StringRef field, double &out) const {
    const json::Value *value = object.get(field);
    if (!value)
      return Error::success();
    std::optional<double> x = value->getAsNumber();
    if (!x || !(*x > 0.0) || !std::isfinite(*x))
      return error(field, "must be a positive finite number");
    out = *x;
    return Error::success();
  }

  Error optionalBool(StringRef field, bool &out) const {
    const json::Value *value = object.get(field);
    if (!value)
      return Error::success();
    std::optional<bool> b = value->getAsBoolean();
    if (!b)
      return error(field, "must be true or false");
    out = *b;
    return Error::success();
  }

private:
  const json::Object &object;
  StringRef path;
  std::string prefix;
};

Error parseRope(const json::Object &root, StringRef path, ModelConfig &config) {
  FieldReader top(root, path, "");
  if (const json::Value *params = root.get("rope_parameters")) {
    const json::Object *byType = params->getAsObject();
    if (!byType)
      return top.error("rope_parameters",
                       "must be an object keyed by layer type");
    for (const auto &entry : *byType) {
      StringRef key = entry.first;
      RopeParameters *target = key == "sliding_attention" ? &config.slidingRope
                               : key == "full_attention"  ? &config.fullRope
                                                          : nullptr;
      if (!target)
        return top.error(("rope_parameters." + key).str(),
                         "is not a layer type; expected sliding_attention or "
                         "full_attention");
      const json::Object *fields = entry.second.getAsObject();
      if (!fields)
        return top.error(("rope_parameters." + key).str(),
                         "must be an object");
      FieldReader reader(*fields, path, ("rope_parameters." + key + ".").str());
      if (!fields->get("rope_theta"))
        return reader.error("rope_theta", "is missing");
      if (Error e = reader.optionalPositiveNumber("rope_theta", target->theta))
        return e;
      if (Error e = reader.optionalPositiveNumber(
              "partial_rotary_factor", target->partialRotaryFactor))
        return e;
    }
    for (auto [name, type] : {std::pair{"sliding_attention", LayerType::Sliding},
                              std::pair{"full_attention", LayerType::Full}}) {
      bool used = llvm::is_contained(config.layerTypes, type);
      if (used && !byType->get(name))
        return top.error((Twine("rope_parameters.") + name).str(),
                         "is missing but layers of that type exist");
    }
    return Error::success();
  }
  // Older style: one top-level theta for both layer types.
  RopeParameters shared;
  if (!root.get("rope_theta"))
    return top.error("rope_parameters",
                     "is missing (and there is no top-level rope_theta)");
  if (Error e = top.optionalPositiveNumber("rope_theta", shared.theta))
    return e;
  if (Error e = top.optionalPositiveNumber("partial_rotary_factor",
                                           shared.partialRotaryFactor))
    return e;
  config.slidingRope = config.fullRope = shared;
  return Error::success();
}

} // namespace

Expected<ModelConfig> ModelConfig::parse(StringRef text, StringRef path) {
  Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return createStringError(inconvertibleErrorCode(),
                             "%s: not valid JSON: %s", path.str().c_str(),
                             toString(parsed.takeError()).c_str());
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return createStringError(inconvertibleErrorCode(),
                             "%s: expected a JSON object at the top level",
                             path.str().c_str());
  FieldReader reader(*root, path, "");
  ModelConfig config;

  std::optional<StringRef> modelType = root->getString("model_type");
  if (!modelType)
    return reader.error("model_type", "is missing; expected \"spark2_5\"");
  if (*modelType != "spark2_5")
    return reader.error("model_type", "is \"" + *modelType +
                                          "\"; expected \"spark2_5\"");

  // Accepted ranges: far beyond any real model, small enough that products
  // of sizes (a tensor's elements, an arena) cannot overflow.
  struct {
    const char *name;
    int64_t *out;
    int64_t max;
  } required[] = {{"hidden_size", &config.hiddenSize, 1 << 16},
                  {"intermediate_size", &config.intermediateSize, 1 << 18},
                  {"num_hidden_layers", &config.numLayers, 1 << 10},
                  {"num_attention_heads", &config.numHeads, 1 << 10},
                  {"num_key_value_heads", &config.numKVHeads, 1 << 10},
                  {"sliding_window", &config.slidingWindow, 1 << 24},
                  {"vocab_size", &config.vocabSize, 1 << 24}};
  for (auto &field : required)
    if (Error e = reader.positive(field.name, *field.out, field.max))
      return e;

  if (root->get("head_dim")) {
    if (Error e = reader.positive("head_dim", config.headDim, 1 << 12))
      return e;
  } else {
    if (config.hiddenSize % config.numHeads != 0)
      return reader.error("head_dim",
                          "is missing and hidden_size is not a multiple of "
                          "num_attention_heads");
    config.headDim = config.hiddenSize / config.numHeads;
  }
  if (config.numHeads % config.numKVHeads != 0)
    return reader.error("num_key_value_heads",
                        formatv("is {0}, which does not divide "
                                "num_attention_heads ({1})",
                                config.numKVHeads, config.numHeads));
  config.maxPositionEmbeddings = 0;
  if (root->get("max_position_embeddings"))
    if (Error e = reader.positive("max_position_embeddings",
                                  config.maxPositionEmbeddings, 1 << 24))
      return e;
  if (Error e = reader.optionalPositiveNumber("rms_norm_eps", config.rmsNormEps))
    return e;
  if (Error e = reader.optionalBool("tie_word_embeddings",
                                    config.tieWordEmbeddings))
    return e;
  if (Error e = reader.optionalBool("headwise_attn_output_gate",
                                    config.headwiseGate))
    return e;

  if (const json::Value *types = root->get("layer_types")) {
    const json::Array *array = types->getAsArray();
    if (!array)
      return reader.error("layer_types", "must be an array of strings");
    if (static_cast<int64_t>(array->size()) != config.numLayers)
      return reader.error("layer_types",
                          formatv("has {0} entries but num_hidden_layers is {1}",
                                  array->size(), config.numLayers));
    for (auto [i, entry] : llvm::enumerate(*array)) {
      std::optional<StringRef> name = entry.getAsString();
      if (name && *name == "sliding_attention")
        config.layerTypes.push_back(LayerType::Sliding);
      else if (name && *name == "full_attention")
        config.layerTypes.push_back(LayerType::Full);
      else
        return reader.error(formatv("layer_types[{0}]", i).str(),
                            "is not a known layer type; expected "
                            "\"sliding_attention\" or \"full_attention\"");
    }
  } else {
    config.layerTypes = defaultLayerTypes(config.numLayers);
  }

  if (Error e = parseRope(*root, path, config))
    return e;
  for (LayerType type : {LayerType::Sliding, LayerType::Full}) {
    double exact = config.headDim * config.rope(type).partialRotaryFactor;
    int64_t rd = config.rotaryDim(type);
    if (config.rope(type).partialRotaryFactor > 1.0 || rd < 2 || rd % 2 != 0 ||
        std::fabs(exact - rd) > 1e-9)
      return reader.error(
          ("rope_parameters." + layerTypeName(type) + ".partial_rotary_factor")
              .str(),
          Twine("gives ") + formatv("{0}", llvm::format("%g", exact)).str() +
              " rotary dims of head_dim " + Twine(config.headDim) +
              "; expected an even whole number between 2 and head_dim");
  }
  return config;
}

Expected<ModelConfig> ModelConfig::load(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return createStringError(buffer.getError(), "%s: cannot read: %s",
                             path.str().c_str(),
                             buffer.getError().message().c_str());
  return parse((*buffer)->getBuffer(), path);
}

json::Object ModelConfig::toJSON() const {
  json::Array types;
  for (LayerType type : layerTypes)
    types.push_back(layerTypeName(type));
  auto ropeJSON = [](const RopeParameters &rope) {
    return json::Object{{"rope_theta", rope.theta},
                        {"partial_rotary_factor", rope.partialRotaryFactor}};
  };
  return json::Object{
      {"model_type", "spark2_5"},
      {"architectures", json::Array{"Spark2_5ForCausalLM"}},
      {"hidden_size", hiddenSize},
      {"intermediate_size", intermediateSize},
      {"num_hidden_layers", numLayers},
      {"num_attention_heads", numHeads},
      {"num_key_value_heads", numKVHeads},
      {"head_dim", headDim},
      {"headwise_attn_output_gate", headwiseGate},
      {"sliding_window", slidingWindow},
      {"vocab_size", vocabSize},
      {"rms_norm_eps", rmsNormEps},
      {"max_position_embeddings", maxPositionEmbeddings},
      {"tie_word_embeddings", tieWordEmbeddings},
      {"layer_types", std::move(types)},
      {"rope_parameters",
       json::Object{{"full_attention", ropeJSON(fullRope)},
                    {"sliding_attention", ropeJSON(slidingRope)}}}};
}

} // namespace spark
