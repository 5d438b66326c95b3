//===- PackWriter.cpp - write the weight pack (model.spkw) ----------------===//
#include "spark/Codegen/Emit.h"

#include "spark/pack_format.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Parallel.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace llvm;

namespace spark {

namespace {

/// Converts `count` source elements starting at `first` into `out` in the
/// pack's dtype.
void convert(const PackTensor &t, int64_t first, int64_t count,
             std::vector<uint8_t> &out) {
  const size_t size = dtypeSize(t.dtype);
  out.resize(count * size);
  // Pieces of 64 Ki elements in parallel (quantized elements are computed
  // from the checkpoint's values here).
  constexpr int64_t kPiece = 1 << 16;
  llvm::parallelFor(0, (count + kPiece - 1) / kPiece, [&](size_t piece) {
    const int64_t begin = int64_t(piece) * kPiece;
    const int64_t end = std::min(count, begin + kPiece);
    std::vector<float> stored(end - begin);
    t.readElements(first + begin, end - begin, stored.data());
    for (int64_t i = begin; i < end; ++i)
      encodeElement(stored[i - begin], t.dtype, &out[i * size]);
  });
}

} // namespace

Error writeWeightPack(const ModelPlan &plan, StringRef path) {
  std::error_code ec;
  raw_fd_ostream os(path, ec);
  if (ec)
    return createStringError(ec, "%s: cannot write: %s", path.str().c_str(),
                             ec.message().c_str());
  std::vector<spark_pack_entry> table(plan.tensors.size());
  spark_pack_header header;
  std::memset(&header, 0, sizeof(header));
  std::memcpy(header.magic, SPARK_PACK_MAGIC, 8);
  header.version = SPARK_PACK_VERSION;
  header.header_bytes = sizeof(header);
  header.abi_hash = plan.abiHash;
  header.config_hash = plan.configHash;
  std::strncpy(header.target, plan.options.target.c_str(),
               sizeof(header.target) - 1);
  header.tensor_count = table.size();
  header.table_offset = sizeof(header);

  uint64_t offset = sizeof(header) + table.size() * sizeof(spark_pack_entry);
  auto pad = [&](uint64_t to) {
    static const char zeros[4096] = {};
    while (offset < to) {
      uint64_t n = std::min<uint64_t>(to - offset, sizeof(zeros));
      os.write(zeros, n);
      offset += n;
    }
  };
  // Placeholder header and table; rewritten once checksums are known.
  os.write(reinterpret_cast<const char *>(&header), sizeof(header));
  os.write(reinterpret_cast<const char *>(table.data()),
           table.size() * sizeof(spark_pack_entry));

  std::vector<uint8_t> chunk;
  constexpr int64_t kChunkElements = 1 << 20;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const PackTensor &t = plan.tensors[i];
    spark_pack_entry &e = table[i];
    if (t.name.size() >= sizeof(e.name))
      return createStringError(inconvertibleErrorCode(),
                               "tensor name '%s' is longer than the pack's "
                               "%zu-byte limit",
                               t.name.c_str(), sizeof(e.name) - 1);
    std::strncpy(e.name, t.name.c_str(), sizeof(e.name) - 1);
    e.dtype = uint32_t(t.dtype); // DType values are spark_dtype's
    e.layout = uint32_t(t.layout);
    e.rank = uint32_t(t.shape.size());
    for (size_t d = 0; d < t.shape.size() && d < 4; ++d)
      e.shape[d] = t.shape[d];
    pad(alignTo(offset, SPARK_PACK_ALIGNMENT));
    e.offset = offset;
    e.bytes = t.bytes();
    // Chunks of 1 M elements are multiples of 32 bytes, as the streaming
    // checksum needs.
    spark_checksum_state checksum;
    spark_checksum_init(&checksum);
    for (int64_t first = 0; first < t.elements(); first += kChunkElements) {
      int64_t count = std::min<int64_t>(kChunkElements, t.elements() - first);
      convert(t, first, count, chunk);
      spark_checksum_update(&checksum, chunk.data(), chunk.size());
      os.write(reinterpret_cast<const char *>(chunk.data()), chunk.size());
      offset += chunk.size();
      // The sources are file mappings: drop what was read from our RSS.
      t.releaseValues(first * t.valuesPerElement(),
                      count * t.valuesPerElement());
    }
    e.checksum = spark_checksum_final(&checksum);
  }
  header.file_bytes = offset;
  os.close();
  if (os.has_error()) {
    std::string message = os.error().message();
    os.clear_error();
    return createStringError(inconvertibleErrorCode(), "%s: write failed: %s",
                             path.str().c_str(), message.c_str());
  }

  header.table_checksum =
      spark_checksum(table.data(), table.size() * sizeof(spark_pack_entry));
  int fd;
  if (std::error_code openError = sys::fs::openFileForReadWrite(
          path, fd, sys::fs::CD_OpenExisting, sys::fs::OF_None))
    return createStringError(openError, "%s: cannot reopen",
                             path.str().c_str());
  raw_fd_ostream patch(fd, /*shouldClose=*/true);
  patch.seek(0);
  patch.write(reinterpret_cast<const char *>(&header), sizeof(header));
  patch.write(reinterpret_cast<const char *>(table.data()),
              table.size() * sizeof(spark_pack_entry));
  patch.close();
  if (patch.has_error()) {
    patch.clear_error();
    return createStringError(inconvertibleErrorCode(),
                             "%s: cannot write the header", path.str().c_str());
  }
  return Error::success();
}

} // namespace spark
