//===- PackWriter.cpp - write the weight pack (model.spkw) ----------------===//
#include "spark/Codegen/Emit.h"
#include "spark/Codegen/PackReader.h"

#include "spark/pack_format.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Parallel.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

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

/// Writes the pack to disk behind the writer and drops what is on disk from
/// the page cache, so that the runtime's first mapping (MADV_HUGEPAGE) reads
/// the pack back in 2 MiB folios: the pages this process writes are small
/// folios, the kernel keeps a cached file in the folios it has, and decode
/// streams huge folios with far fewer TLB misses (1.7b w4a16 on an Intel Xeon:
/// 13.4 -> 16.1 tok/s at 1 thread). Writeback of one window starts as the
/// next is converted, so the disk works while the weights are quantized.
class WriteBehind {
public:
  WriteBehind(raw_fd_ostream &os, int fd) : os(os), fd(fd) {}

  /// Called with the bytes written so far.
  void written(uint64_t offset) {
#ifdef __linux__
    if (offset - started < kWindow)
      return;
    os.flush();
    // The previous window: wait for its writeback, then drop it.
    if (started > dropped) {
      ::sync_file_range(fd, off_t(dropped), off_t(started - dropped),
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                            SYNC_FILE_RANGE_WAIT_AFTER);
      ::posix_fadvise(fd, off_t(dropped), off_t(started - dropped),
                      POSIX_FADV_DONTNEED);
      dropped = started;
    }
    ::sync_file_range(fd, off_t(started), off_t(offset - started),
                      SYNC_FILE_RANGE_WRITE);
    started = offset;
#else
    (void)offset;
#endif
  }

private:
  static constexpr uint64_t kWindow = uint64_t(64) << 20;
  raw_fd_ostream &os;
  int fd;
  uint64_t started = 0, dropped = 0;
};

/// Writes the rest of the pack (open as `fd`, at `path`) to disk and drops it
/// from the page cache (WriteBehind); closes fd.
Error syncAndDrop(int fd, StringRef path) {
  const bool synced = ::fdatasync(fd) == 0;
  const int syncErrno = errno;
#ifdef POSIX_FADV_DONTNEED
  if (synced)
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); // advice: no error path
#endif
  ::close(fd);
  if (!synced)
    return createStringError(
        std::error_code(syncErrno, std::generic_category()),
        "%s: cannot write to disk: %s", path.str().c_str(),
        std::strerror(syncErrno));
  return Error::success();
}

} // namespace

Error writeWeightPack(const ModelPlan &plan, StringRef path) {
  int fd;
  if (std::error_code ec =
          sys::fs::openFileForWrite(path, fd, sys::fs::CD_CreateAlways))
    return createStringError(ec, "%s: cannot write: %s", path.str().c_str(),
                             ec.message().c_str());
  raw_fd_ostream os(fd, /*shouldClose=*/true);
  std::vector<spark_pack_entry> table(plan.tensors.size());
  spark_pack_header header;
  std::memset(&header, 0, sizeof(header));
  std::memcpy(header.magic, SPARK_PACK_MAGIC, 8);
  header.version = SPARK_PACK_VERSION;
  header.header_bytes = sizeof(header);
  header.abi_hash = plan.abiHash;
  header.config_hash = plan.configHash;
  std::strncpy(header.target, stringifyTargetKind(plan.options.target).data(),
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
  constexpr uint64_t kChunkBytes = SPARK_CHECKSUM_BLOCK * 16;
  WriteBehind behind(os, fd);
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
    auto append = [&](const uint8_t *bytes, size_t n) {
      spark_checksum_update(&checksum, bytes, n);
      os.write(reinterpret_cast<const char *>(bytes), n);
      offset += n;
      behind.written(offset);
    };
    if (!t.stored.empty()) {
      // Bytes an earlier build of the same options stored (weightsFrom),
      // checked against their checksum as they are copied.
      if (t.stored.size() != e.bytes)
        return createStringError(inconvertibleErrorCode(),
                                 "tensor '%s': %zu stored bytes, expected %llu",
                                 t.name.c_str(), t.stored.size(),
                                 (unsigned long long)e.bytes);
      for (uint64_t first = 0; first < e.bytes; first += kChunkBytes) {
        const uint64_t n = std::min<uint64_t>(kChunkBytes, e.bytes - first);
        append(t.stored.data() + first, n);
        TensorView copied; // drop what was read from our RSS
        copied.dtype = DType::U8;
        copied.data = t.stored.data();
        releaseResidentPages(copied, int64_t(first), int64_t(n));
      }
      e.checksum = spark_checksum_final(&checksum);
      if (e.checksum != t.storedChecksum)
        return createStringError(
            inconvertibleErrorCode(),
            "%s: tensor '%s' does not match its checksum (the pack is "
            "damaged)",
            plan.weightsFrom ? plan.weightsFrom->path().c_str() : "the pack",
            t.name.c_str());
      continue;
    }
    for (int64_t first = 0; first < t.elements(); first += kChunkElements) {
      int64_t count = std::min<int64_t>(kChunkElements, t.elements() - first);
      convert(t, first, count, chunk);
      append(chunk.data(), chunk.size());
      // The sources are file mappings: drop what was read from our RSS.
      t.releaseElements(first, count);
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
  int patchFd;
  if (std::error_code openError = sys::fs::openFileForReadWrite(
          path, patchFd, sys::fs::CD_OpenExisting, sys::fs::OF_None))
    return createStringError(openError, "%s: cannot reopen",
                             path.str().c_str());
  raw_fd_ostream patch(patchFd, /*shouldClose=*/false);
  patch.seek(0);
  patch.write(reinterpret_cast<const char *>(&header), sizeof(header));
  patch.write(reinterpret_cast<const char *>(table.data()),
              table.size() * sizeof(spark_pack_entry));
  patch.flush();
  if (patch.has_error()) {
    patch.clear_error();
    ::close(patchFd);
    return createStringError(inconvertibleErrorCode(),
                             "%s: cannot write the header", path.str().c_str());
  }
  return syncAndDrop(patchFd, path);
}

} // namespace spark
