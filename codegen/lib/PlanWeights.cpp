//===- PlanWeights.cpp - the data of a plan's pack tensors ----------------===//
//
// loadWeights(): every pack tensor of a plan (ModelPlan.cpp) gets its data
// from the checkpoint, converted or quantized the way the plan stores it, or
// the bytes a build of the same options stored (--weights-from).
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/ModelPlan.h"
#include "spark/Codegen/PackReader.h"
#include "spark/Codegen/Quantize.h"

#include "spark/Import/FloatFormats.h"
#include "spark/model_abi.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

namespace spark {

void PackTensor::releaseValues(int64_t first, int64_t count) const {
  if (source) {
    // Never past the tensor: the pages after it may be another mapping's.
    const int64_t end = std::min(first + count, source->numElements());
    first = std::max<int64_t>(first, 0);
    if (end > first)
      releaseResidentPages(*source, first, end - first);
  }
  int64_t partStart = 0;
  for (const TensorView *part : parts) {
    int64_t from = std::max(first, partStart),
            to = std::min(first + count, partStart + part->numElements());
    if (to > from)
      releaseResidentPages(*part, from - partStart, to - from);
    partStart += part->numElements();
  }
}

void PackTensor::releaseElements(int64_t first, int64_t count) const {
  // Grouped rows and 6-bit codes: the values of the rows [first, first +
  // count) ends.
  const int64_t stride = rowBytes > 0 ? rowBytes : codeBits == 6 ? shape[1] : 0;
  if (stride > 0)
    return releaseValues(first / stride * codeCols,
                         ((first + count) / stride - first / stride) *
                             codeCols);
  const int64_t values = group > 0 ? 2 : 1; // two 4-bit codes a byte
  releaseValues(first * values, count * values);
}

void PackTensor::readValues(int64_t first, int64_t count, float *out) const {
  if (source)
    return source->elements(first, count, out);
  int64_t partStart = 0;
  for (const TensorView *part : parts) {
    int64_t from = std::max(first, partStart),
            to = std::min(first + count, partStart + part->numElements());
    if (to > from)
      part->elements(from - partStart, to - from, out + (from - first));
    partStart += part->numElements();
  }
  if (parts.empty())
    std::copy(values.begin() + first, values.begin() + first + count, out);
}

void PackTensor::readElements(int64_t first, int64_t count, float *out) const {
  if (group == 0) {
    readValues(first, count, out);
    if (!rowScales.empty()) // codes: each value over its row's scale
      for (int64_t i = 0; i < count; ++i)
        out[i] /= rowScales[(first + i) / shape.back()];
    return;
  }
  if (codeBits == 6)
    return readSixBitBytes(first, count, out);
  if (rowBytes == 0)
    return readCodeBytes(first, count, out);
  // Grouped rows: each row's code bytes, then the bytes of its f16 scales
  // and zero points (little endian), then zeros up to rowBytes.
  const int64_t codeBytes = codeCols / 2, groups = codeCols / group;
  for (int64_t at = first, end = first + count; at < end;) {
    const int64_t row = at / rowBytes, column = at % rowBytes;
    if (column < codeBytes) {
      const int64_t n = std::min(end - at, codeBytes - column);
      readCodeBytes(row * codeBytes + column, n, out + (at - first));
      at += n;
      continue;
    }
    const int64_t side = column - codeBytes;
    uint16_t half = 0;
    if (side < 2 * groups)
      half = floatToHalf(groupScales[row * groups + side / 2]);
    else if (!symmetricGroups && side < 4 * groups)
      half = floatToHalf(groupZeros[row * groups + (side - 2 * groups) / 2]);
    out[at - first] = float(side % 2 == 0 ? half & 0xff : half >> 8);
    ++at;
  }
}

void PackTensor::valueCodes(int64_t first, int64_t count, float *out) const {
  if (!this->codes.empty()) { // chosen by GPTQ or brought by the checkpoint
    for (int64_t i = 0; i < count; ++i)
      out[i] = float(this->codes[size_t(first + i)]);
    return;
  }
  // The values, then each group's 1 / scale once, as quantizeInt4 computes it.
  readValues(first, count, out);
  const int64_t groups = codeCols / group;
  const float top = topCode();
  int64_t groupIndex = -1;
  float inverse = 0.0f, zero = 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t at = first + i;
    const int64_t g = (at / codeCols) * groups + (at % codeCols) / group;
    if (g != groupIndex) {
      groupIndex = g;
      inverse = 1.0f / groupScales[g];
      zero = groupZeros[g];
    }
    out[i] = int4Code(out[i], inverse, zero, top);
  }
}

