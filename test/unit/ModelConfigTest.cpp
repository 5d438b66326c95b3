//===- ModelConfigTest.cpp - config.json parsing and its errors -----------===//
#include "ModelGenerator.h"
#include "spark/Import/ModelConfig.h"

#include "llvm/Support/FormatVariadic.h"

#include "gtest/gtest.h"

using namespace llvm;
using namespace spark;

namespace {

std::string errorOf(const json::Object &config) {
  std::string text = formatv("{0}", json::Value(json::Object(config))).str();
  Expected<ModelConfig> parsed = ModelConfig::parse(text, "cfg.json");
  if (parsed)
    return "";
  return toString(parsed.takeError());
}

json::Object base() { return cantFail(presetConfig("tiny")).toJSON(); }

TEST(ModelConfig, RoundTripsThroughJSON) {
  ModelConfig c = cantFail(presetConfig("1.7b"));
  std::string text = formatv("{0}", json::Value(c.toJSON())).str();
  ModelConfig back = cantFail(ModelConfig::parse(text, "cfg.json"));
  EXPECT_EQ(back.hiddenSize, 2048);
  EXPECT_EQ(back.numLayers, 28);
  EXPECT_EQ(back.layerTypes, c.layerTypes);
  EXPECT_EQ(back.rotaryDim(LayerType::Full), 64);
  EXPECT_EQ(back.rotaryDim(LayerType::Sliding), 256);
  EXPECT_EQ(back.fullRope.theta, 5000000.0);
}

TEST(ModelConfig, DefaultLayerPatternIsEveryFourthFull) {
  std::vector<LayerType> types = defaultLayerTypes(28);
  EXPECT_EQ(std::count(types.begin(), types.end(), LayerType::Full), 7);
  EXPECT_EQ(types[3], LayerType::Full);
  EXPECT_EQ(types[0], LayerType::Sliding);
  EXPECT_EQ(types[27], LayerType::Full);
}

TEST(ModelConfig, TopLevelRopeAppliesToBothTypes) {
  json::Object c = base();
  c.erase("rope_parameters");
  c["rope_theta"] = 20000.0;
  c["partial_rotary_factor"] = 0.5;
  std::string text = formatv("{0}", json::Value(std::move(c))).str();
  ModelConfig parsed = cantFail(ModelConfig::parse(text, "cfg.json"));
  EXPECT_EQ(parsed.slidingRope.theta, 20000.0);
  EXPECT_EQ(parsed.rotaryDim(LayerType::Sliding), 4);
  EXPECT_EQ(parsed.rotaryDim(LayerType::Full), 4);
}

TEST(ModelConfig, RejectsNonPositiveSizes) {
  json::Object c = base();
  c["sliding_window"] = 0;
  EXPECT_EQ(errorOf(c),
            "cfg.json: field 'sliding_window' must be a positive integer");
}

TEST(ModelConfig, RejectsSizesBeyondTheirRange) {
  // Hostile sizes: a huge layer count without layer_types must not allocate,
  // a huge head_dim must not overflow products of sizes.
  json::Object c = base();
  c.erase("layer_types");
  c["num_hidden_layers"] = int64_t(1) << 40;
  EXPECT_EQ(errorOf(c), "cfg.json: field 'num_hidden_layers' is 1099511627776; "
                        "accepted: 1 to 1024");
  c = base();
  c["head_dim"] = int64_t(1) << 62;
  EXPECT_EQ(errorOf(c), "cfg.json: field 'head_dim' is 4611686018427387904; "
                        "accepted: 1 to 4096");
  c = base();
  c["vocab_size"] = int64_t(1) << 25;
  EXPECT_NE(errorOf(c).find("'vocab_size' is 33554432; accepted: 1 to 16777216"),
            std::string::npos);
}

TEST(ModelConfig, RejectsLayerTypesOfWrongLength) {
  json::Object c = base();
  c["layer_types"] = json::Array{"full_attention"};
  EXPECT_EQ(errorOf(c), "cfg.json: field 'layer_types' has 1 entries but "
                        "num_hidden_layers is 4");
}

TEST(ModelConfig, RejectsOddRotaryDims) {
  json::Object c = base();
  (*c.getObject("rope_parameters")->getObject("full_attention"))
      ["partial_rotary_factor"] = 0.375; // 3 of 8 dims
  EXPECT_NE(errorOf(c).find("rope_parameters.full_attention."
                            "partial_rotary_factor' gives 3 rotary dims"),
            std::string::npos);
}

TEST(ModelConfig, RejectsMissingRopeForUsedLayerType) {
  json::Object c = base();
  c.getObject("rope_parameters")->erase("sliding_attention");
  EXPECT_EQ(errorOf(c), "cfg.json: field 'rope_parameters.sliding_attention' "
                        "is missing but layers of that type exist");
}

TEST(ModelConfig, RejectsWrongTypes) {
  json::Object c = base();
  c["tie_word_embeddings"] = "yes";
  EXPECT_EQ(errorOf(c),
            "cfg.json: field 'tie_word_embeddings' must be true or false");
  c = base();
  c["rms_norm_eps"] = -1.0;
  EXPECT_EQ(errorOf(c),
            "cfg.json: field 'rms_norm_eps' must be a positive finite number");
}

} // namespace
