//===- CheckpointTest.cpp - the checkpoint reader on good and bad files ---===//
//
// Every case starts from a real checkpoint written by the generator, then
// damages or rearranges real files on disk and opens them with the reader.
//
//===----------------------------------------------------------------------===//
#include "ModelGenerator.h"
#include "spark/Import/Checkpoint.h"
#include "spark/Import/FloatFormats.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <map>

using namespace llvm;
using namespace spark;

namespace {

/// One tensor as bytes, for rewriting files.
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
using RawTensors = std::map<std::string, RawTensor>;

class CheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(sys::fs::createUniqueDirectory("spark-ckpt-test", root));
  }
  void TearDown() override { sys::fs::remove_directories(root); }

  std::string path(StringRef dir, StringRef file = "") {
    SmallString<256> p(root);
    sys::path::append(p, dir);
    if (!file.empty())
      sys::path::append(p, file);
    return std::string(p);
  }

  /// Writes a generated tiny checkpoint into root/name.
  std::string generate(StringRef name,
                       function_ref<void(GeneratorOptions &)> adjust = {}) {
    GeneratorOptions options;
    options.config = cantFail(presetConfig("tiny"));
    options.dtype = DType::F32;
    options.seed = 11;
    if (adjust)
      adjust(options);
    std::string dir = path(name);
    Error e = writeCheckpoint(options, dir);
    EXPECT_FALSE(bool(e)) << toString(std::move(e));
    return dir;
  }

  /// The error message of opening `dir`, or "" when it opens.
  std::string openError(StringRef dir) {
    Expected<std::unique_ptr<Checkpoint>> ckpt = Checkpoint::open(dir);
    if (ckpt)
      return "";
    return toString(ckpt.takeError());
  }

  std::unique_ptr<Checkpoint> openOk(StringRef dir) {
    Expected<std::unique_ptr<Checkpoint>> ckpt = Checkpoint::open(dir);
    if (!ckpt) {
      ADD_FAILURE() << toString(ckpt.takeError());
      return nullptr;
    }
    return std::move(*ckpt);
  }

  static std::string readFile(StringRef file) {
    auto buffer = MemoryBuffer::getFile(file);
    EXPECT_TRUE(bool(buffer)) << file.str();
    return buffer ? (*buffer)->getBuffer().str() : "";
  }

  static void writeFile(StringRef file, StringRef contents) {
    std::error_code ec;
    raw_fd_ostream os(file, ec);
    ASSERT_FALSE(ec) << ec.message();
    os << contents;
  }

  /// Reads every tensor of a safetensors file as raw bytes.
  static RawTensors readTensors(StringRef file) {
    RawTensors tensors;
    auto st = SafetensorsFile::open(file);
    EXPECT_TRUE(bool(st));
    if (!st) {
      consumeError(st.takeError());
      return tensors;
    }
    for (const TensorView &t : (*st)->tensors())
      tensors[t.name] = {dtypeName(t.dtype).str(), t.shape,
                         std::string(reinterpret_cast<const char *>(t.data),
                                     t.bytes)};
    return tensors;
  }

  /// Writes tensors with contiguous offsets (the well-formed layout).
  static void writeTensors(StringRef file, const RawTensors &tensors) {
    json::Object header;
    std::string data;
    for (const auto &[name, t] : tensors) {
      json::Array shape;
      for (int64_t d : t.shape)
        shape.push_back(d);
      header[name] = json::Object{
          {"dtype", t.dtype},
          {"shape", std::move(shape)},
          {"data_offsets", json::Array{data.size(), data.size() + t.bytes.size()}}};
      data += t.bytes;
    }
    writeRaw(file, formatv("{0}", json::Value(std::move(header))).str(), data);
  }

  /// Writes an 8-byte length, `header` verbatim and `data`.
  static void writeRaw(StringRef file, StringRef header, StringRef data) {
    std::string bytes(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i)
      bytes[i] = char((n >> (8 * i)) & 0xff);
    writeFile(file, bytes + header.str() + data.str());
  }

  /// Rewrites the single-file checkpoint in `dir` through `edit`.
  void editTensors(StringRef dir, function_ref<void(RawTensors &)> edit) {
    std::string file = path(sys::path::filename(dir), "model.safetensors");
    RawTensors tensors = readTensors(file);
    edit(tensors);
    writeTensors(file, tensors);
  }

  /// Rewrites config.json through `edit`.
  void editConfig(StringRef dir, function_ref<void(json::Object &)> edit) {
    std::string file = path(sys::path::filename(dir), "config.json");
    json::Value config = cantFail(json::parse(readFile(file)));
    edit(*config.getAsObject());
    writeFile(file, formatv("{0:2}", config).str());
  }

  SmallString<128> root;
};