void PackTensor::readSixBitBytes(int64_t first, int64_t count,
                                 float *out) const {
  const int64_t stride = shape[1];
  std::vector<float> codes(static_cast<size_t>(codeCols));
  std::vector<uint8_t> bytes(static_cast<size_t>(stride));
  int64_t loaded = -1;
  for (int64_t at = first; at < first + count; ++at) {
    const int64_t r = at / stride;
    if (r != loaded) { // the row's bytes: nibbles, then tops where they lie
      valueCodes(r * codeCols, codeCols, codes.data());
      std::fill(bytes.begin(), bytes.end(), 0);
      for (int64_t k = 0; k < codeCols; ++k) {
        const int code = int(codes[size_t(k)]);
        int64_t byte = 0;
        int shift = 0;
        spark_six_bit_top(codeCols, k, &byte, &shift);
        bytes[size_t(k / 2)] |= uint8_t((code & 15) << (4 * (k % 2)));
        bytes[size_t(byte)] |= uint8_t((code >> 4) << shift);
      }
      loaded = r;
    }
    out[at - first] = float(bytes[size_t(at % stride)]);
  }
}

void PackTensor::readCodeBytes(int64_t first, int64_t count, float *out) const {
  // Bytes of two 4-bit codes.
  std::vector<float> codes(2 * count);
  valueCodes(2 * first, 2 * count, codes.data());
  for (int64_t i = 0; i < count; ++i)
    out[i] = codes[2 * i] + 16.0f * codes[2 * i + 1];
}

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s",
                                 message.str().c_str());
}

/// A float for a message, in as many digits as it needs.
std::string number(float v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.7g", double(v));
  return text;
}

class WeightLoader {
public:
  WeightLoader(ModelPlan &plan, const Checkpoint &ckpt)
      : plan(plan), ckpt(ckpt), options(plan.options) {}

  llvm::Error run();

private:
  llvm::Error sources(PackTensor &tensor);
  /// With BuildOptions::weightsFrom: points `tensor` and its scales and zero
  /// points at the bytes that pack stores for them, if it holds them all
  /// with the plan's dtypes, layouts and shapes; false, and nothing changed,
  /// if not.
  bool reuse(PackTensor &tensor);
  /// A 4- or 6-bit tensor's grids: the checkpoint's, GPTQ's or searched.
  llvm::Error grouped(PackTensor &tensor);
  /// The checkpoint's own 4-bit grid for `tensor` (Checkpoint::int4Grid of
  /// each of its sources), checked against its values; false if it brings
  /// none.
  llvm::Expected<bool> importGrid(PackTensor &tensor);
  /// A 4-bit tensor's scales and zero points into their own pack tensors,
  /// where it has them (dense codes).
  void storeSides(PackTensor &tensor);
  void int8Rows(PackTensor &tensor);

  ModelPlan &plan;
  const Checkpoint &ckpt;
  const BuildOptions &options;
};

llvm::Error WeightLoader::run() {
  if (!options.weightsFrom.empty()) {
    auto reader = PackReader::open(options.weightsFrom);
    if (!reader)
      return reader.takeError();
    if ((*reader)->configHash() != plan.configHash)
      return error(options.weightsFrom + ": built for another model "
                                         "configuration than this "
                                         "checkpoint's");
    plan.weightsFrom = std::move(*reader);
  }
  for (PackTensor &tensor : plan.tensors) {
    if (tensor.role != PackTensor::Role::Data || tensor.sources.empty())
      continue; // computed at planning (RoPE tables, constants), or a side
    if (llvm::Error e = sources(tensor))
      return e;
    if (tensor.group > 0) {
      if (llvm::Error e = grouped(tensor))
        return e;
    } else if (tensor.dtype == DType::I8 && tensor.scales >= 0) {
      int8Rows(tensor);
    }
  }
  return llvm::Error::success();
}

