//===- Safetensors.cpp - map and validate safetensors files ---------------===//
#include "spark/Import/Safetensors.h"
#include "spark/Import/FloatFormats.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Process.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sys/mman.h>

using namespace llvm;

namespace spark {

StringRef dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I8:
    return "I8";
  case DType::U8:
    return "U8";
  }
  llvm_unreachable("unknown dtype");
}

size_t dtypeSize(DType dtype) {
  return dtype == DType::F32                          ? 4
         : (dtype == DType::I8 || dtype == DType::U8) ? 1
                                                      : 2;
}

void encodeElement(float value, DType dtype, uint8_t *out) {
  if (dtype == DType::U8) { // a byte value 0..255
    float r = std::nearbyint(value);
    *out = uint8_t(r > 255.0f ? 255.0f : r < 0.0f ? 0.0f : r);
    return;
  }
  if (dtype == DType::I8) { // already a code: round and saturate
    float r = std::nearbyint(value);
    *out = uint8_t(int8_t(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r));
    return;
  }
  if (dtype == DType::F32) {
    std::memcpy(out, &value, 4);
    return;
  }
  uint16_t bits = dtype == DType::F16 ? floatToHalf(value) : floatToBF16(value);
  std::memcpy(out, &bits, 2);
}

int64_t TensorView::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

namespace {

template <typename T> T load(const uint8_t *p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

/// Index of the first of n elements whose exponent bits are all ones (Inf or
/// NaN), or -1.
int64_t firstNonFinite(const uint8_t *data, int64_t n, DType dtype) {
  switch (dtype) {
  case DType::I8:
  case DType::U8:
    return -1; // integers are always finite
  case DType::F32:
    for (int64_t i = 0; i < n; ++i)
      if ((load<uint32_t>(data + 4 * i) & 0x7f800000u) == 0x7f800000u)
        return i;
    return -1;
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      if ((load<uint16_t>(data + 2 * i) & 0x7c00u) == 0x7c00u)
        return i;
    return -1;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      if ((load<uint16_t>(data + 2 * i) & 0x7f80u) == 0x7f80u)
        return i;
    return -1;
  }
  return -1;
}

Error fileError(StringRef path, const Twine &what) {
  return createStringError(inconvertibleErrorCode(), "%s: %s",
                           path.str().c_str(), what.str().c_str());
}

/// The first key that appears twice in the top-level object of `text`, or
/// "". llvm::json keeps the last of duplicate keys silently; a safetensors
/// header that names a tensor twice is malformed.
std::string duplicateTopLevelKey(StringRef text) {
  StringSet<> seen;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      size_t start = ++i;
      while (i < text.size() && text[i] != '"')
        i += text[i] == '\\' ? 2 : 1;
      if (depth != 1)
        continue;
      size_t next = text.find_first_not_of(" \t\r\n", i + 1);
      if (next == StringRef::npos || text[next] != ':')
        continue;
      // Compare decoded names: "a\u0062" and "ab" are the same tensor.
      std::string name = text.slice(start, i).str();
      if (name.find('\\') != std::string::npos) {
        Expected<json::Value> decoded =
            json::parse(text.slice(start - 1, i + 1));
        if (decoded && decoded->getAsString())
          name = decoded->getAsString()->str();
        else
          consumeError(decoded.takeError());
      }
      if (!seen.insert(name).second)
        return name;
    }
  }
  return "";
}

/// The safetensors format caps the header at 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

} // namespace

float TensorView::element(int64_t i) const {
  switch (dtype) {
  case DType::F32:
    return load<float>(data + 4 * i);
  case DType::F16:
    return halfToFloat(load<uint16_t>(data + 2 * i));
  case DType::BF16:
    return bf16ToFloat(load<uint16_t>(data + 2 * i));
  case DType::I8:
    return float(int8_t(data[i]));
  case DType::U8:
    return float(data[i]);
  }
  return 0.0f;
}

