//===- PackReader.cpp - a weight pack written earlier, read back ----------===//
#include "spark/Codegen/PackReader.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstring>

using namespace llvm;

namespace spark {

Expected<std::shared_ptr<PackReader>> PackReader::open(StringRef path) {
  auto fail = [&](const Twine &what) -> Error {
    return createStringError(inconvertibleErrorCode(), "%s: %s",
                             path.str().c_str(), what.str().c_str());
  };
  // Mapped (never read into memory): the writer drops the pages it copied.
  Expected<sys::fs::file_t> opened = sys::fs::openNativeFileForRead(path);
  if (!opened)
    return fail("cannot read: " + toString(opened.takeError()));
  sys::fs::file_t fd = *opened;
  sys::fs::file_status status;
  std::error_code ec = sys::fs::status(fd, status);
  if (ec) {
    sys::fs::closeFile(fd);
    return fail("cannot read: " + ec.message());
  }
  const uint64_t size = status.getSize();
  spark_pack_header header;
  if (size < sizeof(header)) {
    sys::fs::closeFile(fd);
    return fail(formatv("{0} bytes, shorter than a weight pack's header ({1})",
                        size, sizeof(header)));
  }
  auto region = std::make_unique<sys::fs::mapped_file_region>(
      fd, sys::fs::mapped_file_region::readonly, size, 0, ec);
  sys::fs::closeFile(fd);
  if (ec)
    return fail("cannot map: " + ec.message());
  auto reader = std::make_shared<PackReader>();
  reader->filePath = path.str();
  reader->file = std::move(region);
  const char *data = reader->file->const_data();
  std::memcpy(&header, data, sizeof(header));
  if (std::memcmp(header.magic, SPARK_PACK_MAGIC, 8) != 0)
    return fail("not a weight pack (no SPKWPACK magic)");
  if (header.version != SPARK_PACK_VERSION ||
      header.header_bytes != sizeof(header))
    return fail(formatv("pack format version {0}, expected {1}", header.version,
                        SPARK_PACK_VERSION));
  if (header.file_bytes != size)
    return fail(formatv("{0} bytes, its header says {1} (truncated?)", size,
                        header.file_bytes));
  const uint64_t entryBytes = sizeof(spark_pack_entry);
  if (header.table_offset > size ||
      header.tensor_count > (size - header.table_offset) / entryBytes)
    return fail(formatv("a table of {0} tensors at {1} does not fit in the "
                        "file",
                        header.tensor_count, header.table_offset));
  reader->table.resize(header.tensor_count);
  std::memcpy(reader->table.data(), data + header.table_offset,
              header.tensor_count * entryBytes);
  if (spark_checksum(reader->table.data(), header.tensor_count * entryBytes) !=
      header.table_checksum)
    return fail("its tensor table does not match its checksum");
  for (size_t i = 0; i < reader->table.size(); ++i) {
    spark_pack_entry &e = reader->table[i];
    e.name[sizeof(e.name) - 1] = '\0';
    if (e.offset > size || e.bytes > size - e.offset)
      return fail(formatv("tensor '{0}' ({1} bytes at {2}) lies past the end",
                          e.name, e.bytes, e.offset));
    reader->entries[e.name] = i;
  }
  header.target[sizeof(header.target) - 1] = '\0';
  reader->builtFor = header.target;
  reader->config = header.config_hash;
  return reader;
}

std::optional<PackReader::Stored>
PackReader::find(StringRef name, DType dtype, int layout,
                 ArrayRef<int64_t> shape) const {
  auto it = entries.find(name);
  if (it == entries.end())
    return std::nullopt;
  const spark_pack_entry &e = table[it->second];
  if (e.dtype != uint32_t(dtype) || e.layout != uint32_t(layout) ||
      e.rank != shape.size() || shape.size() > 4)
    return std::nullopt;
  uint64_t elements = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (e.shape[d] != shape[d])
      return std::nullopt;
    elements *= uint64_t(shape[d]);
  }
  if (e.bytes != elements * dtypeSize(dtype))
    return std::nullopt;
  Stored stored;
  stored.bytes = ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(file->const_data()) + e.offset,
      e.bytes);
  stored.checksum = e.checksum;
  return stored;
}

} // namespace spark