llvm::Error WeightLoader::sources(PackTensor &tensor) {
  int64_t elements = 0;
  for (const std::string &name : tensor.sources) {
    const TensorView *t = ckpt.tensor(name);
    if (!t)
      return error("pack tensor " + tensor.name + ": " + name +
                   " is not a tensor of the checkpoint " + ckpt.directory());
    elements += t->numElements();
    if (tensor.sources.size() == 1)
      tensor.source = t;
    else
      tensor.parts.push_back(t);
  }
  // The values the tensor stores: 4-bit codes are two a byte.
  const int64_t values =
      tensor.group > 0 ? tensor.shape[0] * tensor.codeCols : tensor.elements();
  if (elements != values)
    return error(llvm::formatv("pack tensor {0}: the checkpoint holds {1} "
                               "values for it, the plan {2}",
                               tensor.name, elements, values));
  return llvm::Error::success();
}

bool WeightLoader::reuse(PackTensor &tensor) {
  if (!plan.weightsFrom)
    return false;
  std::vector<PackTensor *> stored = {&tensor};
  for (int side : {tensor.scales, tensor.zeros})
    if (side >= 0)
      stored.push_back(&plan.tensors[side]);
  std::vector<PackReader::Stored> found;
  for (PackTensor *t : stored) {
    std::optional<PackReader::Stored> bytes =
        plan.weightsFrom->find(t->name, t->dtype, t->layout, t->shape);
    if (!bytes)
      return false;
    found.push_back(*bytes);
  }
  for (size_t i = 0; i < stored.size(); ++i) {
    stored[i]->stored = found[i].bytes;
    stored[i]->storedChecksum = found[i].checksum;
  }
  return true;
}

