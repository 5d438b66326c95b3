//===- spark-mkmodel.cpp - write deterministic random Spark checkpoints ---===//
#include "ModelGenerator.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

namespace {

cl::OptionCategory category("spark-mkmodel options");

cl::opt<std::string> outputDir("o", cl::Required,
                               cl::desc("Checkpoint directory to write"),
                               cl::value_desc("dir"), cl::cat(category));
cl::opt<std::string> preset("preset", cl::desc("tiny | mini | 1.7b"),
                            cl::init("tiny"), cl::cat(category));
cl::opt<spark::DType> dtype(
    "dtype", cl::desc("Stored dtype of every tensor"),
    cl::values(clEnumValN(spark::DType::F32, "f32", "float32"),
               clEnumValN(spark::DType::F16, "f16", "float16"),
               clEnumValN(spark::DType::BF16, "bf16", "bfloat16 (default)")),
    cl::init(spark::DType::BF16), cl::cat(category));
cl::opt<uint64_t> seed("seed", cl::desc("Random seed"), cl::init(0),
                       cl::cat(category));
cl::opt<int> shards("shards",
                    cl::desc("Number of safetensors shards (1: single file)"),
                    cl::init(1), cl::cat(category));
cl::opt<bool> splitQKV("split-qkv",
                       cl::desc("Write q_proj/k_proj/v_proj, not q_k_v_proj"),
                       cl::cat(category));
cl::opt<bool> fusedGateUp("fused-gate-up",
                          cl::desc("Write mlp.gate_up_proj, not gate/up"),
                          cl::cat(category));
cl::opt<bool> untied("untied",
                     cl::desc("Untie the head: write lm_head.weight and use it"),
                     cl::cat(category));
cl::opt<bool> writeTiedHead(
    "write-tied-head",
    cl::desc("Write lm_head.weight although the head is tied (ignored)"),
    cl::cat(category));
cl::opt<bool> noGate("no-gate", cl::desc("Turn the head-wise gate off"),
                     cl::cat(category));

// Shape overrides on top of the preset (0 / empty: keep the preset's).
cl::opt<int64_t> hidden("hidden-size", cl::init(0), cl::cat(category),
                        cl::desc("hidden_size"));
cl::opt<int64_t> intermediate("intermediate-size", cl::init(0),
                              cl::cat(category), cl::desc("intermediate_size"));
cl::opt<int64_t> layers("layers", cl::init(0), cl::cat(category),
                        cl::desc("num_hidden_layers"));
cl::opt<int64_t> heads("heads", cl::init(0), cl::cat(category),
                       cl::desc("num_attention_heads"));
cl::opt<int64_t> kvHeads("kv-heads", cl::init(0), cl::cat(category),
                         cl::desc("num_key_value_heads"));
cl::opt<int64_t> headDim("head-dim", cl::init(0), cl::cat(category),
                         cl::desc("head_dim"));
cl::opt<int64_t> window("window", cl::init(0), cl::cat(category),
                        cl::desc("sliding_window"));
cl::opt<int64_t> vocab("vocab", cl::init(0), cl::cat(category),
                       cl::desc("vocab_size"));
cl::opt<std::string>
    layerPattern("layer-types", cl::cat(category),
                 cl::desc("One letter per layer: s = sliding, f = full "
                          "(default: every fourth layer full)"));
cl::opt<double> fullRotary("full-rotary-factor", cl::init(0.0),
                           cl::cat(category),
                           cl::desc("partial_rotary_factor of full layers"));
cl::opt<double> slidingRotary("sliding-rotary-factor", cl::init(0.0),
                              cl::cat(category),
                              cl::desc("partial_rotary_factor of sliding "
                                       "layers"));

int fail(const Twine &message) {
  WithColor::error(errs(), "spark-mkmodel") << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv, "spark-mkmodel: deterministic random-weight Spark-X2.5 "
                  "checkpoints\n");
  Expected<spark::ModelConfig> base = spark::presetConfig(preset);
  if (!base)
    return fail("--preset: " + toString(base.takeError()));
  spark::GeneratorOptions options;
  options.config = *base;
  spark::ModelConfig &c = options.config;
  for (auto [value, field] : {std::pair{&hidden, &c.hiddenSize},
                              {&intermediate, &c.intermediateSize},
                              {&heads, &c.numHeads},
                              {&kvHeads, &c.numKVHeads},
                              {&headDim, &c.headDim},
                              {&window, &c.slidingWindow},
                              {&vocab, &c.vocabSize}})
    if (*value != 0)
      *field = *value;
  if (layers != 0) {
    c.numLayers = layers;
    c.layerTypes = spark::defaultLayerTypes(layers);
  }
  if (!layerPattern.empty()) {
    c.layerTypes.clear();
    for (char ch : layerPattern) {
      if (ch != 's' && ch != 'f')
        return fail("--layer-types: '" + Twine(ch) +
                    "' is not s (sliding) or f (full)");
      c.layerTypes.push_back(ch == 's' ? spark::LayerType::Sliding
                                       : spark::LayerType::Full);
    }
    if (layers == 0)
      c.numLayers = c.layerTypes.size();
  }
  if (fullRotary != 0.0)
    c.fullRope.partialRotaryFactor = fullRotary;
  if (slidingRotary != 0.0)
    c.slidingRope.partialRotaryFactor = slidingRotary;
  c.tieWordEmbeddings = !untied;
  c.headwiseGate = !noGate;

  options.dtype = dtype;
  options.seed = seed;
  options.shards = shards;
  options.splitQKV = splitQKV;
  options.fusedGateUp = fusedGateUp;
  options.writeTiedHead = writeTiedHead;
  options.verbose = true;
  if (Error e = spark::writeCheckpoint(options, outputDir))
    return fail(toString(std::move(e)));
  return 0;
}