constexpr const char *kQKV = "model.layers.1.self_attn.q_k_v_proj.weight";

//===----------------------------------------------------------------------===//
// Malformed files
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, RejectsTruncatedFile) {
  std::string dir = generate("ckpt");
  std::string file = path("ckpt", "model.safetensors");
  std::string bytes = readFile(file);
  writeFile(file, bytes.substr(0, bytes.size() - 100));
  std::string error = openError(dir);
  EXPECT_NE(error.find("model.safetensors"), std::string::npos) << error;
  EXPECT_NE(error.find("run past the data section"), std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsFileShorterThanHeaderLength) {
  std::string dir = generate("ckpt");
  writeFile(path("ckpt", "model.safetensors"), "abc");
  EXPECT_NE(openError(dir).find("too short for the 8-byte header length"),
            std::string::npos);
}

TEST_F(CheckpointTest, RejectsHeaderLengthPastEnd) {
  std::string dir = generate("ckpt");
  std::string file = path("ckpt", "model.safetensors");
  std::string bytes = readFile(file);
  uint64_t huge = bytes.size(); // header cannot be as long as the whole file
  for (int i = 0; i < 8; ++i)
    bytes[i] = char((huge >> (8 * i)) & 0xff);
  writeFile(file, bytes);
  std::string error = openError(dir);
  EXPECT_NE(error.find("header length " + std::to_string(huge) +
                       " runs past the end of the file"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsHeaderThatIsNotJSON) {
  std::string dir = generate("ckpt");
  writeRaw(path("ckpt", "model.safetensors"), "{\"a\": [1, 2", "");
  std::string error = openError(dir);
  EXPECT_NE(error.find("model.safetensors: header is not valid JSON"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsOverlappingOffsets) {
  std::string dir = generate("ckpt");
  writeRaw(path("ckpt", "model.safetensors"),
           R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
           R"( "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
           std::string(24, '\0'));
  std::string error = openError(dir);
  EXPECT_NE(error.find("tensors 'a' and 'b' overlap"), std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsOutOfRangeOffsets) {
  std::string dir = generate("ckpt");
  writeRaw(path("ckpt", "model.safetensors"),
           R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}})",
           std::string(20, '\0'));
  std::string error = openError(dir);
  EXPECT_NE(error.find("tensor 'a' data_offsets [16, 32] run past the data "
                       "section (20 bytes)"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsShapeBytesMismatch) {
  std::string dir = generate("ckpt");
  writeRaw(path("ckpt", "model.safetensors"),
           R"({"a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 24]}})",
           std::string(24, '\0'));
  std::string error = openError(dir);
  EXPECT_NE(error.find("tensor 'a' has shape x dtype size = 12 bytes but "
                       "data_offsets [0, 24] span 24 bytes"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsUnknownDtype) {
  std::string dir = generate("ckpt");
  editTensors(dir, [](RawTensors &t) { t["model.norm.weight"].dtype = "I32"; });
  std::string error = openError(dir);
  EXPECT_NE(error.find("tensor 'model.norm.weight' has dtype 'I32'; expected "
                       "F32, F16, BF16 or U8"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsMissingTensor) {
  std::string dir = generate("ckpt");
  editTensors(dir, [](RawTensors &t) { t.erase(kQKV); });
  std::string error = openError(dir);
  EXPECT_NE(error.find(std::string("tensor '") + kQKV +
                       "' is missing (expected shape [64, 16])"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsMisShapedTensor) {
  std::string dir = generate("ckpt");
  editTensors(dir, [](RawTensors &t) {
    RawTensor &norm = t["model.layers.2.post_attention_layernorm.weight"];
    norm.shape = {2, 8};
  });
  std::string error = openError(dir);
  EXPECT_NE(error.find("model.safetensors: tensor "
                       "'model.layers.2.post_attention_layernorm.weight' has "
                       "shape [2, 8]; expected [16] from config.json"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsMissingShard) {
  std::string dir = generate("ckpt", [](GeneratorOptions &o) { o.shards = 3; });
  ASSERT_FALSE(sys::fs::remove(path("ckpt", "model-00002-of-00003.safetensors")));
  std::string error = openError(dir);
  EXPECT_NE(error.find("model.safetensors.index.json: shard "
                       "'model-00002-of-00003.safetensors' listed in "
                       "weight_map does not exist"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsTensorDuplicatedAcrossShards) {
  std::string dir = generate("ckpt", [](GeneratorOptions &o) { o.shards = 2; });
  std::string first = path("ckpt", "model-00001-of-00002.safetensors");
  std::string second = path("ckpt", "model-00002-of-00002.safetensors");
  RawTensors a = readTensors(first), b = readTensors(second);
  b.insert(*a.begin()); // the same tensor now lives in both shards
  writeTensors(second, b);
  std::string error = openError(dir);
  EXPECT_NE(error.find("model-00002-of-00002.safetensors: tensor '" +
                       a.begin()->first +
                       "' is not assigned to this shard by "
                       "model.safetensors.index.json"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsTensorDuplicatedInOneHeader) {
  std::string dir = generate("ckpt");
  writeRaw(path("ckpt", "model.safetensors"),
           R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
           R"( "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
           std::string(8, '\0'));
  std::string error = openError(dir);
  EXPECT_NE(error.find("model.safetensors: tensor 'a' is duplicated in the header"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsDuplicateSpelledWithAnEscape) {
  // "a\u0062" is "ab": one tensor named twice, whatever the spelling.
  std::string dir = generate("ckpt");
  writeRaw(path("ckpt", "model.safetensors"),
           R"({"ab": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
           R"( "a\u0062": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
           std::string(8, '\0'));
  std::string error = openError(dir);
  EXPECT_NE(error.find("model.safetensors: tensor 'ab' is duplicated in the header"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsTensorListedInIndexButMissingFromShard) {
  std::string dir = generate("ckpt", [](GeneratorOptions &o) { o.shards = 2; });
  std::string second = path("ckpt", "model-00002-of-00002.safetensors");
  RawTensors b = readTensors(second);
  std::string dropped = b.begin()->first;
  b.erase(b.begin());
  writeTensors(second, b);
  std::string error = openError(dir);
  EXPECT_NE(error.find("tensor '" + dropped + "' is listed in "
                       "model.safetensors.index.json for this shard but "
                       "missing from it"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsWrongModelType) {
  std::string dir = generate("ckpt");
  editConfig(dir, [](json::Object &c) { c["model_type"] = "llama"; });
  std::string error = openError(dir);
  EXPECT_NE(error.find("config.json: field 'model_type' is \"llama\"; "
                       "expected \"spark2_5\""),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsBadHeadRatio) {
  std::string dir = generate("ckpt");
  editConfig(dir, [](json::Object &c) { c["num_key_value_heads"] = 3; });
  std::string error = openError(dir);
  EXPECT_NE(error.find("field 'num_key_value_heads' is 3, which does not "
                       "divide num_attention_heads (4)"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsBadConfigJSON) {
  std::string dir = generate("ckpt");
  writeFile(path("ckpt", "config.json"), "{\"model_type\": \"spark2_5\",");
  std::string error = openError(dir);
  EXPECT_NE(error.find("config.json: not valid JSON"), std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsMissingConfigField) {
  std::string dir = generate("ckpt");
  editConfig(dir, [](json::Object &c) { c.erase("hidden_size"); });
  std::string error = openError(dir);
  EXPECT_NE(error.find("field 'hidden_size' is missing; expected a positive "
                       "integer"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsUnknownLayerType) {
  std::string dir = generate("ckpt");
  editConfig(dir, [](json::Object &c) {
    (*c.getArray("layer_types"))[2] = "linear_attention";
  });
  std::string error = openError(dir);
  EXPECT_NE(error.find("field 'layer_types[2]' is not a known layer type"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsNaNWeight) {
  std::string dir = generate("ckpt");
  editTensors(dir, [](RawTensors &t) {
    float nan = std::nanf("");
    std::memcpy(&t[kQKV].bytes[4 * (16 * 3 + 5)], &nan, 4);
  });
  std::string error = openError(dir);
  EXPECT_NE(error.find(std::string("tensor '") + kQKV +
                       "' has a non-finite value (NaN) at [3, 5]"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsInfinityInBF16) {
  std::string dir = generate("ckpt", [](GeneratorOptions &o) {
    o.dtype = DType::BF16;
  });
  editTensors(dir, [](RawTensors &t) {
    uint16_t inf = floatToBF16(INFINITY);
    std::memcpy(&t["model.norm.weight"].bytes[2 * 7], &inf, 2);
  });
  std::string error = openError(dir);
  EXPECT_NE(error.find("tensor 'model.norm.weight' has a non-finite value "
                       "(+Inf) at [7]"),
            std::string::npos)
      << error;
}

TEST_F(CheckpointTest, RejectsBothFusedAndSplitProjections) {
  std::string dir = generate("ckpt");
  editTensors(dir, [](RawTensors &t) {
    RawTensor q = t[kQKV];
    q.shape = {32, 16};
    q.bytes.resize(32 * 16 * 4);
    t["model.layers.1.self_attn.q_proj.weight"] = q;
  });
  std::string error = openError(dir);
  EXPECT_NE(error.find("layer 1 has both"), std::string::npos) << error;
}

TEST_F(CheckpointTest, RejectsUnexpectedTensor) {
  std::string dir = generate("ckpt");
  editConfig(dir, [](json::Object &c) { c["headwise_attn_output_gate"] = false; });
  std::string error = openError(dir);
  EXPECT_NE(error.find("unexpected tensor 'model.layers.0.self_attn.g_proj."
                       "weight' (headwise_attn_output_gate is false)"),
            std::string::npos)
      << error;
}

//===----------------------------------------------------------------------===//
// 4-bit grids brought beside a matrix (NAME.int4_codes, .int4_scales,
// .int4_zeros)
//===----------------------------------------------------------------------===//

constexpr const char *kDown = "model.layers.1.mlp.down_proj.weight"; // [16, 32]

/// A tensor of zero bytes.
RawTensor zeroTensor(std::string dtype, std::vector<int64_t> shape) {
  int64_t n = dtype == "U8" ? 1 : dtype == "F32" ? 4 : 2;
  for (int64_t d : shape)
    n *= d;
  return {std::move(dtype), std::move(shape), std::string(size_t(n), '\0')};
}

TEST_F(CheckpointTest, OpensInt4Grids) {
  std::string dir = generate("ckpt");
  const std::string up = "model.layers.0.mlp.down_proj.weight";
  editTensors(dir, [&](RawTensors &t) {
    t[std::string(kDown) + ".int4_codes"] = zeroTensor("U8", {16, 32});
    t[std::string(kDown) + ".int4_scales"] = zeroTensor("F16", {16, 1});
    t[std::string(kDown) + ".int4_zeros"] = zeroTensor("F16", {16, 1});
    t[up + ".int4_codes"] = zeroTensor("U8", {16, 32});
    t[up + ".int4_scales"] = zeroTensor("F16", {16, 1});
  });
  std::unique_ptr<Checkpoint> ckpt = openOk(dir);
  ASSERT_TRUE(ckpt);
  const Int4Grid *grid = ckpt->int4Grid(kDown);
  ASSERT_NE(grid, nullptr);
  EXPECT_EQ(grid->group, 32);
  EXPECT_EQ(grid->codes->name, std::string(kDown) + ".int4_codes");
  EXPECT_NE(grid->zeros, nullptr);
  const Int4Grid *symmetric = ckpt->int4Grid(up);
  ASSERT_NE(symmetric, nullptr);
  EXPECT_EQ(symmetric->zeros, nullptr); // every zero point 8
  EXPECT_EQ(ckpt->int4Grid(kQKV), nullptr);
}

// A 6-bit grid: the same tensors named int6_*.
TEST_F(CheckpointTest, OpensInt6Grids) {
  std::string dir = generate("ckpt");
  editTensors(dir, [&](RawTensors &t) {
    t[std::string(kDown) + ".int6_codes"] = zeroTensor("U8", {16, 32});
    t[std::string(kDown) + ".int6_scales"] = zeroTensor("F16", {16, 1});
    t[std::string(kDown) + ".int6_zeros"] = zeroTensor("F16", {16, 1});
  });
  std::unique_ptr<Checkpoint> ckpt = openOk(dir);
  ASSERT_TRUE(ckpt);
  const Int4Grid *grid = ckpt->int4Grid(kDown);
  ASSERT_NE(grid, nullptr);
  EXPECT_EQ(grid->bits, 6);
  EXPECT_EQ(grid->group, 32);
  EXPECT_EQ(grid->codes->name, std::string(kDown) + ".int6_codes");
  EXPECT_NE(grid->zeros, nullptr);
}

TEST_F(CheckpointTest, RejectsInt4GridsThatDoNotFit) {
  const std::string codes = std::string(kDown) + ".int4_codes",
                    scales = std::string(kDown) + ".int4_scales",
                    zeros = std::string(kDown) + ".int4_zeros";
  struct Case {
    std::function<void(RawTensors &)> edit;
    std::string message;
  } cases[] = {
      {[&](RawTensors &t) {
         t[codes] = zeroTensor("U8", {16, 32});
       },
       "tensor '" + codes + "' is part of a 4-bit grid for '" + kDown +
           "', which needs " + kDown + ".int4_codes and " + kDown +
           ".int4_scales"},
      {[&](RawTensors &t) {
         t[codes] = zeroTensor("F16", {16, 32});
         t[scales] = zeroTensor("F16", {16, 1});
       },
       "tensor '" + codes +
           "' is F16 [16, 32]; expected U8 [16, 32], one "
           "4-bit code a byte"},
      {[&](RawTensors &t) {
         t[codes] = zeroTensor("U8", {16, 32});
         t[scales] = zeroTensor("F16", {16, 2});
       },
       "tensor '" + scales +
           "' is F16 [16, 2]; expected F16 [16, 32 / "
           "group], groups of 32, 64, 128 or 256 along the "
           "input of " +
           kDown},
      {[&](RawTensors &t) {
         t[codes] = zeroTensor("U8", {16, 32});
         t[scales] = zeroTensor("F32", {16, 1});
       },
       "tensor '" + scales + "' is F32 [16, 1]; expected F16"},
      {[&](RawTensors &t) {
         t[codes] = zeroTensor("U8", {16, 32});
         t[scales] = zeroTensor("F16", {16, 1});
         t[zeros] = zeroTensor("F16", {8, 1});
       },
       "tensor '" + zeros + "' is F16 [8, 1]; expected F16 [16, 32 / group]"},
      {[&](RawTensors &t) {
         t[std::string(kDown) + ".int6_codes"] = zeroTensor("U8", {16, 32});
       },
       "tensor '" + std::string(kDown) +
           ".int6_codes' is part of a 6-bit grid "
           "for '" +
           kDown + "', which needs " + kDown + ".int6_codes and " + kDown +
           ".int6_scales"},
      {[&](RawTensors &t) {
         t[codes] = zeroTensor("U8", {16, 32});
         t[scales] = zeroTensor("F16", {16, 1});
         t[std::string(kDown) + ".int6_scales"] = zeroTensor("F16", {16, 1});
       },
       "tensor '" + std::string(kDown) +
           ".int6_scales' is part of a 6-bit "
           "grid for '" +
           kDown + "', which also has a 4-bit one; give one grid"},
      // a grid for what is not a matrix is a tensor of no model
      {[&](RawTensors &t) {
         t["model.norm.weight.int4_codes"] = zeroTensor("U8", {16});
       },
       "unexpected tensor 'model.norm.weight.int4_codes'"},
      // the matrices themselves hold real numbers
      {[&](RawTensors &t) {
         t[kDown] = zeroTensor("U8", {16, 32});
       },
       std::string("tensor '") + kDown +
           "' has dtype U8; expected F32, F16 or BF16"},
  };
  int index = 0;
  for (const Case &c : cases) {
    std::string dir = generate("ckpt" + std::to_string(index++));
    editTensors(dir, c.edit);
    std::string error = openError(dir);
    EXPECT_NE(error.find(c.message), std::string::npos)
        << "case " << index - 1 << ": " << error;
  }
}

TEST_F(CheckpointTest, RejectsMissingDirectoryAndFiles) {
  EXPECT_NE(openError(path("nowhere")).find("not a checkpoint directory"),
            std::string::npos);
  std::string dir = generate("ckpt");
  ASSERT_FALSE(sys::fs::remove(path("ckpt", "model.safetensors")));
  EXPECT_NE(openError(dir).find("neither model.safetensors nor "
                                "model.safetensors.index.json exists"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Accepted layouts
//===----------------------------------------------------------------------===//

/// Element [row, col] of a 2-D tensor.
float at(const TensorView &t, int64_t row, int64_t col) {
  return t.element(row * t.shape[1] + col);
}

TEST_F(CheckpointTest, OpensSingleFileInEveryDtype) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    std::string name = ("ckpt-" + dtypeName(dtype)).str();
    std::string dir = generate(name, [&](GeneratorOptions &o) { o.dtype = dtype; });
    auto ckpt = openOk(dir);
    ASSERT_TRUE(ckpt);
    EXPECT_EQ(ckpt->embedding().dtype, dtype);
    EXPECT_EQ(ckpt->layers().size(), 4u);
    EXPECT_TRUE(ckpt->layers()[0].qkv);
    EXPECT_TRUE(ckpt->layers()[0].gate && ckpt->layers()[0].up);
    EXPECT_EQ(&ckpt->outputHead(), &ckpt->embedding()); // tied
  }
}

TEST_F(CheckpointTest, DtypesHoldTheSameValuesWithinTheirPrecision) {
  std::string f32 = generate("f32");
  std::string bf16 = generate("bf16", [](GeneratorOptions &o) {
    o.dtype = DType::BF16;
  });
  auto a = openOk(f32), b = openOk(bf16);
  ASSERT_TRUE(a && b);
  const TensorView &x = a->embedding(), &y = b->embedding();
  for (int64_t i = 0; i < x.numElements(); ++i)
    ASSERT_NEAR(x.element(i), y.element(i), std::fabs(x.element(i)) / 128.0);
}

TEST_F(CheckpointTest, OpensShardedCheckpoint) {
  std::string single = generate("single");
  std::string sharded = generate("sharded", [](GeneratorOptions &o) {
    o.shards = 3;
  });
  auto a = openOk(single), b = openOk(sharded);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->layers()[3].down->path, b->layers()[3].down->path);
  EXPECT_EQ(b->relativeFile(*b->layers()[3].down),
            "model-00003-of-00003.safetensors");
  const TensorView &x = *a->layers()[3].down, &y = *b->layers()[3].down;
  ASSERT_EQ(x.bytes, y.bytes);
  EXPECT_EQ(std::memcmp(x.data, y.data, x.bytes), 0);
}

TEST_F(CheckpointTest, OpensSplitQKVAndFusedGateUp) {
  std::string dir = generate("ckpt", [](GeneratorOptions &o) {
    o.splitQKV = true;
    o.fusedGateUp = true;
  });
  auto ckpt = openOk(dir);
  ASSERT_TRUE(ckpt);
  const LayerTensors &layer = ckpt->layers()[2];
  EXPECT_FALSE(layer.qkv);
  ASSERT_TRUE(layer.q && layer.k && layer.v);
  EXPECT_EQ(layer.k->shape, (std::vector<int64_t>{16, 16}));
  ASSERT_TRUE(layer.gateUp);
  EXPECT_EQ(layer.gateUp->shape, (std::vector<int64_t>{64, 16}));
  EXPECT_FALSE(layer.gate || layer.up);
}

TEST_F(CheckpointTest, IgnoresLmHeadWhenTied) {
  std::string dir = generate("ckpt", [](GeneratorOptions &o) {
    o.writeTiedHead = true;
  });
  auto ckpt = openOk(dir);
  ASSERT_TRUE(ckpt);
  EXPECT_EQ(ckpt->outputHead().name, "model.embedding.weight");
}

TEST_F(CheckpointTest, UsesLmHeadWhenUntied) {
  std::string dir = generate("ckpt", [](GeneratorOptions &o) {
    o.config.tieWordEmbeddings = false;
  });
  auto ckpt = openOk(dir);
  ASSERT_TRUE(ckpt);
  EXPECT_EQ(ckpt->outputHead().name, "lm_head.weight");
  EXPECT_NE(at(ckpt->outputHead(), 3, 4), at(ckpt->embedding(), 3, 4));
}

TEST_F(CheckpointTest, OpensWithoutHeadGate) {
  std::string dir = generate("ckpt", [](GeneratorOptions &o) {
    o.config.headwiseGate = false;
  });
  auto ckpt = openOk(dir);
  ASSERT_TRUE(ckpt);
  EXPECT_FALSE(ckpt->layers()[0].attnGate);
}

TEST_F(CheckpointTest, RequiresLmHeadWhenUntied) {
  std::string dir = generate("ckpt");
  editConfig(dir, [](json::Object &c) { c["tie_word_embeddings"] = false; });
  EXPECT_NE(openError(dir).find("tensor 'lm_head.weight' is missing"),
            std::string::npos);
}

TEST_F(CheckpointTest, AcceptsOlderConfigStyle) {
  std::string dir = generate("ckpt");
  editConfig(dir, [](json::Object &c) {
    c.erase("rope_parameters");
    c.erase("layer_types");
    c.erase("head_dim"); // hidden 16 / 4 heads = 4: shapes no longer match
    c["rope_theta"] = 10000.0;
  });
  // head_dim defaults to hidden_size / heads = 4, which the tensors (built
  // with head_dim 8) contradict: the reader must say so, naming the tensor.
  EXPECT_NE(openError(dir).find("q_k_v_proj.weight' has shape [64, 16]; "
                                "expected [32, 16]"),
            std::string::npos);
  editConfig(dir, [](json::Object &c) { c["head_dim"] = 8; });
  auto ckpt = openOk(dir);
  ASSERT_TRUE(ckpt);
  const ModelConfig &config = ckpt->config();
  EXPECT_EQ(config.layerTypes, defaultLayerTypes(4));
  EXPECT_EQ(config.fullRope.theta, 10000.0);
  EXPECT_EQ(config.rotaryDim(LayerType::Full), 8);
}

} // namespace