llvm::Expected<bool> WeightLoader::importGrid(PackTensor &tensor) {
  std::vector<const Int4Grid *> grids;
  for (const std::string &name : tensor.sources)
    grids.push_back(ckpt.int4Grid(name));
  if (llvm::all_of(grids, [](const Int4Grid *g) { return !g; }))
    return false;
  const int64_t cols = tensor.codeCols, group = tensor.group,
                groups = cols / group;
  const bool symmetric = tensor.symmetricGroups;
  const std::string &withGrid = tensor.sources[size_t(
      llvm::find_if(grids, [](const Int4Grid *g) { return g != nullptr; }) -
      grids.begin())];
  const int bits = tensor.codeBits;
  const float top = tensor.topCode();
  for (size_t i = 0; i < grids.size(); ++i) {
    const std::string &name = tensor.sources[i];
    if (!grids[i])
      return error(ckpt.directory() + ": " + name + " has no grid (" + name +
                   ".int" + std::to_string(bits) + "_codes, .int" +
                   std::to_string(bits) + "_scales) where " + withGrid +
                   ", stored with it in " + tensor.name +
                   ", has one; give both or neither");
    if (grids[i]->bits != bits || grids[i]->group != group)
      return error(llvm::formatv(
          "{0}: the {1}-bit grid of {2} is in groups of {3} ({4}); this build "
          "rounds it {5}in groups of {6}: build with {7}"
          "--quant-override={2}=int{1}:{3}",
          grids[i]->scales->path, grids[i]->bits, name, grids[i]->group,
          grids[i]->scales->name,
          grids[i]->bits == bits ? "" : "to " + std::to_string(bits) + " bits ",
          group,
          grids[i]->bits == bits && grids[i]->bits == 4
              ? "--group-size=" + std::to_string(grids[i]->group) + " or "
              : std::string()));
  }
  tensor.codes.resize(size_t(tensor.shape[0] * cols));
  tensor.groupScales.resize(size_t(tensor.shape[0] * groups));
  tensor.groupZeros.assign(size_t(tensor.shape[0] * groups), 8.0f);
  // Rows in parallel, blocks of 1024 (their checkpoint pages released after
  // each); the first row at fault is reported, whichever thread saw it.
  std::mutex faultLock;
  int64_t faultRow = tensor.shape[0];
  std::string fault;
  auto report = [&](int64_t at, std::string message) {
    std::lock_guard<std::mutex> lock(faultLock);
    if (at < faultRow) {
      faultRow = at;
      fault = std::move(message);
    }
  };
  int64_t first = 0; // the part's first row in the tensor
  for (size_t i = 0; i < grids.size(); ++i) {
    const Int4Grid &g = *grids[i];
    const std::string &name = tensor.sources[i];
    const int64_t partRows = g.codes->shape[0];
    for (int64_t block = 0; block < partRows; block += 1024) {
      const int64_t end = std::min<int64_t>(partRows, block + 1024);
      llvm::parallelFor(block, end, [&](size_t index) {
        const int64_t r = int64_t(index), at = first + r;
        std::vector<float> row(static_cast<size_t>(cols)),
            codes(static_cast<size_t>(cols)),
            scales(static_cast<size_t>(groups)),
            zeros(static_cast<size_t>(groups), 8.0f);
        tensor.readValues(at * cols, cols, row.data());
        g.codes->elements(r * cols, cols, codes.data());
        g.scales->elements(r * groups, groups, scales.data());
        if (g.zeros)
          g.zeros->elements(r * groups, groups, zeros.data());
        for (int64_t k = 0; k < groups; ++k) {
          if (symmetric && zeros[k] != 8.0f)
            return report(
                at, llvm::formatv(
                        "{0}: {1} holds zero point {2} at [{3}, {4}]; this "
                        "build's 4-bit groups are symmetric (zero point 8, "
                        "w4a8): build with --quant=w4a16, or bring a symmetric "
                        "grid",
                        g.zeros->path, g.zeros->name, number(zeros[k]), r, k));
          tensor.groupScales[at * groups + k] = scales[k];
          tensor.groupZeros[at * groups + k] = zeros[k];
        }
        for (int64_t c = 0; c < cols; ++c) {
          const float code = codes[c], scale = scales[c / group],
                      zero = zeros[c / group];
          if (code > top)
            return report(at, llvm::formatv("{0}: {1} holds {2} at [{3}, "
                                            "{4}]; {5}-bit codes are 0..{6}",
                                            g.codes->path, g.codes->name,
                                            int(code), r, c, bits, int(top)));
          // The values must be the grid's, to a quarter step (and to their
          // own precision: a BF16 checkpoint rounds them).
          const float value = (code - zero) * scale;
          if (!(std::fabs(row[c] - value) <=
                0.25f * std::fabs(scale) + std::fabs(value) * 0x1p-7f))
            return report(
                at, llvm::formatv(
                        "{0}: {1}[{2}, {3}] is {4}, but its {9}-bit grid "
                        "gives ({5} - {6}) * {7} = {8}; the values and "
                        "{1}.int{9}_* must agree",
                        ckpt.directory(), name, r, c, number(row[c]), int(code),
                        number(zero), number(scale), number(value), bits));
          tensor.codes[size_t(at * cols + c)] = uint8_t(code);
        }
      });
      tensor.releaseValues((first + block) * cols, (end - block) * cols);
      if (!fault.empty())
        return error(fault);
    }
    first += partRows;
  }
  tensor.gridImported = true;
  return true;
}