void TensorView::elements(int64_t first, int64_t count, float *out) const {
  // One loop per dtype, the same conversions as element().
  auto each = [&](auto convert) {
    for (int64_t i = 0; i < count; ++i)
      out[i] = convert(first + i);
  };
  switch (dtype) {
  case DType::F32:
    return each([&](int64_t i) { return load<float>(data + 4 * i); });
  case DType::F16:
    return each(
        [&](int64_t i) { return halfToFloat(load<uint16_t>(data + 2 * i)); });
  case DType::BF16:
    return each(
        [&](int64_t i) { return bf16ToFloat(load<uint16_t>(data + 2 * i)); });
  case DType::I8:
    return each([&](int64_t i) { return float(int8_t(data[i])); });
  case DType::U8:
    return each([&](int64_t i) { return float(data[i]); });
  }
  std::fill(out, out + count, 0.0f);
}

Expected<std::unique_ptr<SafetensorsFile>>
SafetensorsFile::open(StringRef path) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->filePath = path.str();

  Expected<sys::fs::file_t> handle = sys::fs::openNativeFileForRead(path);
  if (!handle)
    return fileError(path, "cannot open: " + toString(handle.takeError()));
  scope_exit closeHandle([&] { sys::fs::closeFile(*handle); });
  sys::fs::file_status status;
  if (std::error_code ec = sys::fs::status(*handle, status))
    return fileError(path, "cannot stat: " + ec.message());
  uint64_t size = status.getSize();
  if (size < 8)
    return fileError(path, formatv("is {0} bytes, too short for the 8-byte "
                                   "header length of a safetensors file",
                                   size));
  std::error_code ec;
  file->region = sys::fs::mapped_file_region(
      *handle, sys::fs::mapped_file_region::readonly, size, 0, ec);
  if (ec)
    return fileError(path, "cannot map: " + ec.message());
  const uint8_t *base =
      reinterpret_cast<const uint8_t *>(file->region.const_data());

  uint64_t headerBytes = support::endian::read64le(base);
  if (headerBytes > size - 8)
    return fileError(path, formatv("header length {0} runs past the end of "
                                   "the file ({1} bytes)",
                                   headerBytes, size));
  if (headerBytes > kMaxHeaderBytes)
    return fileError(path, formatv("header length {0} exceeds the format's "
                                   "100 MB limit",
                                   headerBytes));
  StringRef headerText(reinterpret_cast<const char *>(base + 8), headerBytes);
  Expected<json::Value> header = json::parse(headerText);
  if (!header)
    return fileError(path, "header is not valid JSON: " +
                               toString(header.takeError()));
  const json::Object *entries = header->getAsObject();
  if (!entries)
    return fileError(path, "header must be a JSON object");
  std::string duplicate = duplicateTopLevelKey(headerText);
  if (!duplicate.empty())
    return fileError(path,
                     "tensor '" + duplicate + "' is duplicated in the header");

  const uint8_t *dataStart = base + 8 + headerBytes;
  uint64_t dataBytes = size - 8 - headerBytes;
  for (const auto &entry : *entries) {
    StringRef name = entry.first;
    if (name == "__metadata__")
      continue;
    auto tensorError = [&](const Twine &what) {
      return fileError(path, "tensor '" + name + "' " + what);
    };
    const json::Object *fields = entry.second.getAsObject();
    if (!fields)
      return tensorError("must be described by a JSON object");
    TensorView view;
    view.name = name.str();
    view.path = file->filePath;

    std::optional<StringRef> dtype = fields->getString("dtype");
    if (!dtype)
      return tensorError("has no string 'dtype'");
    if (*dtype == "F32")
      view.dtype = DType::F32;
    else if (*dtype == "F16")
      view.dtype = DType::F16;
    else if (*dtype == "BF16")
      view.dtype = DType::BF16;
    else if (*dtype == "U8") // the codes of an imported 4-bit grid
      view.dtype = DType::U8;
    else
      return tensorError("has dtype '" + *dtype +
                         "'; expected F32, F16, BF16 or U8");

    const json::Array *shape = fields->getArray("shape");
    if (!shape)
      return tensorError("has no 'shape' array");
    uint64_t elements = 1;
    for (const json::Value &d : *shape) {
      std::optional<int64_t> extent = d.getAsInteger();
      if (!extent || *extent < 0)
        return tensorError("has a shape entry that is not a non-negative "
                           "integer");
      view.shape.push_back(*extent);
      if (*extent != 0 && elements > (UINT64_MAX / 4) / uint64_t(*extent))
        return tensorError("has a shape too large to address");
      elements *= uint64_t(*extent);
    }

    const json::Array *offsets = fields->getArray("data_offsets");
    std::optional<int64_t> begin, end;
    if (offsets && offsets->size() == 2) {
      begin = (*offsets)[0].getAsInteger();
      end = (*offsets)[1].getAsInteger();
    }
    if (!begin || !end || *begin < 0 || *end < *begin)
      return tensorError("needs 'data_offsets' [begin, end] with 0 <= begin "
                         "<= end");
    uint64_t expectedBytes = elements * dtypeSize(view.dtype);
    if (uint64_t(*end - *begin) != expectedBytes)
      return tensorError(formatv("has shape x dtype size = {0} bytes but "
                                 "data_offsets [{1}, {2}] span {3} bytes",
                                 expectedBytes, *begin, *end, *end - *begin));
    if (uint64_t(*end) > dataBytes)
      return tensorError(formatv("data_offsets [{0}, {1}] run past the data "
                                 "section ({2} bytes)",
                                 *begin, *end, dataBytes));
    view.data = dataStart + *begin;
    view.bytes = expectedBytes;
    view.fileOffset = 8 + headerBytes + uint64_t(*begin);
    file->tensorViews.push_back(std::move(view));
  }

  // Ranges must not overlap.
  std::vector<const TensorView *> byOffset;
  for (const TensorView &view : file->tensorViews)
    byOffset.push_back(&view);
  llvm::sort(byOffset, [](const TensorView *a, const TensorView *b) {
    return a->data < b->data;
  });
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const TensorView *prev = byOffset[i - 1], *cur = byOffset[i];
    if (cur->data < prev->data + prev->bytes)
      return fileError(path, "tensors '" + prev->name + "' and '" + cur->name +
                                 "' overlap in the data section");
  }
  // Keep header order stable for callers: sort by name.
  llvm::sort(file->tensorViews, [](const TensorView &a, const TensorView &b) {
    return a.name < b.name;
  });
  return file;
}