llvm::Error WeightLoader::grouped(PackTensor &tensor) {
  if (reuse(tensor))
    return llvm::Error::success();
  llvm::Expected<bool> imported = importGrid(tensor);
  if (!imported)
    return imported.takeError();
  if (*imported) {
    storeSides(tensor);
    return llvm::Error::success();
  }
  const int64_t rows = tensor.shape[0], cols = tensor.codeCols,
                group = tensor.group, groups = cols / group;
  const bool symmetric = tensor.symmetricGroups;
  tensor.groupScales.resize(rows * groups);
  tensor.groupZeros.resize(rows * groups);
  // Calibrated importance of each input channel (mean x^2), if any.
  const std::vector<float> *importance = nullptr;
  if (auto it = options.importance.find(tensor.name);
      it != options.importance.end() && int64_t(it->second.size()) == cols)
    importance = &it->second;
  // --gptq: the whole matrix rounded at once against its input's second
  // moment.
  const std::vector<float> *moment = nullptr;
  if (options.secondMoments)
    if (auto it = options.secondMoments->find(tensor.name);
        it != options.secondMoments->end() &&
        int64_t(it->second.size()) == cols * cols)
      moment = &it->second;
  if (moment) {
    std::vector<float> values(size_t(rows * cols));
    tensor.readValues(0, rows * cols, values.data());
    tensor.releaseValues(0, rows * cols);
    std::vector<Int4Group> grids(size_t(rows * groups));
    tensor.codes.resize(size_t(rows * cols));
    if (!gptqInt4(values.data(), rows, cols, group, symmetric, moment->data(),
                  grids.data(), tensor.codes.data(), 0.01, tensor.codeBits))
      return error("--gptq: the calibrated second moment of " + tensor.name +
                   "'s input is not positive definite");
    for (size_t i = 0; i < grids.size(); ++i) {
      tensor.groupScales[i] = grids[i].scale;
      tensor.groupZeros[i] = grids[i].zero;
    }
  }
  // Blocks of 1024 rows, their rows searched in parallel; each block's
  // checkpoint pages are released after it (bounded RSS while streaming).
  for (int64_t block = 0; block < rows && !moment; block += 1024) {
    const int64_t end = std::min<int64_t>(rows, block + 1024);
    llvm::parallelFor(block, end, [&](size_t r) {
      std::vector<float> row(cols);
      tensor.readValues(int64_t(r) * cols, cols, row.data());
      for (int64_t g = 0; g < groups; ++g) {
        const float *values = row.data() + g * group;
        const float *weights =
            importance ? importance->data() + g * group : nullptr;
        Int4Group q =
            tensor.codeBits == 6 ? searchInt6Group(values, group, weights)
            : symmetric ? searchSymmetricInt4Group(values, group, weights)
                        : searchInt4Group(values, group, weights);
        tensor.groupScales[r * groups + g] = q.scale;
        tensor.groupZeros[r * groups + g] = q.zero;
      }
    });
    tensor.releaseValues(block * cols, (end - block) * cols);
  }
  // Half precision: 4 + 2 x 16 / 128 = 4.25 bits per weight. Zero points
  // (0..15, or 0..63) are exact; scales are rounded to f16 here so the codes
  // are chosen against the scales the kernels will read. Symmetric zero points
  // are all 8 and not stored.
  for (float &v : tensor.groupScales)
    v = halfToFloat(floatToHalf(v));
  if (!symmetric)
    for (float &v : tensor.groupZeros)
      v = halfToFloat(floatToHalf(v));
  storeSides(tensor);
  return llvm::Error::success();
}

void WeightLoader::storeSides(PackTensor &tensor) {
  // Dense codes: the scales and zero points are tensors of their own (grouped
  // rows store them in each row).
  if (tensor.scales >= 0)
    plan.tensors[tensor.scales].values = tensor.groupScales;
  if (tensor.zeros >= 0)
    plan.tensors[tensor.zeros].values = tensor.groupZeros;
}

void WeightLoader::int8Rows(PackTensor &tensor) {
  if (reuse(tensor))
    return;
  // Symmetric int8 per output row; scale = max |row| / 127.
  const int64_t rows = tensor.shape[0], cols = tensor.shape.back();
  tensor.rowScales.resize(rows);
  // The scan streams the checkpoint mapping: release what it read every
  // 1024 rows to keep RSS bounded.
  for (int64_t block = 0; block < rows; block += 1024) {
    const int64_t end = std::min<int64_t>(rows, block + 1024);
    llvm::parallelFor(block, end, [&](size_t r) {
      std::vector<float> row(cols);
      tensor.readValues(int64_t(r) * cols, cols, row.data());
      tensor.rowScales[r] =
          symmetricInt8Scale([&](int64_t c) { return row[c]; }, cols);
    });
    tensor.releaseValues(block * cols, (end - block) * cols);
  }
  plan.tensors[tensor.scales].values = tensor.rowScales;
}

} // namespace

llvm::Error loadWeights(ModelPlan &plan, const Checkpoint &checkpoint) {
  setPlanConfig(plan, checkpoint.config());
  return WeightLoader(plan, checkpoint).run();
}

} // namespace spark