void releaseResidentPages(const TensorView &tensor, int64_t first,
                          int64_t count) {
  // Only whole pages inside the range; the mapping is shared and read-only,
  // so MADV_DONTNEED just unmaps them from this process.
  const uint64_t pageSize = sys::Process::getPageSizeEstimate();
  const size_t elementSize = dtypeSize(tensor.dtype);
  uintptr_t begin =
      reinterpret_cast<uintptr_t>(tensor.data + first * elementSize);
  uintptr_t end = begin + uintptr_t(count) * elementSize;
  uintptr_t from = alignTo(begin, pageSize), to = alignDown(end, pageSize);
  if (to > from)
    ::madvise(reinterpret_cast<void *>(from), to - from, MADV_DONTNEED);
}

Error SafetensorsFile::checkFinite(const TensorView &tensor) const {
  const size_t elementSize = dtypeSize(tensor.dtype);
  // Scan in chunks, releasing the scanned pages from our resident set.
  const int64_t chunkElements = (int64_t(16) << 20) / elementSize;
  int64_t total = tensor.numElements();
  for (int64_t first = 0; first < total; first += chunkElements) {
    int64_t n = std::min(chunkElements, total - first);
    const uint8_t *chunk = tensor.data + first * elementSize;
    int64_t bad = firstNonFinite(chunk, n, tensor.dtype);
    if (bad >= 0) {
      std::string index;
      int64_t flat = first + bad;
      for (size_t d = tensor.shape.size(); d-- > 0;) {
        index = std::to_string(flat % tensor.shape[d]) +
                (index.empty() ? "" : ", ") + index;
        flat /= tensor.shape[d];
      }
      float value = tensor.element(first + bad);
      StringRef kind = std::isnan(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";
      return fileError(filePath,
                       formatv("tensor '{0}' has a non-finite value ({1}) at "
                               "[{2}]; weights must be finite",
                               tensor.name, kind, index));
    }
    releaseResidentPages(tensor, first, n);
  }
  return Error::success();
}

} // namespace spark
